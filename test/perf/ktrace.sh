#!/usr/bin/env bash
# ktrace.sh: what the guest kernel does around a slow-path loop, goverbs
# beside rdma-core, from the kernel's own tracer (tracefs): counts of
# scheduler, timer, interrupt, TLB-flush and syscall events over the loop,
# and the time spent in chosen kernel functions (the function_graph
# tracer, depth 1: each call's duration, tracing overhead included, so
# compare the two sides, not the figures with untraced ones).
#   test/perf/ktrace.sh                                  # VERB=cq DEV=siw0 N=1000
#   VERB=mr DEV=rxe0 N=2000 FUNCS="ib_uverbs_ioctl" test/perf/ktrace.sh
#   VERB=mr FUNCS=none EVENTS="kmem/mm_page_alloc" test/perf/ktrace.sh  # events only
# VERB and N are test/perf/slowloop's (and insns/slowloop.c's); FUNCS the
# traced functions (default: ib_uverbs_ioctl __x64_sys_munmap
# __x64_sys_mmap); events under MIN a call on both sides (default 0.01:
# the process's start and exit) are left out. Each side runs once per
# measurement, after ROUNDS untraced runs (alternating) that give the wall
# time a call. The Debian kernels have no function profiler
# (CONFIG_FUNCTION_PROFILER), hence the graph tracer. Session 37's
# throw-away versions of these counts found the runtime monitor's wake-ups
# in a loop of ordinary syscalls (docs/COST.md).
set -euo pipefail
if [ "${1:-}" = --guest ]; then
  T=/sys/kernel/tracing
  [ -e $T/events ] || mount -t tracefs nodev $T
  run() { if [ "$1" = goverbs ]; then slowloop "$DEV" "$VERB" "$N"; else slowloop-c "$DEV" "$VERB" "$N"; fi; }
  for r in $(seq "${ROUNDS:-3}"); do
    for side in goverbs rdma-core; do run $side | sed "s/^/untraced: /"; done
  done
  for side in goverbs rdma-core; do
    echo 0 > $T/tracing_on; echo > $T/trace
    for e in sched/sched_switch sched/sched_wakeup timer/hrtimer_expire_entry irq_vectors/call_function_entry \
      irq_vectors/call_function_single_entry irq_vectors/reschedule_entry irq_vectors/local_timer_entry \
      tlb/tlb_flush raw_syscalls/sys_enter exceptions/page_fault_user signal/signal_deliver ${EVENTS:-}; do
      [ -e $T/events/$e/enable ] && echo 1 > $T/events/$e/enable
    done
    echo 1 > $T/tracing_on
    run $side > /dev/null
    echo 0 > $T/tracing_on
    echo 0 > $T/events/enable
    # The buffer's default size (no resize: one froze a TCG guest in a
    # soft lockup) holds a loop's events; say so when it did not.
    if grep -q 'overrun: [1-9]' $T/per_cpu/cpu*/stats; then echo "untraced: ktrace: $side: events lost (buffer overrun): lower N"; fi
    grep -v '^#' $T/trace | awk -v side=$side -v n="$N" '{
      for (i = 1; i <= NF; i++) if ($i ~ /:$/ && $i !~ /^[0-9.]+:$/) { ev = $i; break }
      if (ev ~ /sys_enter/ && match($0, /NR [0-9]+/)) ev = ev substr($0, RSTART, RLENGTH)
      if (ev ~ /tlb_flush/ && match($0, /reason:[^(]*/)) ev = ev substr($0, RSTART + 7, RLENGTH - 7)
      if (ev ~ /mm_page_alloc/ && match($0, /order=[0-9]+/)) ev = ev substr($0, RSTART, RLENGTH) ($0 ~ /__GFP_ZERO/ ? "_zero" : "")
      gsub(/ +$/, "", ev); gsub(/ /, "_", ev)
      c[ev]++ }
      END { for (e in c) printf "EVENT %s %s %.3f\n", side, e, c[e] / n }'
    [ "${FUNCS:-}" = none ] && continue
    for f in ${FUNCS:-ib_uverbs_ioctl __x64_sys_munmap __x64_sys_mmap}; do
      echo 0 > $T/tracing_on; echo > $T/trace
      echo "$f" > $T/set_graph_function; echo 1 > $T/max_graph_depth
      echo function_graph > $T/current_tracer
      echo 1 > $T/tracing_on
      run $side > /dev/null
      echo 0 > $T/tracing_on
      # Read before switching the tracer back: a switch empties the buffer.
      grep -o '[0-9.]* us' $T/trace | awk '{print $1}' | sort -n |
        awk -v side=$side -v f="$f" -v n="$N" '{ a[NR] = $1; s += $1 }
          END { if (NR) printf "GRAPH %s %s %.2f %.1f %.1f %.1f\n", side, f, NR / n, a[int(NR * 0.1) + 1], a[int(NR * 0.5) + 1], a[int(NR * 0.9) + 1] }'
      echo nop > $T/current_tracer
    done
  done
  exit 0
fi

top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh"
amd64_only
bin=$(mktemp -d); log=$(mktemp); trap 'rm -rf "$bin" "$log"' EXIT
command -v gcc >/dev/null || { echo "ktrace.sh: needs gcc (apt-get install gcc)" >&2; exit 1; }
[ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/rdma/rdma_cma.h ] ||
  apt-get install -y -q libibverbs-dev librdmacm-dev >/dev/null
gcc -O2 -Wall -o "$bin/slowloop-c" "$top/test/perf/insns/slowloop.c" -libverbs -lrdmacm
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/slowloop" ./test/perf/slowloop )
cp "$0" "$bin/ktrace.sh"
echo "ktrace: goverbs at $(cd "$top" && git describe --always --dirty), kernel ${KERNEL:-6.1}, '${RIG_APPEND}'"
env=(VERB="'${VERB:-cq}'" DEV="'${DEV:-siw0}'" N="'${N:-1000}'" ROUNDS="'${ROUNDS:-3}'")
[ -n "${FUNCS:-}" ] && env+=(FUNCS="'$FUNCS'")
[ -n "${EVENTS:-}" ] && env+=(EVENTS="'$EVENTS'")
rc=0
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" -- "${env[*]} ktrace.sh --guest" > "$log" 2>&1 || rc=$?
[ $rc = 0 ] || { tail -n 30 "$log"; echo "ktrace.sh: the guest failed (exit $rc)" >&2; exit "$rc"; }
tr -d '\r' < "$log" | sed -n 's/^untraced: //p'
echo
tr -d '\r' < "$log" | awk -v min="${MIN:-0.01}" '
  $1 == "EVENT" { v[$3, $2] = $4; if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
  $1 == "GRAPH" { g[$3, $2] = sprintf("%.2f/op  p10 %s  p50 %s  p90 %s", $4, $5, $6, $7); if (!($3 in gs)) { gs[$3] = 1; gorder[++gn] = $3 } }
  END {
    # amd64 syscall numbers of the calls these loops and the Go runtime make
    split("0 read 1 write 3 close 9 mmap 11 munmap 13 rt_sigaction 14 rt_sigprocmask 15 rt_sigreturn 16 ioctl 24 sched_yield 35 nanosleep 202 futex 228 clock_gettime 257 openat 262 newfstatat 281 epoll_pwait", nr, " ")
    for (i = 1; i < length(nr); i += 2) name["NR " nr[i]] = nr[i + 1]
    for (i = 1; i <= n; i++) {  # by the sum of both sides, largest first
      for (j = i + 1; j <= n; j++) {
        a = order[i]; b = order[j]
        if (v[b, "goverbs"] + v[b, "rdma-core"] > v[a, "goverbs"] + v[a, "rdma-core"]) { order[i] = b; order[j] = a }
      }
    }
    printf "%-44s %10s %10s   (events a call)\n", "event", "goverbs", "rdma-core"
    for (i = 1; i <= n; i++) {
      if (v[order[i], "goverbs"] + v[order[i], "rdma-core"] < min) continue
      e = order[i]
      if (match(e, /NR_[0-9]+/) && ("NR " substr(e, RSTART + 3, RLENGTH - 3) in name)) e = e " " name["NR " substr(e, RSTART + 3, RLENGTH - 3)]
      printf "%-44s %10.3f %10.3f\n", e, v[order[i], "goverbs"], v[order[i], "rdma-core"]
    }
    print ""
    for (i = 1; i <= gn; i++) {
      printf "%s (µs a call, traced)\n  goverbs   %s\n  rdma-core %s\n", gorder[i], g[gorder[i], "goverbs"], g[gorder[i], "rdma-core"]
    }
  }'
