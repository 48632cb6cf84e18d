#!/usr/bin/env bash
# compare-pingpong.sh: goverbs' pingpong beside rdma-core's ibv_rc_pingpong,
# same flags, rxe0 loopback, in one boot of the rig (6.1 by default; KERNEL=6.12).
#   test/compare-pingpong.sh [SIZE:ITERS ...]     (default: 64:10000 4096:1000)
# For each SIZE:ITERS it runs, RUNS times (default 3) and alternating, a
# goverbs server and client (pingpong rc) and an rdma-core server and client
# (ibv_rc_pingpong), both polling, -g 1 on rxe0 with the server at
# 127.0.0.1, and prints each run's usec/iter (the client's figure), the
# medians, goverbs/rdma-core ratio and the round-trip rate (iterations per
# second; each is one message each way). Then ib_send_lat (perftest) with the
# same size, for reference: its t_avg is a one-way latency, about half a
# ping-pong iteration. Timings in a TCG guest (no KVM) are slow and noisy:
# compare the ratio, not the absolute figures.
# Knobs: RUNS, KERNEL, EXTRA (more flags for both programs, e.g. EXTRA=-e).
set -euo pipefail
if [ "${1:-}" = --guest ]; then
  shift
  runs=${RUNS:-3} EXTRA=${EXTRA:-}
  port=18700
  listening() { netstat -ltn 2>/dev/null | grep -q ":$1 "; }
  # pair PROG ARGS...: server and client of PROG on rxe0; prints the
  # client's usec/iter, or fails with both outputs.
  pair() {
    local prog=$1; shift
    port=$((port + 1))
    local s=/tmp/srv.$port c=/tmp/cli.$port i=0
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    "$prog" "$@" -d rxe0 -g 1 -p $port $EXTRA > "$s" 2>&1 &
    local spid=$!
    until listening $port; do
      i=$((i + 1)); [ $i -le 600 ] || { echo "server never listened:" >&2; cat "$s" >&2; return 1; }
      sleep 0.05
    done
    # shellcheck disable=SC2086
    if ! "$prog" "$@" -d rxe0 -g 1 -p $port $EXTRA 127.0.0.1 > "$c" 2>&1 || ! wait $spid; then
      echo "$prog $* failed:" >&2; cat "$s" "$c" >&2; return 1
    fi
    sed -n 's/^[0-9]* iters in .* seconds = \([0-9.]*\) usec\/iter$/\1/p' "$c"
  }
  median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
  echo "compare-pingpong: kernel $(uname -r), $(nproc) CPUs, rxe0 loopback, $runs runs each${EXTRA:+, extra flags: $EXTRA}"
  for cfg in "$@"; do
    size=${cfg%%:*} iters=${cfg#*:}
    go=() rc=()
    for r in $(seq "$runs"); do
      g=$(pair pingpong rc -s "$size" -n "$iters")
      c=$(pair ibv_rc_pingpong -s "$size" -n "$iters")
      go+=("$g") rc+=("$c")
      printf '  -s %-5s -n %-6s run %d: goverbs %10s usec/iter   rdma-core %10s usec/iter\n' "$size" "$iters" "$r" "$g" "$c"
    done
    mg=$(echo "${go[*]}" | median) mc=$(echo "${rc[*]}" | median)
    awk -v s="$size" -v n="$iters" -v g="$mg" -v c="$mc" 'BEGIN {
      printf "RESULT -s %s -n %s: median usec/iter goverbs %.2f, rdma-core %.2f; ratio goverbs/rdma-core %.3f; ", s, n, g, c, g / c
      printf "round trips/s goverbs %.0f, rdma-core %.0f\n", 1e6 / g, 1e6 / c }'
    # perftest for reference (one-way latency, polling), same size.
    port=$((port + 1))
    ib_send_lat -d rxe0 -x 1 -s "$size" -n "$iters" -F -p $port > /tmp/lat.srv 2>&1 &
    spid=$!
    i=0; until listening $port; do i=$((i + 1)); [ $i -le 600 ] || break; sleep 0.05; done
    if ib_send_lat -d rxe0 -x 1 -s "$size" -n "$iters" -F -p $port 127.0.0.1 > /tmp/lat.cli 2>&1 && wait $spid; then
      awk -v s="$size" '$1 == s && NF >= 5 { printf "RESULT ib_send_lat -s %s: t_min %s t_typical %s t_avg %s usec (one way)\n", s, $3, $5, $6 }' /tmp/lat.cli
    else
      echo "ib_send_lat -s $size failed:"; cat /tmp/lat.srv /tmp/lat.cli
    fi
  done
  exit 0
fi

top=$(cd "$(dirname "$0")/.." && pwd)
# The measurement rig's kernel command line (RIG_APPEND's default).
# shellcheck source=perf/lib.sh
. "$top/test/perf/lib.sh"
cfgs=("$@")
[ ${#cfgs[@]} -gt 0 ] || cfgs=(64:10000 4096:1000)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
cp "$0" "$bin/compare-pingpong.sh"
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/" ./cmd/pingpong )
env=$(guest_env RUNS EXTRA GOMAXPROCS GODEBUG)
RIG_TIMEOUT=${RIG_TIMEOUT:-3000} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" -- \
  "$env compare-pingpong.sh --guest ${cfgs[*]}"
