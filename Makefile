# goverbs: `make test` is what CI runs (.ci/run).
#   make test    setup, lint, host unit tests (-race), fuzzers, the kernel rig on every kernel,
#                then two machines (pair)
#   make unit    go test -race -count=1 ./...  (rig tests skip themselves on the host)
#   make fuzz    every Fuzz* function in the module for $(FUZZTIME) each
#   make rig     the rig suite: rig tests on Debian's kernels in QEMU (test/rig/README.md);
#                KERNELS may name any of the matrix: 5.10 6.1 6.12 newest 6.12-arm64
#   make pair    two guests (PAIR_KERNELS) on a QEMU socket network: pingpong interop between them,
#                then the rdma_cm steps of pair-cm in the same two boots (PAIR_CM=0: not those)
#   make pair-cm two guests: rdma_cm interop between them (rping, ucmatose, udaddy, mckey,
#                rdma_server/rdma_client, perftest -R and rstream against goverbs, both roles)
#   make demo    boot one kernel (KERNEL=5.10|6.1|6.12|newest|6.12-arm64) and show goverbs working in it
#   make lint    gofmt, go vet, staticcheck (pinned: STATICCHECK_VERSION)
#   make setup   install the host packages the rig needs (Debian 12)
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.NOTPARALLEL:
# A fresh machine has Go here but not always on PATH.
export PATH := $(PATH):/usr/local/go/bin

GO ?= go
# Fuzz budgets are execution counts, not durations: Go 1.26's fuzz coordinator
# can fail a target with "context deadline exceeded" and no crasher when a
# -fuzztime duration runs out under load (golang/go#75804, fixed in Go 1.27;
# seen here on FuzzSysfsDevices). A count has no deadline to race.
FUZZTIME ?= 100000x
# The matrix (test/rig/README.md, "Kernel matrix"): Debian 11's 5.10, 6.1,
# 6.12, the newest kernel Debian publishes (7.3 today) and arm64 6.12.
KERNELS ?= 5.10 6.1 6.12 newest 6.12-arm64
# The two machines of `make pair`: two different kernels, any of the matrix;
# the rdma_cm steps (pair-cm.sh) run after the pingpong steps unless PAIR_CM=0.
PAIR_KERNELS ?= 6.1 6.12
PAIR_CM ?= 1
KERNEL ?= 6.1
# Tools built into the guest's PATH for the rig tests.
RIG_TOOLS ?= ./cmd/...
CACHE := $(CURDIR)/.cache
GOBIN_CACHE := $(CACHE)/gobin
# Lint tools are pinned: a new staticcheck release can add checks that fail
# a tree that passed yesterday. v0.8.2 (staticcheck 2026.2.2) understands Go
# 1.26; the binary's name carries the version, so bumping it reinstalls.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(GOBIN_CACHE)/staticcheck-$(STATICCHECK_VERSION)

# The demo runs ibvinfo and ping-pongs goverbs against rdma-core in the guest.
# DEMO=rigtests runs the rig tests instead (the demo before the tools worked).
DEMO ?= tools
DEMO_CMD ?= set -eo pipefail; ibvinfo; pp() { until netstat -ltn | grep -q ":18515 "; do sleep 0.1; done; }; pair() { echo "== $$1 server, $$2 client: rxe0 loopback, RC, -g 1 -c -n 200"; $$3 -d rxe0 -g 1 -c -n 200 2>&1 | sed "s/^/  $$1 server | /" & pp; $$4 -d rxe0 -g 1 -c -n 200 127.0.0.1 2>&1 | sed "s/^/  $$2 client | /"; wait $$!; }; pair goverbs rdma-core "pingpong rc" ibv_rc_pingpong; pair rdma-core goverbs ibv_rc_pingpong "pingpong rc"; echo "demo: goverbs and rdma-core ping-ponged both ways"

.PHONY: test unit fuzz rig pair pair-cm demo lint setup

test: setup lint unit fuzz rig pair

setup:
	test/rig/setup.sh

# The TestAllocs tests run again without -race: the race detector's
# sync.Pool drops items, so allocation counts need a normal build.
unit:
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run '^TestAllocs' ./...

# Go fuzzes one function per run, so each Fuzz* found in a _test.go file (in
# the directories Go builds: no testdata, no dot or underscore dirs) gets its own.
fuzz:
	@n=0; \
	while read -r f; do \
	  for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
	    echo "fuzz: $$fn in ./$$(dirname "$${f#./}") for $(FUZZTIME)"; \
	    $(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "./$$(dirname "$${f#./}")"; \
	    n=$$((n + 1)); \
	  done; \
	done < <(find . -mindepth 1 \( -name '.*' -o -name '_*' -o -name testdata \) -prune -o -name '*_test.go' -print | LC_ALL=C sort); \
	echo "fuzz: $$n fuzzers ran"

rig: setup
	test/rig/suite.sh --kernels "$(KERNELS)" $(if $(RIG_TOOLS),--tools '$(RIG_TOOLS)')

pair: setup
	test/rig/pair.sh --pingpong $(if $(filter-out 0,$(PAIR_CM)),--cm) --kernels "$(PAIR_KERNELS)"

pair-cm: setup
	test/rig/pair.sh --cm --kernels "$(PAIR_KERNELS)"

demo: setup
ifeq ($(DEMO),tools)
	test/rig/run.sh --kernel $(KERNEL) --go ./cmd/... -- '$(DEMO_CMD)'
else
	@echo "demo: DEMO=$(DEMO): running the rig tests instead of ibvinfo/pingpong"
	test/rig/suite.sh --kernels $(KERNEL) --tools ./cmd/...
endif

lint:
	@files=$$(find . -mindepth 1 \( -name '.*' -o -name '_*' -o -name testdata \) -prune -o -name '*.go' -print); \
	bad=$$(gofmt -l $$files); \
	if [ -n "$$bad" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	@[ -x $(STATICCHECK) ] || { echo "lint: installing staticcheck $(STATICCHECK_VERSION) into $(GOBIN_CACHE)"; \
	  mkdir -p $(GOBIN_CACHE)/staticcheck-tmp; \
	  GOBIN=$(GOBIN_CACHE)/staticcheck-tmp $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	  mv $(GOBIN_CACHE)/staticcheck-tmp/staticcheck $(STATICCHECK); rmdir $(GOBIN_CACHE)/staticcheck-tmp; }
	$(STATICCHECK) ./...
