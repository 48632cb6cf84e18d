#!/usr/bin/env bash
# pgo.sh: CPU profiles of the commands that are compared with rdma-core's
# tools (cmd/ibvcost, cmd/perftest, cmd/rstream, cmd/pingpong), taken on
# their own workloads in one rig boot on rxe0 and siw0 and merged per
# command: the input of a profile-guided build, and a look at where a run's
# user time goes.
#   test/perf/pgo.sh                  # profiles in test/rig/out/pgo/
#   OUT=/tmp/pgo KERNEL=newest test/perf/pgo.sh
# The guest boots with lib.sh's RIG_APPEND, as the comparison scripts do.
#   go build -pgo=test/rig/out/pgo/rstream.pgo ./cmd/rstream
# Each command is built as the tree has it (no default.pgo) and runs with
# GOVERBS_CPUPROFILE (internal/cpuprofile) in the guest; a command's runs
# (both roles of a pair, both devices) are merged with `go tool pprof
# -proto` into OUT/<command>.pgo, the runs' own profiles beside them.
# The project ships no default.pgo (session 41, docs/COST.md): built with
# these profiles rsocket's 64 B transfer ran ~5% fewer user instructions,
# no round trip, bandwidth or verb moved beyond a boot's noise but
# poll_cq_empty, which went 11% faster on the device the profile's
# devirtualized call named and 11% slower on the other, and a cold build
# of cmd/... took 90 s instead of 24.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${OUT:-$top/test/rig/out/pgo}
mkdir -p "$work/bin" "$out"
rm -f "$out"/*.pprof "$out"/*.pgo # a run merges its own profiles only
# perftest as the measurement scripts build it: gv_ib_* links to it
perftest_tools "$top" "$work/bin"
for c in ibvcost rstream pingpong; do
	guest_go "$top" "$work/bin/$c" "./cmd/$c" # for the guest's architecture
done
cat >"$work/bin/guest.sh" <<'GUEST'
set -u
o=/mnt/host
fail=0
# prof NAME CMD ARGS...: CMD with its profile written to NAME.pprof
prof() { n=$1; shift; GOVERBS_CPUPROFILE=$o/$n.pprof timeout -k 5 600 "$@" >/tmp/$n.out 2>&1 || { echo "pgo: $n failed:"; tail -5 /tmp/$n.out; fail=1; }; }
tcp() { i=0; while [ $i -lt 300 ] && ! netstat -ltn 2>/dev/null | grep -q ":$1 "; do sleep 0.05; i=$((i + 1)); done; }
cm() { i=0; while [ $i -lt 300 ] && ! rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1 "; do sleep 0.05; i=$((i + 1)); done; }
p=7900
for d in rxe0 siw0; do prof ibvcost-$d ibvcost -d $d -mr-max 1MiB; done
# rstream's latency and bandwidth tests, both roles; rxe0, then siw0
for a in 10.0.2.15 10.0.3.15; do
	p=$((p + 1))
	prof rstream-srv-$p rstream -b $a -p $p & cm $p
	prof rstream-cli-$p rstream -s $a -p $p
	wait
done
for t in send_lat write_lat read_lat send_bw write_bw read_bw; do
	for s in 64 4096; do
		p=$((p + 1))
		prof perftest-srv-$p gv_ib_$t -d rxe0 -x 1 -F -s $s -p $p & tcp $p
		prof perftest-cli-$p gv_ib_$t -d rxe0 -x 1 -F -s $s -p $p 127.0.0.1
		wait
	done
done
for s in 64 4096; do
	p=$((p + 1))
	prof pingpong-srv-$p pingpong -d rxe0 -g 1 -s $s -n 20000 -p $p & tcp $p
	prof pingpong-cli-$p pingpong -d rxe0 -g 1 -s $s -n 20000 -p $p 127.0.0.1
	wait
done
echo "pgo: guest done, fail=$fail"
exit $fail
GUEST
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$work/bin" --share "$out" --timeout "${RIG_TIMEOUT:-3600}" -- 'sh /rig/bin/guest.sh'
for c in ibvcost perftest rstream pingpong; do
	set -- "$out/$c"-*.pprof
	[ -e "$1" ] || { echo "pgo: no profile of $c" >&2; exit 1; }
	go tool pprof -proto "$@" >"$out/$c.pgo" 2>/dev/null
	echo "pgo: $out/$c.pgo from $# profiles ($(wc -c <"$out/$c.pgo") bytes)"
done
