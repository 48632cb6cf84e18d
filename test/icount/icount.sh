#!/usr/bin/env bash
# icount.sh: instructions per fast-path call, counted by callgrind (a
# deterministic figure: wall-clock benchmarks on a shared host are noise).
#   test/icount/icount.sh [DIR]   # DIR: a checkout (default: this one)
# Builds provider/mlx5's and provider/rxe's test binaries from DIR and runs
# each case of their BenchmarkICount (icount_test.go) under
# valgrind --tool=callgrind, collecting only inside the case's loop, and
# prints Ir per call: uverbs+mlx5 on the device model (PollEmpty, PollOne,
# PostSendSGE, PostSendInline: 64 B WRITE from one SGE and 8 B inline,
# PostRecv; with the suffix Single, a case on single-threaded queues), rxe
# on its fake command file (FakePostSend, FakePostRecv, FakePoll) and siw on its fake rings (SiwPostSend, SiwPostRecv, SiwPoll).
# Each figure includes the harness loop's own 14 instructions (siw's: also
# the store that plays the kernel, 25 in all).
# To compare with an older commit, copy the icount_test.go files into
# a worktree of it and run the script on that worktree.
# cpu.rdtscp=off: valgrind 3.19 cannot decode RDTSCP, which the runtime's
# cputicks executes when a runtime lock is contended (sysmon against the
# main thread): such a run died with SIGILL now and then.
set -euo pipefail
dir=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd "$dir" && go test -c -o "$out/mlx5.test" ./provider/mlx5 && go test -c -o "$out/rxe.test" ./provider/rxe &&
  { [ ! -f provider/siw/icount_test.go ] || go test -c -o "$out/siw.test" ./provider/siw; })
run() { # run BIN CASE OPS
  local f=$out/cg.$2
  GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off ICOUNT=$2 valgrind --tool=callgrind --collect-atstart=no \
    --toggle-collect="*.ic${2%Single}" --callgrind-out-file="$f" "$1" -test.run '^$' \
    -test.bench '^BenchmarkICount$' -test.benchtime 1x -test.cpu 1 > "$f.log" 2>&1 ||
    { echo "$2: failed"; tail "$f.log"; return 1; }
  awk -v c="$2" -v n="$3" '/^summary:/ {printf "%-16s %8.1f Ir/call\n", c, $2/n}' "$f"
}
for c in PollEmpty PollOne PostSendSGE PostSendInline; do run "$out/mlx5.test" $c 8192; done
run "$out/mlx5.test" PostRecv 2048
for c in PollOneSingle PostSendSGESingle; do run "$out/mlx5.test" $c 8192; done
run "$out/mlx5.test" PostRecvSingle 2048
for c in FakePostSend FakePostRecv FakePoll; do run "$out/rxe.test" $c 8192; done
if [ -x "$out/siw.test" ]; then
  for c in SiwPostSend SiwPostRecv SiwPoll; do run "$out/siw.test" $c 8192; done
fi
