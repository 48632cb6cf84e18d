#!/usr/bin/env bash
# compare.sh: goverbs' perftest (cmd/perftest) beside perftest 4.5's ib_*
# tools, same flags, rxe0 loopback, in one boot of the rig (6.1 by default;
# KERNEL=6.12, newest, 6.12-arm64: cmd/perftest is built for the guest's
# architecture).
#   test/perf/compare.sh            # everything below
#   test/perf/compare.sh lat        # latency only;  test/perf/compare.sh bw
# For each configuration it runs, RUNS times (default 5) and alternating, a
# goverbs server and client (both goverbs) and a perftest server and client
# (both perftest), on rxe0 with -x 1 and the server at 127.0.0.1, and prints
# each run's figure from the client's report, the medians and the ratio
# goverbs/perftest:
#   latency  (send_lat, write_lat, read_lat; 2 B, 64 B, 4 KiB; polling, and
#            -e for send_lat and read_lat): t_typical (the median), usec;
#            ratio < 1 means goverbs is faster.
#   bandwidth (write_bw, send_bw; 64 B, 4 KiB, 64 KiB; post list 1 and 16):
#            BW average (MB/s) and message rate (Mpps); the ratio (of the
#            bandwidths, which have more digits than the rates) > 1 means
#            goverbs is faster. Each bandwidth run also shows how often
#            rxe's retransmit timer fired in it (hw_counters'
#            completer_retry_err; goverbs' run, then perftest's): spurious
#            in both programs, about one per 70-120 ms of streaming.
# Each RESULT line also counts the runs in which goverbs was ahead of the
# perftest run beside it (paired by position: the two ran back to back).
# Timings in a TCG guest (no KVM) on a shared host are slow and noisy:
# compare the ratios, not the absolute figures.
# Knobs: RUNS, KERNEL, LAT_ITERS (default 300), BW_ITERS (default 960, a
# fifth at 64 KiB rounded down to a multiple of 16; a multiple of 16 for the post lists), LAT_SIZES,
# BW_SIZES, PLISTS, GAP (seconds idle before each pair, default 2; 0 for
# none), LAT_TESTS (default "send_lat: write_lat: read_lat:
# send_lat:-e read_lat:-e": test:extra-flag), BW_TESTS, PAIR_TIMEOUT (seconds
# a client may run before its pair counts as failed, default 600; perftest's
# own ib_send_lat -e hangs now and then on 7.3 and 6.12 (amd64 and arm64,
# session 60: in the first -e run of a boot), and the default runs take
# under 2 s: 60 bounds such a hang's cost), RIG_APPEND (the guest's kernel
# command line; default "tsc=reliable nopku", see lib.sh). Both programs run with -F: perftest's TSC calibration
# is unreliable under TCG and sometimes reports inf, or a bandwidth of 0;
# such runs are left out of the medians (and counted, or shown as "zero").
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --guest ]; then
  shift
  what=${1:-all}
  runs=${RUNS:-5} port=19500
  listening() { netstat -ltn 2>/dev/null | grep -q ":$1 "; }
  # pair SERVER CLIENT ARGS...: prints the client's report line; on failure
  # both outputs go to stderr and the line has no figures.
  # rxe's retransmit timer fires in a run of either program (rxe_comp.c
  # arms it at the first send and pushes it on only now and then, so a
  # stream of several hundred ms retries every 70-120 ms: session 12);
  # each pair's count of those retries goes to /tmp/retries for the
  # bandwidth lines.
  retries() { cat /sys/class/infiniband/rxe0/ports/1/hw_counters/completer_retry_err 2>/dev/null || echo 0; }
  pair() {
    local sprog=$1 cprog=$2 r0; shift 2
    # Idle first, so that the kernel's work left from the last pair (its
    # processes' exit) is not this pair's: write_bw 64 B back to back had
    # goverbs' pairs at 0.90-0.94 of perftest's in four boots, 1.00-1.01
    # with 2 s between them (docs/COST.md, session 45).
    sleep "${GAP:-2}"
    r0=$(retries)
    port=$((port + 1))
    local s=/tmp/srv.$port c=/tmp/cli.$port i=0
    # Both sides are bounded: perftest's own ib_send_lat -e hung on 7.3 (a
    # lost completion event); a pair that hangs costs PAIR_TIMEOUT, not the run.
    local limit=${PAIR_TIMEOUT:-600}
    timeout -k 5 $((limit + 60)) "$sprog" -d rxe0 -x 1 -F -p $port "$@" > "$s" 2>&1 &
    local spid=$!
    until listening $port; do
      i=$((i + 1)); [ $i -le 600 ] || { echo "server never listened:" >&2; cat "$s" >&2; echo " 0 0 failed failed failed failed failed"; return 0; }
      sleep 0.05
    done
    if ! timeout "$limit" "$cprog" -d rxe0 -x 1 -F -p $port "$@" 127.0.0.1 > "$c" 2>&1 || ! wait $spid; then
      echo "$cprog $* failed:" >&2; cat "$s" "$c" >&2
      echo " 0 0 failed failed failed failed failed" # a run that failed: no figure
      return 0
    fi
    grep -E '^ [0-9]+ +[0-9]+ ' "$c" | tail -n 1
    echo $(($(retries) - r0)) > /tmp/retries
    rm -f "$s" "$c"
  }
  echo "compare: kernel $(uname -r), $(nproc) CPUs, rxe0 loopback, $runs runs each, $(ib_send_lat --version 2>&1 | head -1) vs goverbs"
  if [ "$what" = all ] || [ "$what" = lat ]; then
    for cfg in ${LAT_TESTS:-send_lat: write_lat: read_lat: send_lat:-e read_lat:-e}; do
      t=${cfg%%:*} ev=${cfg#*:}
      for size in ${LAT_SIZES:-2 64 4096}; do
        go=() pt=() gmin=() pmin=()
        for r in $(seq "$runs"); do
          # shellcheck disable=SC2086 # ev is a flag or nothing
          g=$(pair "gv_ib_$t" "gv_ib_$t" -s "$size" -n "${LAT_ITERS:-300}" $ev)
          # shellcheck disable=SC2086
          p=$(pair "ib_$t" "ib_$t" -s "$size" -n "${LAT_ITERS:-300}" $ev)
          go+=("$(echo "$g" | awk '{print $5}')") pt+=("$(echo "$p" | awk '{print $5}')")
          gmin+=("$(echo "$g" | awk '{print $3}')") pmin+=("$(echo "$p" | awk '{print $3}')")
          printf '  %-9s %-2s -s %-5s run %d: t_typical goverbs %10s usec   perftest %10s usec   (t_min %s, %s)\n' \
            "$t" "$ev" "$size" "$r" "${go[-1]}" "${pt[-1]}" "${gmin[-1]}" "${pmin[-1]}"
        done
        mg=$(echo "${go[*]}" | median) mp=$(echo "${pt[*]}" | median)
        ng=$(echo "${gmin[*]}" | median) np=$(echo "${pmin[*]}" | median)
        awk -v t="$t" -v e="$ev" -v s="$size" -v g="$mg" -v p="$mp" -v ng="$ng" -v np="$np" -v k="$(ahead 1 "${go[*]}" "${pt[*]}")" 'BEGIN {
          printf "RESULT lat %-9s %-2s %5s B: median t_typical goverbs %9.2f usec, perftest %9.2f usec; ratio goverbs/perftest %s (goverbs ahead in %s runs); median t_min %.2f, %.2f, ratio %s\n", t, e, s, g, p, (p + 0 > 0 && g + 0 > 0) ? sprintf("%.3f", g / p) : "n/a", k, ng, np, (np + 0 > 0 && ng + 0 > 0) ? sprintf("%.3f", ng / np) : "n/a" }'
      done
    done
  fi
  if [ "$what" = all ] || [ "$what" = bw ]; then
    for t in ${BW_TESTS:-write_bw send_bw}; do
      for size in ${BW_SIZES:-64 4096 65536}; do
        for pl in ${PLISTS:-1 16}; do
          iters=${BW_ITERS:-960}
          # a fifth at 64 KiB, still a multiple of 16 (the post lists)
          if [ "$size" -ge 65536 ]; then iters=$((iters / 80 * 16)); [ "$iters" -ge 16 ] || iters=16; fi
          gb=() gm=() pb=() pm=()
          for r in $(seq "$runs"); do
            echo '?' > /tmp/retries
            g=$(pair "gv_ib_$t" "gv_ib_$t" -s "$size" -n "$iters" -l "$pl") gr=$(cat /tmp/retries)
            echo '?' > /tmp/retries
            p=$(pair "ib_$t" "ib_$t" -s "$size" -n "$iters" -l "$pl") pr=$(cat /tmp/retries)
            gb+=("$(echo "$g" | figure 4)") gm+=("$(echo "$g" | figure 5)")
            pb+=("$(echo "$p" | figure 4)") pm+=("$(echo "$p" | figure 5)")
            printf '  %-8s -s %-5s -l %-2s run %d: goverbs %9s MB/s %9s Mpps   perftest %9s MB/s %9s Mpps   rxe retries %s, %s\n' \
              "$t" "$size" "$pl" "$r" "${gb[-1]}" "${gm[-1]}" "${pb[-1]}" "${pm[-1]}" "$gr" "$pr"
          done
          awk -v t="$t" -v s="$size" -v l="$pl" -v gb="$(echo "${gb[*]}" | median)" -v gm="$(echo "${gm[*]}" | median)" \
              -v pb="$(echo "${pb[*]}" | median)" -v pm="$(echo "${pm[*]}" | median)" -v k="$(ahead 0 "${gm[*]}" "${pm[*]}")" 'BEGIN {
            printf "RESULT bw  %-8s %5s B -l %-2s: median BW goverbs %8.2f MB/s, perftest %8.2f MB/s; msg rate goverbs %.6f, perftest %.6f Mpps; ratio goverbs/perftest %s (goverbs ahead in %s runs)\n", t, s, l, gb, pb, gm, pm, (pb + 0 >= 1 && gb + 0 > 0) ? sprintf("%.3f", gb / pb) : (pm + 0 > 0 && gm + 0 > 0) ? sprintf("%.3f", gm / pm) : "n/a", k }'
        done
      done
    done
  fi
  exit 0
fi

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
cp "$0" "$bin/compare.sh"
perftest_tools "$top" "$bin"
echo "compare: goverbs at $(cd "$top" && git describe --always --dirty), kernel command line '$RIG_APPEND'"
env=$(guest_env RUNS LAT_ITERS BW_ITERS LAT_SIZES BW_SIZES PLISTS GAP LAT_TESTS BW_TESTS PAIR_TIMEOUT GOMAXPROCS GODEBUG GOVERBS_WAIT_SPIN)
RIG_TIMEOUT=${RIG_TIMEOUT:-5400} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" -- \
  "$env compare.sh --guest ${1:-all}"
