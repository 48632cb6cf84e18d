#!/usr/bin/env bash
# barriers.sh: what one ordered memory access costs in the rig's guest, the
# instructions Go's sync/atomic compiles to beside rdma-core's plain access
# and one-way barrier (test/perf/barriers/barriers.c), in ns per operation.
#   KERNEL=6.12-arm64 test/perf/barriers.sh     # N=10000000 REPS=3 by default
# On the arm64 guest under TCG it shows the emulator's price list: QEMU 7.2's
# translator (target/arm/translate-a64.c) puts a full barrier (TCG_MO_ALL)
# after every LDAR/LDAXR and before every STLR/STLXR, and its x86 back end
# (tcg/i386/tcg-target.c.inc, tcg_out_mb) emits a locked instruction for any
# barrier that orders a store before a load; DMB OSHLD/OSHST (rdma-core's
# udma barriers) and ISHLD/ISHST order no store before a load and emit
# nothing. So every Go atomic load and store costs the guest a host fence
# that libibverbs' providers pay only in their spin locks and C11 atomics
# (docs/COST.md, session 61). On an amd64 guest every row is a plain move
# but the CAS (LOCK CMPXCHG), and the DMB rows are left out.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# arm64: -mno-outline-atomics, the CAS as Go's compiler emits it (an
# LDAXR/STLXR loop), not libgcc's helper that picks LSE's CASAL at run time
flags=(); [ "$(guest_arch)" = arm64 ] && flags=(-mno-outline-atomics)
guest_gcc "$work/barriers" "$top/test/perf/barriers/barriers.c" ${flags[@]+"${flags[@]}"}
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$work" --timeout "${RIG_TIMEOUT:-600}" -- \
  "barriers ${N:-10000000} ${REPS:-3}" 2>&1 | grep -E '^(round|load|store|dmb|cas|rig:)'
