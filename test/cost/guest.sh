#!/bin/sh
# guest.sh "DEVICES" RUNS N BIG_N MR_MAX [PATHS [CPU]]: the in-guest half of compare.sh
# (runs from /rig/bin). For each device, RUNS runs of each tool, rotating
# which goes first (with compare.sh's BASE a third tool, ibvcost-base, the
# older build, joins the rotation); every report is printed between
# "=====BEGIN name" and "=====END name" lines for the host to cut out of the
# console. A report's name ends in its run's number, zero-padded so that the
# host's glob lists the runs in order: the i-th runs of the tools ran next to
# each other, and ibvcost -compare pairs them (its "paired" column).
devs=$1 runs=$2 n=$3 bign=$4 mrmax=$5 paths=${6:-slow,fast,cm} cpu=${7:-}
# The default is not passed to ibvcost: a BASE build older than -paths
# would refuse it.
pflag=
[ "$paths" = slow,fast,cm ] || pflag="-paths $paths"
# CPU pins each tool's measuring thread (ibvcost -cpu, verbs_cost -c); a
# BASE build older than -cpu refuses it.
cflag= ccflag=
[ -z "$cpu" ] || cflag="-cpu $cpu" ccflag="-c $cpu"
# The syscall counters need the raw_syscalls tracepoint's id from tracefs.
[ -e /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
cd /tmp || exit 1
# Register the tracepoint once, from a single-threaded process, while
# nothing else runs: then no tool's counter patches kernel text (under TCG a
# patch racing with a Go thread's syscall crashes the guest; see
# cmd/ibvcost/bench.go). -perf tells ibvcost it is safe.
verbs_cost -H > hold.out &
i=0
until [ -s hold.out ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s hold.out ] || { echo "guest.sh: the tracepoint holder did not start" >&2; exit 1; }
tools="goverbs rdma-core"
command -v ibvcost-base >/dev/null && tools="$tools base"
status=0
for d in $devs; do
  i=1
  order=$tools
  while [ "$i" -le "$runs" ]; do
    for t in $order; do
      name=$t-$d-$(printf %03d "$i")
      # Idle first: the kernel's work left from the last run (its objects'
      # release, RCU's grace periods) is not this run's (test/perf's
      # compare.sh found a 10% gap that was only that; session 45).
      sleep "${GAP:-2}"
      if [ "$t" = rdma-core ]; then
        verbs_cost -d "$d" -n "$n" -b "$bign" -m "$mrmax" -p "$paths" $ccflag > "$name.json" || status=1
      else
        bin=ibvcost
        [ "$t" = base ] && bin=ibvcost-base
        # -v: a line per row on the console, so a silent console means a hang.
        "$bin" -v -perf -d "$d" -n "$n" -big-n "$bign" -mr-max "$mrmax" $pflag $cflag -json > "$name.json" || status=1
      fi
      echo "=====BEGIN $name"
      cat "$name.json"
      echo "=====END $name"
    done
    order="${order#* } ${order%% *}" # the first goes last next time
    i=$((i + 1))
  done
done
exit $status
