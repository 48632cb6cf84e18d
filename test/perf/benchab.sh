#!/usr/bin/env bash
# benchab.sh: the host fast-path benchmarks of two revisions, side by side.
# It builds each package's test binary at BEFORE (a git revision) and from
# the working tree, then runs them in turns, ROUNDS times each (before,
# after, before, ...), so that a host whose speed drifts moves both alike,
# and prints each benchmark's median ns/op, its spread (min-max) and the
# change. No device needed: the mlx5 model and rxe's fake kernel queues.
#   BEFORE=846f1cc test/perf/benchab.sh
#   BEFORE=HEAD~3 ROUNDS=20 BENCHTIME=500ms test/perf/benchab.sh
# Knobs: BEFORE (required), ROUNDS (default 10), BENCHTIME (per run, default
# 300ms), PROCS (GOMAXPROCS, default 2: the mlx5 model's device runs beside
# the poster, and before 2026-11 its PostRecv benchmark spun forever with
# one), CASES ("pkg:regexp" pairs; default
# the PostSend/PostRecv/Poll benchmarks of provider/mlx5 and provider/rxe).
# Run it on a quiet host: the figures are times.
set -euo pipefail
: "${BEFORE:?set BEFORE to the git revision to compare with}"
ROUNDS=${ROUNDS:-10} BENCHTIME=${BENCHTIME:-300ms} PROCS=${PROCS:-2}
CASES=${CASES:-"./provider/mlx5:^Benchmark(PostSend|PostRecv|PollCQ)\$ ./provider/rxe:^BenchmarkFake(PostSend|PostRecv|Poll)\$"}
top=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$top" worktree remove --force "$work/before" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$top" worktree add --detach "$work/before" "$BEFORE" >/dev/null 2>&1
echo "benchab: before $(git -C "$work/before" log --oneline -1 | cut -c1-72)"
echo "benchab: after  $(git -C "$top" log --oneline -1 | cut -c1-60)$(git -C "$top" diff --quiet HEAD || echo ' + working tree')"
echo "benchab: $ROUNDS rounds of $BENCHTIME per benchmark, GOMAXPROCS=$PROCS, load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
for c in $CASES; do
  pkg=${c%%:*} re=${c#*:}
  (cd "$work/before" && go test -c -o "$work/b$i.test" "$pkg")
  (cd "$top" && go test -c -o "$work/a$i.test" "$pkg")
  i=$((i + 1))
done
for _ in $(seq "$ROUNDS"); do
  i=0
  for c in $CASES; do
    re=${c#*:}
    for side in b a; do
      GOMAXPROCS=$PROCS "$work/$side$i.test" -test.run='^$' -test.bench="$re" \
        -test.benchtime="$BENCHTIME" -test.benchmem |
        awk -v s="$side" '/^Benchmark/ { for (f = 4; f <= NF; f++) { if ($f == "ns/op") ns = $(f - 1); if ($f == "allocs/op") al = $(f - 1) }
                                         print s, $1, ns, al }' >> "$work/runs"
    done
    i=$((i + 1))
  done
  printf '.' >&2
done
echo >&2
# side name ns allocs
sort -k2,2 -k1,1 -k3,3n "$work/runs" | awk '
  function med(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function flush() {
    if (name == "") return
    mb = med(vb, nb); ma = med(va, na)
    printf "%-32s %9.1f (%6.1f-%6.1f) %9.1f (%6.1f-%6.1f) %+7.1f%%  %s->%s allocs/op\n", name, mb, vb[1], vb[nb], ma, va[1], va[na], (ma / mb - 1) * 100, allocb, alloca
  }
  BEGIN { printf "%-32s %28s %28s %8s\n", "ns/op, median (min-max)", "before", "after", "change" }
  $2 != name { flush(); name = $2; nb = na = 0 }
  $1 == "b" { vb[++nb] = $3; allocb = $4 }
  $1 == "a" { va[++na] = $3; alloca = $4 }
  END { flush() }'
