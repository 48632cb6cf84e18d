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
#   PLACE=1 test/perf/mix.sh     # also where the two programs ran (below)
#   COUNTERS=1 test/perf/mix.sh  # also rxe0's hw_counters that moved
#   CPUSTAT=1 PIN=1 test/perf/mix.sh  # also each CPU's time, by kind
#   THREADS=1 test/perf/mix.sh   # also the client's threads' CPU time
#   TRACE=1 PIN=1 test/perf/mix.sh  # also who ran on CPU 0 (sched_switch)
#   GVENVS="GODEBUG=disablethp=1;GOGC=off" test/perf/mix.sh  # settings A/B
#   PAIRENVS="GODEBUG=asyncpreemptoff=1" test/perf/mix.sh  # the same, both Go sides
#   BASE=HEAD~1 test/perf/mix.sh  # also perftest's server with goverbs at BASE
#   CANARY=1 test/perf/mix.sh    # also how fast the vCPUs ran just before
# Knobs: TEST (a perftest test name), ARGS, ROUNDS (default 9), PIN, PLACE,
# COUNTERS, CPUSTAT, THREADS, TRACE, CANARY, GVENVS, PAIRENVS, BASE, GAP (seconds idle
# before each pair, default 2), KERNEL, RIG_APPEND (default "tsc=reliable
# nopku", see lib.sh).
# GVENVS="A;B;..." pairs perftest's server with goverbs' client as it is
# and with each environment setting in turn (A, B, ...: "NAME=VALUE ..."),
# round after round, perftest/perftest first: an A/B of the client's
# runtime settings inside one boot. PAIRENVS="A;B;..." does the same for
# goverbs' server and client together: perftest/perftest, goverbs/goverbs
# as it is, and goverbs/goverbs with both sides under each setting (after
# GVENVS' pairings if both are set): two Go processes can behave otherwise
# than one beside perftest (docs/COST.md, session 58), and one boot of each
# setting apart is not an A/B. BASE=REV (a git revision) adds a
# pairing of perftest's server with goverbs' client built at REV
# (before/after in one boot), beside either set of pairings.
# COUNTERS=1 prints after each figure "[name=delta ...]": every counter of
# rxe0's port 1 (sysfs hw_counters: packets, RNR NAKs, retries, sequence
# errors) that changed during the pair's run, both sides together, so a
# pairing that loses time to RNR waits or retransmits shows it.
# CPUSTAT=1 prints after each figure "{cpuN user/system/softirq/idle ...}":
# each CPU's time during the pair's run in USER_HZ ticks (/proc/stat; system
# counts irq, idle counts iowait); with PIN=1 CPU 0 is the client's and CPU
# 1 the server's, so the split says whose user code or kernel work filled a
# CPU.
# THREADS=1 prints after each figure "<run/wait/slices ...>": for each thread
# of the client, busiest first, its time on a CPU and waiting for one (ms)
# and how many times it was put on a CPU (/proc/PID/task/*/schedstat, read
# every 20 ms until the client exits: the last 20 ms are missing), so the
# runtime's own threads (sysmon, idle Ms woken to poll the network) show
# beside the thread that does the work (the one found in nanosleep, sysmon,
# marked "m"); then, after "|", the other tasks
# (both CPUs) that ran most during the pair's run, ms each.
# TRACE=1 traces the scheduler's switches on CPU 0 (the client's, with
# PIN=1) during the pair's run (tracefs sched_switch) and prints after each
# figure "/N switches task ms .../": the number of switches, then the tasks
# that ran longest on that CPU, by name (swapper is idle).
# CANARY=1 times, just before each pair's run, the same fixed work on each
# vCPU and prints after the figure "~u0/u1 k0/k1~": ms of a loop of bash
# arithmetic (user code) and of a loop of bash redirections to /dev/null
# (open, dup and close: kernel entries), on CPU 0 and on CPU 1. A run's slow
# mode that the canaries share is the emulator's or the host's speed, not
# the program's.
# PLACE=1 samples, every 20 ms of a pair's run, the CPU of each running
# thread of the server and of the client (/proc/PID/task/*/stat, read with
# bash builtins only) and prints after each figure "(shared/samples s=...
# c=...)": how many samples found a running thread of each program on one
# CPU, then the server's and the client's CPU in each sample.
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
    sleep "${GAP:-2}" # the last pair's leftover kernel work settles (compare.sh)
    [ -z "${COUNTERS:-}" ] || counters > /tmp/mix.hw0
    [ -z "${CPUSTAT:-}" ] || grep '^cpu[0-9]' /proc/stat > /tmp/mix.cpu0
    [ -z "${THREADS:-}" ] || tasks > /tmp/mix.tasks0
    local can=""
    [ -z "${CANARY:-}" ] || can=$(canary)
    [ -z "${TRACE:-}" ] || { echo 0 > $T/tracing_on; echo > $T/trace; echo 1 > $T/tracing_on; }
    # shellcheck disable=SC2086 # args and the pins are word lists
    timeout -k 5 300 $pin_s "$s" -d rxe0 -x 1 -F -p $port $args > /tmp/mix.s 2>&1 &
    local sp=$!
    until listening $port; do
      i=$((i + 1)); [ $i -le 600 ] || { echo failed; return 0; }
      sleep 0.05
    done
    # shellcheck disable=SC2086
    timeout 300 $pin_c "$c" -d rxe0 -x 1 -F -p $port $args 127.0.0.1 > /tmp/mix.c 2>&1 &
    local cp=$! place="" moved="" cpu="" thr="" oncpu=""
    [ -z "${PLACE:-}" ] || place=$(placement "$sp" "$cp")
    [ -z "${THREADS:-}" ] || thr=$(threads "$cp")
    if ! wait $cp || ! wait $sp; then
      echo failed; return 0
    fi
    [ -z "${TRACE:-}" ] || { echo 0 > $T/tracing_on; oncpu=$(oncpu0); }
    [ -z "${COUNTERS:-}" ] || moved=$(counters | awk 'NR == FNR { a[$1] = $2; next }
      $2 != a[$1] { printf "%s%s=%d", sep, $1, $2 - a[$1]; sep = " " }' /tmp/mix.hw0 -)
    # the other tasks that ran most meanwhile (kernel threads: softirqs, work)
    [ -z "${THREADS:-}" ] || thr="$thr | $(tasks | awk 'NR == FNR { a[$1] = $2; next }
      $3 !~ /^(ib_|gv_ib_|gb_ib_)/ && $2 - a[$1] >= 1e6 { print $2 - a[$1], $3 }' /tmp/mix.tasks0 - |
      sort -k1,1nr | head -n 4 | awk '{ printf "%s%s %.1f", sep, $2, $1 / 1e6; sep = " " }')"
    # /proc/stat's fields: user nice system idle iowait irq softirq
    [ -z "${CPUSTAT:-}" ] || cpu=$(grep '^cpu[0-9]' /proc/stat | awk 'NR == FNR { for (i = 2; i <= 8; i++) a[$1, i] = $i; next }
      { printf "%s%s %d/%d/%d/%d", sep, $1, $2 + $3 - a[$1, 2] - a[$1, 3], $4 + $7 - a[$1, 4] - a[$1, 7],
          $8 - a[$1, 8], $5 + $6 - a[$1, 5] - a[$1, 6]; sep = " " }' /tmp/mix.cpu0 -)
    local col=5
    case $test in *_bw) col=4 ;; esac
    grep -E '^ [0-9]+ +[0-9]+ ' /tmp/mix.c | tail -n 1 | figure $col | tr -d '\n'
    echo "${can:+ ~$can~}${place:+ ($place)}${moved:+ [$moved]}${cpu:+ {$cpu\}}${thr:+ <$thr>}${oncpu:+ /$oncpu/}"
  }
  # canary: "u0/u1 k0/k1", ms of 4,000 rounds of bash arithmetic and of
  # 500 redirections of a no-op to /dev/null, on CPU 0 and on CPU 1, each
  # timed inside its bash (the fork and exec left out).
  canary() {
    local c u=() k=()
    for c in 0 1; do
      # shellcheck disable=SC2016 # expanded by the inner bash
      u+=("$(taskset -c $c bash -c 's=$EPOCHREALTIME; for ((i = 0; i < 4000; i++)); do :; done; echo "$s $EPOCHREALTIME"')")
      # shellcheck disable=SC2016
      k+=("$(taskset -c $c bash -c 's=$EPOCHREALTIME; for ((i = 0; i < 500; i++)); do : > /dev/null; done; echo "$s $EPOCHREALTIME"')")
    done
    printf '%s\n' "${u[@]}" "${k[@]}" | awk '{ t[NR] = ($2 - $1) * 1000 } END { printf "%.0f/%.0f %.0f/%.0f", t[1], t[2], t[3], t[4] }'
  }
  # counters: "name value" for each of rxe0's port counters.
  counters() {
    local f v
    for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
      read -r v < "$f" && echo "${f##*/} $v"
    done
  }
  # running PID: sets RUN to the CPUs of PID's running threads and of its
  # child's (the program under timeout and taskset) as " cpu cpu ". Bash
  # builtins only: a sample forks nothing.
  running() {
    local f line rest kid=""
    RUN=" "
    for f in /proc/"$1"/task/*/children; do read -r kid < "$f" 2>/dev/null || true; done
    for f in /proc/"$1"/task/*/stat ${kid:+/proc/$kid/task/*/stat}; do
      read -r line < "$f" 2>/dev/null || continue
      rest=${line##*) }
      # shellcheck disable=SC2086 # split the fields
      set -- $rest
      [ "$1" = R ] && RUN="$RUN${37} "
    done
  }
  # cpuchar " CPUS ": sets CH to one character for a sample's CPUs (see
  # placement).
  cpuchar() {
    # shellcheck disable=SC2086
    set -- $1
    case $# in 0) CH=- ;; 1) CH=$1 ;; *) CH=x ;; esac
  }
  if [ -n "${TRACE:-}" ]; then
    T=/sys/kernel/tracing
    [ -e $T/events ] || mount -t tracefs nodev $T
    echo 0 > $T/tracing_on; echo 1 > $T/tracing_cpumask; echo 32768 > $T/buffer_size_kb
    echo 1 > $T/events/sched/sched_switch/enable
  fi
  # oncpu0: "N switches comm ms ..." from the trace of CPU 0's switches: the
  # time from each switch to the next belongs to the task switched in.
  oncpu0() {
    echo -n "$(grep -c 'sched_switch:' $T/trace) switches "
    awk '/sched_switch:/ {
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^[0-9.]+:$/) t = $i + 0
          if ($i ~ /^next_comm=/) c = substr($i, 11)
        }
        if (prev != "") ms[prev] += (t - last) * 1000
        prev = c; last = t
      }
      END { for (k in ms) printf "%.1f %s\n", ms[k], k }' $T/trace |
      sort -k1,1nr | head -n 5 | awk '{ printf "%s%s %s", sep, $2, $1; sep = " " }'
  }
  # tasks: "TID RUNNS COMM" for every task in the guest.
  tasks() {
    local d r c
    for d in /proc/[0-9]*/task/*; do
      read -r r _ < "$d/schedstat" 2>/dev/null && read -r c < "$d/comm" 2>/dev/null && echo "${d##*/} $r $c"
    done
  }
  # threads PID: "run/wait/slices ..." of each thread of the program PID
  # (the guest's busybox timeout execs the program in the process it
  # started), busiest first, each thread's figures from the last sample
  # that found it (a program's threads leave one by one as it exits). A
  # thread any sample found asleep in nanosleep (wchan hrtimer_nanosleep:
  # the Go runtime's monitor, sysmon) has an "m" after its figures.
  threads() {
    local f line w
    local -A last=() mon=()
    # until it exits (a zombie, state Z, until the caller waits for it)
    while read -r line < /proc/"$1"/stat 2>/dev/null && [[ ${line##*) } != Z* ]]; do
      for f in /proc/"$1"/task/*/schedstat; do
        read -r line < "$f" 2>/dev/null && last[$f]=$line
        # wchan has no newline: read fails at its end but sets w
        w=; read -r w < "${f%schedstat}wchan" 2>/dev/null; [ "$w" != hrtimer_nanosleep ] || mon[$f]=m
      done
      read -r -t 0.02 -u "$never" || true
    done
    for f in "${!last[@]}"; do echo "${last[$f]} ${mon[$f]:-}"; done |
      sort -k1,1nr | awk '{ printf "%s%.1f/%.1f/%d%s", sep, $1 / 1e6, $2 / 1e6, $3, $4; sep = " " }'
  }
  # A read of an idle FIFO is the 20 ms sleep (the guest has no /dev/fd).
  mkfifo /tmp/mix.never; exec {never}<> /tmp/mix.never
  # placement SERVER CLIENT: "shared/samples s=CPUS c=CPUS" until the
  # client exits: the samples that found both programs running on one CPU,
  # then each sample's CPUs of the server's and the client's running threads
  # (one character a sample: the CPU, "x" for several, "-" for none).
  placement() {
    local shared=0 n=0 s x sc="" cc=""
    while [ -d /proc/"$2" ]; do
      running "$1"; s=$RUN
      running "$2"
      cpuchar "$s"; sc=$sc$CH
      cpuchar "$RUN"; cc=$cc$CH
      if [ "$s" != " " ] && [ "$RUN" != " " ]; then
        n=$((n + 1))
        for x in $s; do case $RUN in *" $x "*) shared=$((shared + 1)); break ;; esac; done
      fi
      read -r -t 0.02 -u "$never" || true
    done
    echo "$shared/$n s=$sc c=$cc"
  }
  echo "mix: kernel $(uname -r), $(nproc) CPUs, $test $args${PIN:+, pinned}; server/client"
  # wrapped ENV DIR: writes DIR/gv_ib_$test, goverbs' program run under the
  # environment setting ENV, and prints its path.
  wrapped() {
    mkdir -p "$2"
    printf '#!/bin/sh\nexec env %s %s "$@"\n' "$1" "$(command -v "gv_ib_$test")" > "$2/gv_ib_$test"
    chmod +x "$2/gv_ib_$test"
    echo "$2/gv_ib_$test"
  }
  names=("goverbs/goverbs" "perftest/perftest" "goverbs/perftest" "perftest/goverbs")
  progs=("gv_ib_$test gv_ib_$test" "ib_$test ib_$test" "gv_ib_$test ib_$test" "ib_$test gv_ib_$test")
  if [ -n "${GVENVS:-}" ]; then
    # perftest's server with goverbs' client as it is and under each setting
    names=("perftest/perftest" "perftest/goverbs") progs=("ib_$test ib_$test" "ib_$test gv_ib_$test")
    IFS=';' read -r -a envs <<<"$GVENVS"
    for k in "${!envs[@]}"; do
      g=$(wrapped "${envs[k]}" /tmp/mix.env$k)
      names+=("perftest/goverbs[${envs[k]}]") progs+=("ib_$test $g")
    done
  fi
  if [ -n "${PAIRENVS:-}" ]; then
    # goverbs' server and client as they are and both under each setting
    if [ -z "${GVENVS:-}" ]; then
      names=("perftest/perftest") progs=("ib_$test ib_$test")
    fi
    names+=("goverbs/goverbs") progs+=("gv_ib_$test gv_ib_$test")
    IFS=';' read -r -a penvs <<<"$PAIRENVS"
    for k in "${!penvs[@]}"; do
      g=$(wrapped "${penvs[k]}" /tmp/mix.penv$k)
      names+=("goverbs/goverbs[${penvs[k]}]") progs+=("$g $g")
    done
  fi
  if [ -n "${BASE:-}" ]; then
    names+=("perftest/goverbs@$BASE") progs+=("ib_$test gb_ib_$test")
  fi
  declare -a all=()
  for r in $(seq "${ROUNDS:-9}"); do
    line="round $r:"
    for k in "${!progs[@]}"; do
      # shellcheck disable=SC2086 # two program names
      v=$(pair ${progs[$k]})
      all[k]="${all[k]:-} ${v%% *}" # the figure, not what follows it
      line="$line  ${names[$k]} $v"
    done
    echo "$line"
  done
  for k in "${!progs[@]}"; do
    echo "MEDIAN ${names[$k]} $(echo "${all[k]:-}" | median)"
  done
  exit 0
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
cp "$0" "$bin/mix.sh"
perftest_tools "$top" "$bin"
echo "mix: goverbs at $(cd "$top" && git describe --always --dirty), kernel command line '$RIG_APPEND'"
[ -z "${BASE:-}" ] || { perftest_base "$top" "$bin" "$BASE"; echo "mix: goverbs@$BASE is goverbs at $(cd "$top" && git describe --always "$BASE")"; }
env=$(guest_env TEST ARGS ROUNDS PIN PLACE COUNTERS CPUSTAT THREADS TRACE CANARY GAP GVENVS PAIRENVS BASE GOMAXPROCS GODEBUG)
log=$(mktemp); trap 'rm -rf "$bin" "$log"' EXIT
rc=0
RIG_TIMEOUT=${RIG_TIMEOUT:-3600} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" -- \
  "$env mix.sh --guest" > "$log" 2>&1 || rc=$?
tr -d '\r' < "$log" | grep -a -E '^(mix|round|MEDIAN)' || true
[ $rc = 0 ] || { tail -n 30 "$log"; echo "mix.sh: the guest failed (exit $rc)" >&2; exit "$rc"; }
