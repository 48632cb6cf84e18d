#!/usr/bin/env bash
# mix.sh: which side of a perftest pair costs goverbs its bandwidth (or
# latency): the four server/client pairings of goverbs' cmd/perftest and
# perftest 4.5 (goverbs/goverbs, perftest/perftest, goverbs server with a
# perftest client, perftest server with a goverbs client), round after
# round in one boot of the rig, rxe0 loopback, -x 1 -F. Prints each round's
# figure of every pairing (the client's BW average in MB/s for a _bw test,
# t_typical in usec for a _lat test) and the medians.
#   test/perf/mix.sh                                  # send_bw -s 64 -n 960, 9 rounds
#   TEST=write_bw ARGS="-s 65536 -n 200" test/perf/mix.sh
#   PIN=1 test/perf/mix.sh       # server on CPU 1, client on CPU 0 (taskset)
# Knobs: TEST (a perftest test name), ARGS, ROUNDS (default 9), PIN, KERNEL.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --guest ]; then
  test=${TEST:-send_bw} args=${ARGS:--s 64 -n 960} port=20000
  pin_s="" pin_c=""
  [ -z "${PIN:-}" ] || pin_s="taskset -c 1" pin_c="taskset -c 0"
  listening() { netstat -ltn 2>/dev/null | grep -q ":$1 "; }
  pair() { # pair SERVER CLIENT: the client's figure, or "failed"
    local s=$1 c=$2 i=0
    port=$((port + 1))
    # shellcheck disable=SC2086 # args and the pins are word lists
    timeout -k 5 300 $pin_s "$s" -d rxe0 -x 1 -F -p $port $args > /tmp/mix.s 2>&1 &
    local sp=$!
    until listening $port; do
      i=$((i + 1)); [ $i -le 600 ] || { echo failed; return 0; }
      sleep 0.05
    done
    # shellcheck disable=SC2086
    if ! timeout 300 $pin_c "$c" -d rxe0 -x 1 -F -p $port $args 127.0.0.1 > /tmp/mix.c 2>&1 || ! wait $sp; then
      echo failed; return 0
    fi
    case $test in
      *_bw) grep -E '^ [0-9]+ +[0-9]+ ' /tmp/mix.c | tail -n 1 | awk '{print $4}' ;;
      *) grep -E '^ [0-9]+ +[0-9]+ ' /tmp/mix.c | tail -n 1 | awk '{print $5}' ;;
    esac
  }
  echo "mix: kernel $(uname -r), $(nproc) CPUs, $test $args${PIN:+, pinned}; server/client"
  names=("goverbs/goverbs" "perftest/perftest" "goverbs/perftest" "perftest/goverbs")
  progs=("gv_ib_$test gv_ib_$test" "ib_$test ib_$test" "gv_ib_$test ib_$test" "ib_$test gv_ib_$test")
  declare -a all=("" "" "" "")
  for r in $(seq "${ROUNDS:-9}"); do
    line="round $r:"
    for k in 0 1 2 3; do
      # shellcheck disable=SC2086 # two program names
      v=$(pair ${progs[$k]})
      all[k]="${all[k]} $v"
      line="$line  ${names[$k]} $v"
    done
    echo "$line"
  done
  for k in 0 1 2 3; do
    echo "MEDIAN ${names[$k]} $(echo "${all[k]}" | median)"
  done
  exit 0
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
cp "$0" "$bin/mix.sh"
perftest_tools "$top" "$bin"
echo "mix: goverbs at $(cd "$top" && git describe --always --dirty)"
env=()
for v in TEST ARGS ROUNDS PIN GOMAXPROCS GODEBUG; do [ -n "${!v:-}" ] && env+=("$v='${!v}'"); done
log=$(mktemp); trap 'rm -rf "$bin" "$log"' EXIT
rc=0
RIG_TIMEOUT=${RIG_TIMEOUT:-3600} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" -- \
  "${env[*]} mix.sh --guest" > "$log" 2>&1 || rc=$?
tr -d '\r' < "$log" | grep -a -E '^(mix|round|MEDIAN)' || true
[ $rc = 0 ] || { tail -n 30 "$log"; echo "mix.sh: the guest failed (exit $rc)" >&2; exit "$rc"; }
