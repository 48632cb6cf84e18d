#!/bin/sh
# kwtrace.sh LABEL SRV CLI ARGS...: in a rig guest, run an rstream pair (SRV
# -b 10.0.2.15, CLI -s 10.0.2.15, both with ARGS) and trace 0.5 s of its
# middle (from DELAY, default 1.5 s, after the client starts) with tracefs
# sched_wakeup and sched_switch: how long each woken kworker waited for a
# CPU (its wake-up to its switch in; mean and percentiles), what it took
# the CPU from, and who preempted whom more than twice. On Linux 7.x rxe
# sends and receives from work queues, so those waits are on the path of
# every transfer; session 50 compared goverbs' rstream with rdma-core's:
#   mkdir d; cp test/perf/kwtrace.sh d; go build -o d/grstream ./cmd/rstream
#   cat > d/run.sh <<'X'
#   for r in 1 2 3; do
#     /rig/bin/kwtrace.sh rstream /usr/bin/rstream /usr/bin/rstream -S 64 -C 1 -I 10000
#     /rig/bin/kwtrace.sh goverbs /rig/bin/grstream /rig/bin/grstream -S 64 -C 1 -I 10000
#   done
#   X
#   chmod +x d/*.sh
#   RIG_APPEND="tsc=reliable nopku" test/rig/run.sh --kernel newest --bin d -- run.sh
label=$1 srv=$2 cli=$3; shift 3
T=/sys/kernel/tracing
[ -e $T/events ] || mount -t tracefs nodev $T
echo 0 > $T/tracing_on; echo > $T/trace; echo 16384 > $T/buffer_size_kb
echo 1 > $T/events/sched/sched_switch/enable
echo 1 > $T/events/sched/sched_wakeup/enable
p=$((7950 + $(date +%s) % 40))
$srv -b 10.0.2.15 -p $p "$@" >/dev/null 2>&1 &
sleep 1
$cli -s 10.0.2.15 -p $p "$@" > /tmp/cli.out 2>&1 &
cpid=$!
sleep ${DELAY:-1.5}
echo 1 > $T/tracing_on; sleep 0.5; echo 0 > $T/tracing_on
wait $cpid; wait
echo "$label: $(tail -1 /tmp/cli.out)"
awk -v label="$label" '
{
  ts = ""; ev = ""
  for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = substr($i, 1, length($i) - 1); ev = $(i + 1); break }
  if (ts == "") next
  if (ev == "sched_wakeup:") {
    c = ""; pid = ""
    for (i = 1; i <= NF; i++) { if ($i ~ /^comm=/) c = substr($i, 6); if ($i ~ /^pid=/) pid = substr($i, 5) }
    if (c ~ /^kworker/) wake[pid] = ts
  } else if (ev == "sched_switch:") {
    np = ""; pc = ""; ps = ""; nc = ""
    for (i = 1; i <= NF; i++) {
      if ($i ~ /^next_pid=/) np = substr($i, 10)
      if ($i ~ /^prev_comm=/) pc = substr($i, 11)
      if ($i ~ /^prev_state=/) ps = substr($i, 12)
      if ($i ~ /^next_comm=/) nc = substr($i, 11)
    }
    if (np in wake) {
      d = (ts - wake[np]) * 1e6; n++; sum += d; print d > "/tmp/wq-delays"
      from[pc]++
      delete wake[np]
    }
    if (ps == "R" || ps == "R+") pre[pc " by " nc]++
    sw[pc]++
  }
}
END {
  printf "%s: kworker wake-to-run %d, mean %.1f us\n", label, n, n ? sum / n : 0
  for (k in from) printf "%s:   kworker took the CPU from %s %d\n", label, k, from[k]
  for (k in pre) if (pre[k] > 2) printf "%s:   preempted %s %d\n", label, k, pre[k]
}' $T/trace
echo 0 > $T/events/sched/sched_switch/enable
echo 0 > $T/events/sched/sched_wakeup/enable
sort -n /tmp/wq-delays | awk -v label="$label" '{a[NR]=$1} END {if (NR) printf "%s: delays p10 %.1f p50 %.1f p90 %.1f p99 %.1f us\n", label, a[int(NR*0.1)+1], a[int(NR*0.5)+1], a[int(NR*0.9)+1], a[int(NR*0.99)+1]}'
rm -f /tmp/wq-delays
