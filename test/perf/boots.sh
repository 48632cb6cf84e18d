#!/usr/bin/env bash
# boots.sh: one comparison script run in N boots, its ratios set side by side.
# Each ratio stays a ratio from one boot (both programs alternate in it); what
# this adds is how far the same code's ratio moves from boot to boot (docs/COST.md:
# a row no change touched has moved 1.9x between boots), so that a verdict rests
# on more than one boot's luck.
#   test/perf/boots.sh 3 test/perf/compare.sh bw
#   BOOTS_ENV='BW_SIZES=64 PLISTS=1' test/perf/boots.sh 4 test/perf/compare.sh bw
#   test/perf/boots.sh 3 test/compare-pingpong.sh 64:10000
#   BOOTS_ENV="KERNEL=newest" test/perf/boots.sh 3 test/perf/figures.sh   # rsocket
# Every RESULT line the script prints with a "ratio goverbs/..." figure is a
# row; the row is the line's text up to its first ':'. For each row: the
# ratio in each boot, their median, and in how many boots goverbs was on the
# aim's side of 1 (the script's direction: compare.sh's latency rows and
# pingpong are times, below 1 is goverbs faster; compare.sh's bandwidth rows
# are rates, above 1). The scripts' own outputs stay in OUT (default
# test/perf/out/boots/), one file a boot.
set -euo pipefail
[ $# -ge 2 ] && [ "$1" -ge 1 ] 2> /dev/null || { echo "usage: boots.sh N SCRIPT [ARGS...]" >&2; exit 2; }
n=$1; shift
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$top/test/perf/out/boots}
mkdir -p "$out"
rm -f "$out"/boot-*.txt
for b in $(seq "$n"); do
  echo "boots: boot $b of $n: $*" >&2
  # shellcheck disable=SC2086 # BOOTS_ENV is a list of assignments
  if ! env ${BOOTS_ENV:-} "$@" > "$out/boot-$b.txt" 2>&1; then
    tail -20 "$out/boot-$b.txt" >&2
    echo "boots.sh: boot $b failed (its output: $out/boot-$b.txt)" >&2
    exit 1
  fi
done
# The rows in the order the first boot printed them; "better" is the side of
# 1 goverbs wants: a rate (bandwidth) row wants more.
awk -v n="$n" '
  /^RESULT / && match($0, /ratio goverbs\/[a-z-]+ [0-9.]+/) {
    row = substr($0, 8, index($0, ":") - 8); gsub(/ +/, " ", row); sub(/ $/, "", row)
    split(substr($0, RSTART, RLENGTH), f, " ")
    if (!(row in seen)) { seen[row] = 1; order[++rows] = row }
    boot = FILENAME; sub(/.*boot-/, "", boot); sub(/\.txt$/, "", boot)
    r[row, boot] = f[3]; k[row]++
    rate[row] = ($0 ~ /^RESULT bw /)
  }
  function median(row,   i, m, v, t, j) {
    m = 0
    for (i = 1; i <= n; i++) if ((row, i) in r) v[++m] = r[row, i] + 0
    for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  END {
    if (rows == 0) { print "boots.sh: no RESULT line with a ratio in the outputs" > "/dev/stderr"; exit 1 }
    printf "%-40s %-*s %7s  %s\n", "row (ratio goverbs/peer)", 7 * n, "boots", "median", "goverbs on the aim'"'"'s side"
    for (o = 1; o <= rows; o++) {
      row = order[o]; line = ""; good = 0
      for (i = 1; i <= n; i++) {
        if ((row, i) in r) {
          line = line sprintf(" %6.3f", r[row, i])
          if (rate[row] ? r[row, i] >= 1 : r[row, i] <= 1) good++
        } else line = line "      -"
      }
      printf "%-40s%s %7.3f  %d of %d (%s)\n", row, line, median(row), good, k[row], rate[row] ? "rate: >= 1" : "time: <= 1"
    }
  }' "$out"/boot-*.txt
