#!/usr/bin/env bash
# counts.sh: what one latency iteration costs the OS, goverbs' perftest
# (cmd/perftest) beside perftest 4.5's ib_* tools, counted by the guest
# kernel (not timed: the figures do not depend on a quiet host), rxe0
# loopback, in one boot of the rig (6.1 by default; KERNEL=6.12).
#   test/perf/counts.sh                 # send_lat, polling and -e, 2 B
#   CASES="send_lat:-e:64 read_lat::2" test/perf/counts.sh
# For each case (test:flag:size) it runs a server and a client of each
# program twice, with N1 and N2 iterations (default 200 and 1200), and
# counts in the kernel (tracefs histograms: raw_syscalls:sys_enter keyed by
# thread, shown with its command name, and syscall, sched:sched_switch keyed by command name and
# the state the task left the CPU in) the syscalls and the context
# switches of both sides together; the difference of the two runs over
# N2-N1 is the cost of one iteration (the setup, the same in both runs,
# cancels; a syscall counted less often in the longer run is setup noise,
# e.g. perftest's gettimeofday loop timing the CPU, and is left out of the
# total). A context switch away from a task still runnable (prev_state
# R) is involuntary, any other voluntary (the task slept). "threads" is the
# number of the program's threads that ran in the longer run (both sides).
# goverbs' tools run as gv_ib_*, perftest's as ib_*: the kernel's command
# names tell them apart.
# BASE=<git revision> also builds goverbs' perftest at that revision and
# counts it as gb_ib_* (before/after in one boot).
# SHOW=RATE lists each syscall made at least RATE times an iteration
# (default 0.05).
# With CHECK=1 the script fails (exit 1) when goverbs makes more syscalls
# per iteration than perftest in a case with -e.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --guest ]; then
  port=19700
  T=/sys/kernel/tracing
  [ -d $T/events ] || mount -t tracefs nodev $T
  listening() { netstat -ltn 2>/dev/null | grep -q ":$1 "; }
  sys=$T/events/raw_syscalls/sys_enter/trigger sw=$T/events/sched/sched_switch/trigger
  sysk='hist:keys=common_pid.execname,id.syscall:vals=hitcount:size=8192'
  swk='hist:keys=prev_comm,prev_pid,prev_state:vals=hitcount:size=8192'
  arm() {
    echo "$sysk" > $sys || { tail -5 $T/error_log >&2; exit 1; }
    echo "$swk" > $sw || { tail -5 $T/error_log >&2; exit 1; }
  }
  disarm() { echo "!$sysk" > $sys 2>/dev/null || true; echo "!$swk" > $sw 2>/dev/null || true; }
  # run PROG TEST FLAG SIZE ITERS: a server and a client to completion,
  # counted; leaves the histograms in /tmp/h.sys and /tmp/h.sw.
  run() {
    local prog=$1 t=$2 fl=$3 size=$4 n=$5 i=0
    port=$((port + 1))
    arm
    # shellcheck disable=SC2086 # fl is a flag or nothing
    "$prog$t" -d rxe0 -x 1 -F -p $port -s "$size" -n "$n" $fl > /tmp/cs.out 2>&1 &
    local spid=$!
    until listening $port; do
      i=$((i + 1)); [ $i -le 600 ] || { echo "server never listened" >&2; cat /tmp/cs.out >&2; exit 1; }
      sleep 0.05
    done
    # shellcheck disable=SC2086
    if ! timeout 600 "$prog$t" -d rxe0 -x 1 -F -p $port -s "$size" -n "$n" $fl 127.0.0.1 > /tmp/cc.out 2>&1 || ! wait $spid; then
      echo "$prog$t $fl -s $size -n $n failed:" >&2; cat /tmp/cs.out /tmp/cc.out >&2; exit 1
    fi
    typ=$(grep -E '^ [0-9]+ +[0-9]+ ' /tmp/cc.out | tail -n 1 | awk '{print $5}')
    cat $T/events/raw_syscalls/sys_enter/hist > /tmp/h.sys
    cat $T/events/sched/sched_switch/hist > /tmp/h.sw
    disarm
  }
  # tally COMM: "syscalls voluntary involuntary threads" of the command,
  # then "name=count" for each syscall, from /tmp/h.sys and /tmp/h.sw.
  tally() {
    local comm=$1
    awk -v c="$comm" '
      /^\{/ && /common_pid:/ {
        line = $0; sub(/^\{ *common_pid: */, "", line); split(line, a, /[ ,\[]+/)
        if (a[1] != c) next
        name = line; sub(/^.*id: */, "", name); sub(/ *\[.*$/, "", name); sub(/^sys_/, "", name)
        n = line; sub(/^.*hitcount: */, "", n); n += 0
        total += n; by[name] += n }
      END { printf "%d", total; for (k in by) printf " %s=%d", k, by[k]; printf "\n" }' /tmp/h.sys > /tmp/t.sys
    awk -v c="$comm" '
      /^\{/ && /prev_comm:/ {
        line = $0; sub(/^\{ *prev_comm: */, "", line); split(line, a, /[ ,]+/)
        if (a[1] != c) next
        pid = line; sub(/^.*prev_pid: */, "", pid); sub(/[ ,].*$/, "", pid)
        st = line; sub(/^.*prev_state: */, "", st); sub(/[ }].*$/, "", st)
        n = line; sub(/^.*hitcount: */, "", n); n += 0
        if (st == "0" || st == "R" || st == "R+") inv += n; else vol += n
        tid[pid] = 1 }
      END { k = 0; for (p in tid) k++; printf "%d %d %d\n", vol, inv, k }' /tmp/h.sw > /tmp/t.sw
    read -r sc rest < /tmp/t.sys
    read -r vol inv thr < /tmp/t.sw
    echo "$sc $vol $inv $thr $rest"
  }
  n1=${N1:-200} n2=${N2:-1200} fail=0
  echo "counts: kernel $(uname -r), $(nproc) CPUs, clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), rxe0 loopback, $n1 and $n2 iterations, both sides counted"
  for cs in ${CASES:-send_lat::2 send_lat:-e:2}; do
    IFS=: read -r t fl size <<<"$cs"
    declare -A per=()
    for prog in ${PROGS:-gv_ib_ ib_}; do
      comm="$prog$t"
      run "$prog" "$t" "$fl" "$size" "$n1"; read -r s1 v1 i1 _ r1 <<<"$(tally "$comm")"
      run "$prog" "$t" "$fl" "$size" "$n2"; read -r s2 v2 i2 h2 r2 <<<"$(tally "$comm")"
      d=$((n2 - n1))
      # the total counts only the syscalls that grew: one that fell (perftest's
      # gettimeofday loop, timing its CPU, runs longer or shorter) is setup noise
      per[$prog]=$( { for kv in $r1; do echo "1 ${kv%%=*} ${kv#*=}"; done; for kv in $r2; do echo "2 ${kv%%=*} ${kv#*=}"; done; } |
        awk -v d="$d" '{ if ($1 == 1) a[$2] += $3; else b[$2] += $3 }
          END { t = 0; for (k in b) if (b[k] > a[k]) t += b[k] - a[k]; printf "%.2f", t / d }')
      # per syscall name: (count in run 2 - count in run 1) / d, the largest first
      names=$( { for kv in $r1; do echo "1 ${kv%%=*} ${kv#*=}"; done; for kv in $r2; do echo "2 ${kv%%=*} ${kv#*=}"; done; } |
        awk -v d="$d" -v m="${SHOW:-0.05}" '{ if ($1 == 1) a[$2] += $3; else b[$2] += $3 }
          END { for (k in b) { v = (b[k] - a[k]) / d; if (v >= m || v <= -m) printf "%.3f %s\n", v, k }
                for (k in a) if (!(k in b)) printf "%.3f %s\n", -a[k] / d, k }' | sort -rg | awk '{ printf "%s %s, ", $2, $1 }')
      printf 'COUNT %-9s %-2s %5s B %-8s: syscalls/iter %6s  voluntary cs/iter %6s  involuntary cs/iter %6s  threads %s (%d-iteration run: t_typical %s usec, traced)\n' \
        "$t" "$fl" "$size" "${prog%_}" "${per[$prog]}" \
        "$(awk -v a="$v1" -v b="$v2" -v d="$d" 'BEGIN { printf "%.2f", (b - a) / d }')" \
        "$(awk -v a="$i1" -v b="$i2" -v d="$d" 'BEGIN { printf "%.2f", (b - a) / d }')" "$h2" "$n2" "$typ"
      echo "      per iteration: ${names%, }"
    done
    if [ "${CHECK:-0}" = 1 ] && [ -n "$fl" ] && awk -v g="${per[gv_ib_]}" -v p="${per[ib_]}" 'BEGIN { exit !(g > p) }'; then
      echo "CHECK FAILED: $t $fl $size B: goverbs makes ${per[gv_ib_]} syscalls per iteration, perftest ${per[ib_]}"
      fail=1
    fi
    unset per
  done
  exit $fail
fi

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
cp "$0" "$bin/counts.sh"
perftest_tools "$top" "$bin"
echo "counts: goverbs at $(cd "$top" && git describe --always --dirty), kernel command line '$RIG_APPEND'"
if [ -n "${BASE:-}" ]; then
  perftest_base "$top" "$bin" "$BASE"
  PROGS=${PROGS:-gb_ib_ gv_ib_ ib_}
  echo "counts: gb_ib_* is goverbs at $BASE"
fi
env=$(guest_env CASES N1 N2 CHECK PROGS SHOW GOMAXPROCS GODEBUG GOVERBS_WAIT_SPIN)
RIG_TIMEOUT=${RIG_TIMEOUT:-3600} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" -- \
  "$env counts.sh --guest"
