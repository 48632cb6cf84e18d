#!/usr/bin/env bash
# xchg.sh: the smallest loop in which goverbs' kernel time can be set beside
# rdma-core's: test/perf/xchg/goxchg (Go) and its twin test/perf/xchg/xchg.c
# (libibverbs) in one boot of the measurement rig, each iteration an inline
# 64-byte RDMA WRITE with immediate between two RC QPs of one context and its
# two completions. On Linux 6.1 rxe runs the whole exchange inside the send's
# doorbell, so the doorbell's write(2) is the kernel's part (docs/COST.md,
# session 53: the same kernel instructions take longer from a Go process).
#   test/perf/xchg.sh                 # ROUNDS (6) alternating runs of N (5000)
#                                     # iterations a side: medians of the runs'
#                                     # µs an iteration and doorbell p50
#   COUNT=insns test/perf/xchg.sh     # instructions an iteration, kernel and
#                                     # user (test/perf/insns/plugin.c)
#   COUNT=lookups test/perf/xchg.sh   # blocks entered by a lookup an iteration
#                                     # (test/perf/insns/lookups.c)
#   KERNEL=newest DEV=rxe0 test/perf/xchg.sh
#   GVENVS='GODEBUG=disablethp=1;GOGC=off' test/perf/xchg.sh
#                                     # also goverbs under each environment
#                                     # (';' between variants, as mix.sh's
#                                     # GVENVS), labelled v1..
# TCG only for COUNT. Needs gcc and libibverbs-dev (installed if missing).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh"
amd64_only
command -v gcc >/dev/null || apt-get install -y -q gcc >/dev/null
[ -f /usr/include/infiniband/verbs.h ] || apt-get install -y -q libibverbs-dev >/dev/null
bin=$(mktemp -d); log=$(mktemp); trap 'rm -rf "$bin" "$log"' EXIT
dev=${DEV:-rxe0} n=${N:-5000}
gcc -O2 -Wall -shared -fPIC -o "$bin/wtime.so" "$top/test/perf/rtt/wtime.c"
# Timed runs time the doorbell too (the tag goverbs_dbtime); counted runs
# count the build programs run, without the timer's clock reads.
tags=goverbs_dbtime
[ -n "${COUNT:-}" ] && tags=
xchg_pair "$top" "$bin" "$tags"
echo "xchg: goverbs at $(cd "$top" && git describe --always --dirty), $dev, kernel ${KERNEL:-6.1}"
case "${COUNT:-}" in
"")
  # Each GVENVS variant runs goverbs once more a round, under env(1), its
  # lines relabelled v1, v2, ... so that they sit beside the plain runs.
  variants=() sides=(rdma-core goverbs)
  IFS=';' read -r -a variants <<< "${GVENVS:-}"
  {
    echo "for r in \$(seq ${ROUNDS:-6}); do"
    echo "  LD_PRELOAD=/rig/bin/wtime.so /rig/bin/xchg-c $dev $n 1 || echo 'xchg-c failed'"
    echo "  /rig/bin/xchg-go $dev $n 1 || echo 'xchg-go failed'"
    for i in "${!variants[@]}"; do
      # The failure is echoed inside the pipe: sh has no pipefail.
      echo "  { env ${variants[$i]} /rig/bin/xchg-go $dev $n 1 || echo 'xchg-go v$((i + 1)) failed'; } | sed 's/^goverbs /v$((i + 1)) /'"
      sides+=("v$((i + 1))")
    done
    echo "done"
  } > "$bin/guest.sh"
  "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" --timeout "${RIG_TIMEOUT:-1200}" -- 'sh /rig/bin/guest.sh' > "$log" 2>&1 ||
    { tail -30 "$log"; echo "xchg.sh: the guest failed" >&2; exit 1; }
  tr -d '\r' < "$log" | grep -a -E '^(rdma-core|goverbs|v[0-9]+) +(loop|doorbell)|failed' || true
  for i in "${!variants[@]}"; do echo "v$((i + 1)): goverbs under ${variants[$i]}"; done
  for side in "${sides[@]}"; do
    loop=$(tr -d '\r' < "$log" | awk -v s="$side" '$1 == s && $2 == "loop" {print $3}' | median)
    db=$(tr -d '\r' < "$log" | awk -v s="$side" '$1 == s && $2 == "doorbell" {print $6}' | median)
    printf '%-9s median of %s runs: %s us an iteration, doorbell p50 %s us\n' "$side" "${ROUNDS:-6}" "$loop" "$db"
  done
  ;;
insns | lookups)
  src=$top/test/perf/insns/plugin.c
  [ "$COUNT" = lookups ] && src=$top/test/perf/insns/lookups.c
  gcc -O2 -shared -fPIC -pthread -fvisibility=hidden -Wall -o "$bin/count.so" "$src"
  gcc -O2 -static -nostdlib -Wl,-Ttext-segment=0x13370000 -o "$bin/icmark" "$top/test/perf/insns/mark.c"
  n1=${N1:-1000} n2=${N2:-4000}
  cat > "$bin/guest.sh" <<GUEST
seq=0
for side in goverbs rdma-core; do
  prog=/rig/bin/xchg-go; [ \$side = rdma-core ] && prog=/rig/bin/xchg-c
  for k in $n1 $n2; do
    /rig/bin/icmark; seq=\$((seq + 1)); \$prog $dev \$k 1 > /dev/null || echo "\$prog failed"; /rig/bin/icmark; seq=\$((seq + 1))
    echo "ILABEL \$((seq - 1)) \$seq xchg \$side \$k"
  done
done
GUEST
  RIG_ACCEL=tcg "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" --timeout "${RIG_TIMEOUT:-1200}" \
    --qemu -plugin --qemu "$bin/count.so" --qemu -d --qemu plugin -- 'sh /rig/bin/guest.sh' > "$log" 2>&1 ||
    { tail -30 "$log"; echo "xchg.sh: the guest failed" >&2; exit 1; }
  tr -d '\r' < "$log" | grep -a 'failed' || true
  [ "$COUNT" = lookups ] && echo "(the table's figures are blocks entered by a lookup, not instructions)"
  tr -d '\r' < "$log" | awk -f "$top/test/perf/insns/table.awk"
  ;;
*) echo "xchg.sh: COUNT is insns or lookups" >&2; exit 2 ;;
esac
