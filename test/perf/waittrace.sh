#!/bin/sh
# waittrace.sh NAME CMD...: in a rig guest, where the threads of CMD (whose
# command name starts with NAME) wait while CMD runs, and what the CPUs run
# meanwhile (tracefs sched/sched_switch; a kernel stack for each switch of
# NAME's threads). It prints, by the state a thread left the CPU in and the
# first kernel frames past the scheduler's own, how many switches and the
# mean time the thread stayed off the CPU ("WAIT"), then, over the spans when
# one of NAME's threads was off in D (an uninterruptible wait in the
# kernel), which tasks ran on the CPUs for how long ("BUSY"; swapper is an
# idle CPU), which tasks took the CPU of one of NAME's threads that was
# preempted (left in R), for how long ("TOOK", with the preempted thread's
# id), how often each thread was preempted by which ("PBY preempted by
# taker"), and each thread's role: where it sleeps, by its first frame
# ("ROLE"; a Go program's sysmon sleeps in do_nanosleep, its idle Ms in
# futex_wait_queue).
#   test/rig/run.sh --bin DIR -- 'waittrace.sh slowloop slowloop rxe0 ah 300'
#   DELAY=0.3 waittrace.sh ...   # trace from 0.3 s after the start on
#   FRAMES=6 waittrace.sh ...    # more of each stack (default 4 frames)
# (DIR holding waittrace.sh and the command; see test/perf/slowloop.sh.)
# Session 27 found with it that an AH's create sleeps once in the kernel
# (rdma_addr_find_l2_eth_by_grh waits for the address resolution's work
# item) on both goverbs and libibverbs, and that under TCG the wait is
# mostly idle CPUs: the wake-ups of halted vCPUs, not either program.
name=$1; shift
T=/sys/kernel/tracing
[ -e $T/events ] || mount -t tracefs nodev $T
echo 0 > $T/tracing_on; echo > $T/trace; echo 16384 > $T/buffer_size_kb
echo 0 > $T/events/sched/sched_switch/filter
echo "stacktrace if prev_comm ~ \"$name*\"" > $T/events/sched/sched_switch/trigger
echo 1 > $T/events/sched/sched_switch/enable
if [ -n "${DELAY:-}" ]; then
  # Past the program's start (a Go program's sysmon naps at its shortest
  # for its first ~50 rounds, ~10 ms under TCG): trace from DELAY seconds on.
  "$@" & pid=$!
  sleep "$DELAY"; echo 1 > $T/tracing_on
  wait $pid
else
  echo 1 > $T/tracing_on
  "$@"
fi
echo 0 > $T/tracing_on
echo 0 > $T/events/sched/sched_switch/enable
echo "!stacktrace if prev_comm ~ \"$name*\"" > $T/events/sched/sched_switch/trigger
awk -v name="$name" -v frames="${FRAMES:-4}" '
function field(s, k,   v) { v = s; sub(".*" k "=", "", v); sub(/ [a-z_]+=.*/, "", v); sub(/ ==>.*/, "", v); return v }
function cpuof(s,   c) { c = s; sub(/^[^[]*\[/, "", c); sub(/\].*/, "", c); return c + 0 }
/sched_switch:/ {
  cpu = cpuof($0)
  ts = $0; sub(/^.*\] [^ ]+ /, "", ts); sub(/:.*/, "", ts); ts += 0
  pc = field($0, "prev_comm"); pp = field($0, "prev_pid"); st = field($0, "prev_state")
  nc = field($0, "next_comm"); np = field($0, "next_pid")
  if ((cpu in since) && nd > 0) { d = ts - (since[cpu] > dstart ? since[cpu] : dstart); if (d > 0) busy[pc "/" pp] += d }
  if ((cpu in since) && (cpu in taker)) { pre[taker[cpu] " after " tpid[cpu] " " sig[tpid[cpu]]] += ts - since[cpu]; delete taker[cpu] }
  since[cpu] = ts
  if (index(nc, name) == 1 && (np in off)) {
    n[sig[np]]++; tot[sig[np]] += ts - off[np]; delete off[np]
    if (np in ind) { delete ind[np]; if (--nd == 0) dtot += ts - dstart }
  }
  lastout[cpu] = ""
  if (index(pc, name) == 1) {
    off[pp] = ts; sig[pp] = st; lastout[cpu] = pp
    if (st == "D" && !(pp in ind)) { ind[pp] = 1; if (nd++ == 0) dstart = ts }
    if (st ~ /^R/) { taker[cpu] = nc "/" np; tpid[cpu] = pp; pby[pp " by " np]++ }
  }
  next
}
/<stack trace>/ { cur = lastout[cpuof($0)]; depth = 0; next }
/^ => / && cur != "" {
  f = $2
  if (f ~ /^(trace_|__traceiter_|__schedule|schedule|preempt_schedule|__cond_resched|schedule_timeout|schedule_hrtimeout|io_schedule)/) next
  if (depth == 0) role[cur " " f]++
  if (depth++ < frames) sig[cur] = sig[cur] " " f
  next
}
{ cur = "" }
END {
  for (k in n) printf "WAIT %6d switches, mean %9.1f us off the CPU: %s\n", n[k], tot[k] * 1e6 / n[k], k
  for (k in busy) printf "BUSY %10.1f us of %.1f us in D: %s\n", busy[k] * 1e6, dtot * 1e6, k
  for (k in pby) printf "PBY %6d %s\n", pby[k], k
  for (k in role) printf "ROLE %6d %s\n", role[k], k
  for (k in pre) printf "TOOK %10.1f us of the CPU of a preempted thread: %s\n", pre[k] * 1e6, k
}' $T/trace | sort -k1,1r -k2nr | awk '$1 == "WAIT" && w++ >= 10 { next } $1 == "BUSY" && b++ >= 6 { next } $1 == "TOOK" && t++ >= 10 { next } $1 == "ROLE" && r++ >= 20 { next } $1 == "PBY" && pb++ >= 12 { next } { print }'
