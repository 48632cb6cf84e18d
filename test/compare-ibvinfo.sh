#!/usr/bin/env bash
# compare-ibvinfo.sh: wall time of `ibvinfo -v` beside `ibv_devinfo -v` for
# the same devices, the median of several runs each, and their ratio.
#   test/compare-ibvinfo.sh [--kernel 6.1|6.12] [--runs N] [-- ARGS...]
# On the host it boots the rig (test/rig/run.sh) with ibvinfo built into the
# guest's PATH and runs itself there; in the guest (GOVERBS_RIG=1) it
# measures: one untimed run of each first, then N runs of each, alternating,
# every run with its output to /dev/null. ARGS replace -v (e.g. -- -v -d rxe0).
set -euo pipefail

kernel=${KERNEL:-6.1}; runs=15; args=(-v)
while [ $# -gt 0 ]; do
  case $1 in
    --kernel) kernel=$2; shift ;;
    --runs) runs=$2; shift ;;
    --) shift; args=("$@"); break ;;
    *) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2 ;;
  esac
  shift
done

if [ "${GOVERBS_RIG:-}" != 1 ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  top=$(cd "$here/.." && pwd)
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  cp "$0" "$bin/compare-ibvinfo.sh"
  cd "$top"
  exec test/rig/run.sh --kernel "$kernel" --go ./cmd/ibvinfo --bin "$bin" -- \
    "bash /rig/bin/compare-ibvinfo.sh --runs $runs -- ${args[*]}"
fi

# ---- in the guest ----
command -v ibvinfo >/dev/null || { echo "compare-ibvinfo: no ibvinfo in PATH" >&2; exit 1; }
command -v ibv_devinfo >/dev/null || { echo "compare-ibvinfo: no ibv_devinfo in PATH" >&2; exit 1; }

# usec: microseconds since the epoch, from bash's EPOCHREALTIME.
usec() { local t=${EPOCHREALTIME/./}; echo "${t#0}"; }

declare -a t_go t_c
ibvinfo "${args[@]}" >/dev/null 2>&1 || true
ibv_devinfo "${args[@]}" >/dev/null 2>&1 || true
for ((i = 0; i < runs; i++)); do
  a=$(usec); ibvinfo "${args[@]}" >/dev/null 2>&1 || true; b=$(usec)
  ibv_devinfo "${args[@]}" >/dev/null 2>&1 || true; c=$(usec)
  t_go+=($((b - a))); t_c+=($((c - b)))
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : int((v[NR/2] + v[NR/2+1]) / 2)}'; }
mg=$(median "${t_go[@]}"); mc=$(median "${t_c[@]}")
echo "kernel $(uname -r), $runs runs each, arguments: ${args[*]}"
awk -v g="$mg" -v c="$mc" -v a="${args[*]}" 'BEGIN {
  printf "  %-28s median %8.2f ms\n", "ibvinfo " a, g / 1000
  printf "  %-28s median %8.2f ms\n", "ibv_devinfo " a, c / 1000
  printf "  ratio ibv_devinfo/ibvinfo:  %.2f\n", c / g
}'
