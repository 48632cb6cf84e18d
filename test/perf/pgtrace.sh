#!/bin/sh
# pgtrace.sh CMD...: in a rig guest, count the kernel's page allocations
# made while CMD runs (tracefs kmem/mm_page_alloc with stack traces), by
# order and call chain (frames 7-14 of each stack: the caller's side, past
# the allocator's own frames). Session 23 found with it that a loop of
# alloc+dealloc PD on rxe0 makes a new xarray node per op in rxe's pool and
# in restrack (cyclic indices; the node is freed through RCU), so the slab
# grows fresh zeroed pages at a rate set by RCU's grace periods.
#   test/rig/run.sh --bin DIR -- 'pgtrace.sh slowloop rxe0 pd 2000'
# (DIR holding pgtrace.sh and the command; see test/perf/slowloop.sh)
T=/sys/kernel/tracing
[ -e $T/events ] || mount -t tracefs nodev $T
echo 0 > $T/tracing_on; echo > $T/trace; echo 16384 > $T/buffer_size_kb
echo 1 > $T/options/stacktrace
echo 1 > $T/events/kmem/mm_page_alloc/enable
echo 1 > $T/tracing_on
"$@"
echo 0 > $T/tracing_on
echo 0 > $T/events/kmem/mm_page_alloc/enable
echo 0 > $T/options/stacktrace
grep -c mm_page_alloc: $T/trace
awk '/mm_page_alloc:/ { if (key != "") c[key]++; o=$0; sub(/.*order=/, "", o); sub(/ .*/, "", o); key="o" o; n=0; next }
     /<stack trace>/ { next }
     /^ => / { n++; if (n >= 7 && n <= 14) key=key " " $2; next }
     END { if (key != "") c[key]++; for (k in c) print c[k], k }' $T/trace | sort -rn | head -15
