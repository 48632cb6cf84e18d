#!/usr/bin/env bash
# compare.sh: goverbs' cmd/ibvcost beside rdma-core (test/cost/verbs_cost.c,
# the same workload through libibverbs) in one boot of the rig.
#   test/cost/compare.sh [device...]          (default: rxe0 siw0)
# Environment: KERNEL (6.1 by default; any series of the rig's, 6.12-arm64
# too: both tools are built for the guest's architecture), RUNS (runs of each tool per device,
# alternating which goes first; default 3), N (timed calls a row; 100),
# BIG_N (for MRs of 16 MiB and more; 5), MR_MAX (largest MR in bytes; 256 MiB,
# which fits the rig's 1 GiB guest), OUT (where the reports, tables and
# charts go; default test/cost/out/<kernel>), SVG (also write the chart of
# the first device to this file, e.g. docs/cost.svg), RIG_STALL (seconds of
# console silence that mean a hung guest; default 900), BASE (a git revision:
# also build that commit's ibvcost and run it in the same rotation, then print
# this tree's goverbs beside it, `-labels new,base`: an A/B of a change in one
# boot, where single boots of each side alone are noise-bound), PATHS (the
# rows measured, ibvcost's -paths: slow,fast,cm by default; PATHS=slow runs
# the slow path alone, so that runs are short and many alternate finely:
# the table's paired column then compares neighbours), CPU (pin each
# tool's measuring thread to this CPU: ibvcost -cpu, verbs_cost -c; the
# runtime's other threads stay unpinned. Unset: nothing is pinned), GAP
# (seconds idle before each run, default 2: the last run's leftover kernel
# work settles).
# Builds verbs_cost with gcc against Debian's libibverbs-dev and librdmacm-dev
# (installed if missing; for arm64 Debian's cross compiler and arm64
# rdma-core, lib.sh's guest_gcc) and ibvcost as a static Go binary, boots the kernel once, runs
# test/cost/guest.sh there, cuts the JSON reports out of the console and
# prints, per device, `ibvcost -load <goverbs runs> -compare <rdma-core runs>`:
# every row goverbs beside rdma-core, the ratio of the medians, each side's
# syscalls per call; then one RESULT line a row with its paired ratio
# (`test/perf/boots.sh 3 test/cost/compare.sh` sets N boots' side by side).
# Exit status: the guest's (non-zero if a tool failed).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
kernel=${KERNEL:-6.1}
runs=${RUNS:-3} n=${N:-100} bign=${BIG_N:-5} mrmax=${MR_MAX:-268435456}
devs=${*:-rxe0 siw0}
out=${OUT:-$top/test/cost/out/$kernel}
export PATH=$PATH:/usr/local/go/bin
# The measurement rig's kernel command line (RIG_APPEND's default) is test/perf's.
# shellcheck source=../perf/lib.sh
. "$top/test/perf/lib.sh"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/host" "$out"
rm -f "$out"/*.json "$out"/*.svg "$out"/table-*.txt
# Both for the guest's architecture (KERNEL=6.12-arm64: arm64); the host
# reads the reports with an ibvcost of its own, built only when the guest's
# is not one.
guest_gcc "$work/bin/verbs_cost" "$top/test/cost/verbs_cost.c" -libverbs -lrdmacm -lm
guest_go "$top" "$work/bin/ibvcost" ./cmd/ibvcost
if [ "$(guest_arch)" = "$(go env GOHOSTARCH)" ]; then
  cp "$work/bin/ibvcost" "$work/host/ibvcost"
else
  ( cd "$top" && CGO_ENABLED=0 go build -o "$work/host/ibvcost" ./cmd/ibvcost )
fi
if [ -n "${BASE:-}" ]; then
  rev=$(git -C "$top" rev-parse --verify "${BASE}^{commit}")
  mkdir "$work/base"
  git -C "$top" archive "$rev" | tar -x -C "$work/base"
  guest_go "$work/base" "$work/bin/ibvcost-base" ./cmd/ibvcost
fi
cp "$top/test/cost/guest.sh" "$work/bin/cost-guest.sh"
chmod +x "$work/bin/cost-guest.sh"

# A private RIG_OUT: the console log is where the reports come back.
rc=0
RIG_OUT=$work/rig RIG_QUIET=1 RIG_TIMEOUT=${RIG_TIMEOUT:-3600} RIG_STALL=${RIG_STALL:-900} "$top/test/rig/run.sh" --kernel "$kernel" --bin "$work/bin" -- \
  "GAP=${GAP:-2} cost-guest.sh '$devs' $runs $n $bign $mrmax ${PATHS:-slow,fast,cm} ${CPU:-}" || rc=$?
log=$(ls "$work"/rig/run-*.log)
tr -d '\r' < "$log" > "$out/console.log"
awk -v dir="$out" '/^=====BEGIN /{f=dir "/" $2 ".json"; printf "" > f; next}
  /^=====END /{close(f); f=""; next} f!=""{print >> f}' "$out/console.log"

# results TABLE DEVICE PEER: a RESULT line for each measured row of an
# ibvcost -compare table, its paired ratio, for test/perf/boots.sh (which
# sets the boots' ratios of each row side by side). The rows beside BASE
# are "cost-base" rows, so that boots.sh keeps them apart.
results() {
  local kind=cost
  [ "$3" = base ] && kind=cost-base
  awk -v kind="$kind" -v dev="$2" -v peer="$3" 'NF >= 6 && $6 ~ /^[0-9.]+$/ && $1 ~ /^[a-z]/ {
    printf "RESULT %s %s %-24s: paired ratio goverbs/%s %s (medians %s, %s)\n", kind, dev, $1, peer, $6, $2, $3 }' "$1"
}

shopt -s nullglob
first=1
for d in $devs; do
  g=("$out"/goverbs-"$d"-*.json) r=("$out"/rdma-core-"$d"-*.json)
  gos=$(IFS=,; echo "${g[*]}") rcs=$(IFS=,; echo "${r[*]}")
  if [ ${#g[@]} = 0 ] || [ ${#r[@]} = 0 ]; then
    echo "compare.sh: no reports for $d (see $out/console.log)" >&2; rc=1; continue
  fi
  "$work/host/ibvcost" -load "$gos" -compare "$rcs" -svg "$out/cost-$d.svg" | tee "$out/table-$d.txt"
  results "$out/table-$d.txt" "$d" rdma-core
  if [ $first = 1 ] && [ -n "${SVG:-}" ]; then cp "$out/cost-$d.svg" "$SVG"; fi
  first=0
  echo
  [ -n "${BASE:-}" ] || continue
  b=("$out"/base-"$d"-*.json)
  if [ ${#b[@]} = 0 ]; then
    echo "compare.sh: no base reports for $d (see $out/console.log)" >&2; rc=1; continue
  fi
  bases=$(IFS=,; echo "${b[*]}")
  echo "compare.sh: this tree (new) beside $BASE ($rev, base), same boot:"
  "$work/host/ibvcost" -load "$gos" -compare "$bases" -labels new,base -svg "$out/ab-$d.svg" | tee "$out/table-$d-base.txt"
  results "$out/table-$d-base.txt" "$d" base
  echo
done
echo "compare.sh: goverbs at $(git -C "$top" describe --always --dirty 2>/dev/null || echo '?')${BASE:+ (base $BASE)}, kernel $kernel, kernel command line '$RIG_APPEND'; reports, tables and charts in $out" >&2
exit $rc
