#!/usr/bin/env bash
# slowpath.sh: goverbs' user-space instructions per slow-path command,
# counted by callgrind against the mlx5 device model (deterministic, no rig).
#   test/icount/slowpath.sh [DIR]   # DIR: a checkout (default: this one)
#   CASES="QueryGID ModifyQP" test/icount/slowpath.sh
# Runs each case of provider/mlx5's BenchmarkICountSlow (icount_slow_test.go)
# under valgrind --tool=callgrind, collecting only inside its loop (16 warm-up
# calls and 1000 counted ones), and prints Ir per call: the total, the
# model's share (its fake kernel's Ioctl and Write, inclusive: the work the
# real kernel would do) and goverbs' (the rest). Go's syscall entry and exit
# (entersyscall/exitsyscall around the real ioctl) are not in it: the model
# answers without a syscall. Pair cases (AllocDeallocPD, RegDeregMR,
# CreateDestroyAH, CreateDestroyCQ, CreateDestroyQP) are two commands a call.
# Compare builds by the total: it repeats within ~0.5% from build to build.
# The split does not: callgrind's inclusive cost of the model's functions
# (what the split subtracts) moved by ~70 instructions a call between two
# builds of one commit made in different directories (session 28), its
# call tree cut differently at Go's stack switches.
# cpu.rdtscp=off: valgrind 3.19 cannot decode RDTSCP, which the runtime's
# cputicks executes when a runtime lock is contended (sysmon against the
# main thread): such a run died with SIGILL now and then.
set -euo pipefail
dir=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd "$dir" && go test -c -o "$out/mlx5.test" ./provider/mlx5)
calls=1016 # icSlow's warm-up and counted calls, all inside the toggle
for c in ${CASES:-QueryDevice QueryPort QueryGID AllocDeallocPD RegDeregMR ModifyQP CreateDestroyAH CreateDestroyCQ CreateDestroyQP}; do
  f=$out/cg.$c
  GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off ICOUNT_SLOW=$c valgrind --tool=callgrind --collect-atstart=no \
    --toggle-collect='*.icSlow' --callgrind-out-file="$f" "$out/mlx5.test" -test.run '^$' \
    -test.bench '^BenchmarkICountSlow$' -test.benchtime 1x -test.cpu 1 > "$f.log" 2>&1 ||
    { echo "$c: failed"; tail "$f.log"; exit 1; }
  tot=$(awk '/^summary:/ {print $2}' "$f")
  model=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
    awk '/model\.fakeKernel\.(Ioctl|Write) \[/ {gsub(",", "", $1); s += $1} END {print s + 0}')
  awk -v c="$c" -v t="$tot" -v m="$model" -v n=$calls \
    'BEGIN {printf "%-16s total %7.0f  model %7.0f  goverbs %7.0f Ir/call\n", c, t/n, m/n, (t-m)/n}'
done
