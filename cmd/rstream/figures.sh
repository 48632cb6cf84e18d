#!/bin/sh
# figures.sh: throughput and round-trip latency of goverbs' rstream, rdma-core's
# rstream (default: nonblocking, spinning; and -T b: blocking) and rdma-core's
# rstream -T s (TCP sockets) over one netdev, at 64 B, 4 KiB, 64 KiB and 1 MiB,
# in one boot. It runs inside the rig with goverbs' rstream in PATH as
# grstream: test/perf/figures.sh builds that and boots the measurement
# rig's command line (test/perf/lib.sh: on the HPET, which 6.1 picks
# without it, every clock read is a syscall, and Go's runtime reads the
# clock far more often than rstream does). ROUNDS (default 3) rounds run
# one after the other; in each, every size and mode runs the four pairs
# back to back, the first of them rotating from round to round, so a burst
# of load on a shared host falls on each in turn rather than on one. Each line is
# the client's result line (rstream's format), prefixed by round and pair;
# then a table of medians over the rounds and their ratios: goverbs'
# throughput (MB/s, from usec/xfer: rstream's Gb/s has two decimals, 0.00
# at 64 B under TCG) or round trip (usec/xfer) over rdma-core rstream's,
# its blocking mode's and TCP's (throughput: above 1 is goverbs faster;
# latency: below 1 is goverbs faster). A pair that failed counts in no
# median. Last, a RESULT line a size and mode with goverbs' ratio to the
# spinning rstream, which test/perf/boots.sh collects over boots.
# GENV='VAR=value ...' adds a fifth pair, goverbs0: goverbs' rstream with
# that environment (e.g. GOVERBS_WAIT_SPIN_MAX=-1ns: the spin cap stays
# 1 ms), and its columns at the table's end. GSPIN=D is
# GENV=GOVERBS_WAIT_SPIN=D (-1ns: CQ.Wait parks at once, as rsocket.c does
# after its 10 us). SIZES (default "64 4096 65536 1048576") and PAIRS
# (indices: 0 goverbs, 1 rstream, 2 rstream -T b, 3 TCP, 4 goverbs0; default
# all) narrow a run; the table leaves out what did not run.
addr=${1:-10.0.2.15}
[ -n "${GSPIN:-}" ] && GENV="GOVERBS_WAIT_SPIN=$GSPIN"
rounds=${ROUNDS:-3}
port=7800
all=/tmp/fig-all.txt
: >"$all"
one() { # label server-cmd client-cmd args...
	label=$1 srv=$2 cli=$3
	shift 3
	port=$((port + 1))
	# A pair that hangs (rstream -T s at 64 B bw once sat for minutes) is
	# killed after ${PAIR_TIMEOUT:-120} s and reported; the others still run.
	timeout -k 5 "${PAIR_TIMEOUT:-120}" $srv -b "$addr" -p $port "$@" >/tmp/fig-srv.txt 2>&1 &
	spid=$!
	# A client that starts before its server listens fails: rsocket's
	# rconnect (retried below), but also rdma-core's nonblocking client
	# and TCP client, whose rpoll after the connect reports POLLERR (exit
	# status 8 or 24) while the server waits on until the timeout. So wait
	# (up to 10 s) for the listener: a TCP socket, or an rdma_cm ID in
	# LISTEN, on the port.
	i=0
	while [ $i -lt 100 ] && ! { netstat -ltn 2>/dev/null; rdma res show cm_id 2>/dev/null | grep LISTEN; } | grep -q ":$port "; do
		i=$((i + 1))
		sleep 0.1
	done
	i=0
	while :; do
		out=$(timeout -k 5 "${PAIR_TIMEOUT:-120}" $cli -s "$addr" -p $port "$@" 2>&1) || out="$out
timed out or failed (status $?)"
		case "$out" in *rconnect*) i=$((i + 1)); [ $i -lt 50 ] && { sleep 0.2; continue; } ;; esac
		break
	done
	wait $spid
	line=$(echo "$out" | tail -1)
	printf '%s %-16s %s\n' "$round" "$label" "$line"
	case "$line" in
	*failed*) # what both sides said, for the failure's cause
		echo "$out" | tail -5 | sed 's/^/#   client: /'
		tail -5 /tmp/fig-srv.txt | sed 's/^/#   server: /' ;;
	esac
	echo "$label $size $line" >>"$all"
}
# rdma-core's rstream by path: a guest booted with --go ./cmd/... has
# goverbs' rstream first in PATH under the same name.
rc=/usr/bin/rstream
pair() { # index args...: the index-th of the four pairs
	k=$1
	shift
	case $k in
	0) one "goverbs-$mode" grstream grstream "$@" ;;
	1) one "rstream-$mode" $rc $rc "$@" ;;
	2) one "rstream-b-$mode" "$rc -T b" "$rc -T b" "$@" ;;
	3) one "tcp-$mode" "$rc -T s" "$rc -T s" "$@" ;;
	4) one "goverbs0-$mode" "env $GENV grstream" "env $GENV grstream" "$@" ;;
	esac
}
pairs=${PAIRS:-0 1 2 3}
[ -n "${GENV:-}" ] && [ -z "${PAIRS:-}" ] && pairs="0 1 2 3 4"
npairs=$(echo $pairs | wc -w)
round=0
while [ $round -lt "$rounds" ]; do
	round=$((round + 1))
	for size in ${SIZES:-64 4096 65536 1048576}; do
		case $size in
		64) lat=2000 bw=20000 ;;
		4096) lat=2000 bw=10000 ;;
		65536) lat=500 bw=1000 ;;
		1048576) lat=50 bw=100 ;;
		esac
		for mode in lat bw; do
			if [ $mode = lat ]; then set -- -S $size -C 1 -I $lat; else set -- -S $size -C $bw -I 1; fi
			j=0
			while [ $j -lt $npairs ]; do
				pair $(echo $pairs | cut -d' ' -f$(((j + round - 1) % npairs + 1))) "$@"
				j=$((j + 1))
			done
		done
	done
done
echo
echo "medians of $rounds rounds (goverbs / other): bw = MB/s ratio, lat = usec/xfer ratio"
awk -v extra="${GENV:-}" '
function median(key,   n, i, j, t, a) {
  if (!(key in cnt)) return ""
  n = cnt[key]
  for (i = 1; i <= n; i++) a[i] = vals[key, i]
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
{ split($1, p, "-"); mode = p[length(p)]; impl = $1; sub("-" mode "$", "", impl)
  v = $NF # usec/xfer
  if (v !~ /^[0-9.]+$/ || v + 0 <= 0) next
  if (mode == "bw") v = sprintf("%.3f", $2 / v) # MB/s
  key = impl SUBSEP mode SUBSEP $2; vals[key, ++cnt[key]] = v + 0 }
END {
  printf "%-8s %-4s %12s %12s %12s %12s %10s %10s %10s", "size", "mode", "goverbs", "rstream", "rstream-b", "tcp", "/rstream", "/rstream-b", "/tcp"
  if (extra != "") printf " %12s %10s %10s", "goverbs0", "g0/rstream", "g0/goverbs"
  printf "\n"
  n = split("64 4096 65536 1048576", order, " ")
  split("goverbs rstream rstream-b tcp goverbs0", impls, " ")
  for (i = 1; i <= n; i++) for (m = 1; m <= 2; m++) {
    s = order[i]; mode = (m == 1) ? "lat" : "bw"
    for (k = 1; k <= 4; k++) med[k] = median(impls[k] SUBSEP mode SUBSEP s)
    if (med[1] == "") continue
    printf "%-8s %-4s", s, mode
    for (k = 1; k <= 4; k++) printf " %12s", (med[k] == "") ? "-" : med[k] " (" cnt[impls[k] SUBSEP mode SUBSEP s] ")"
    for (k = 2; k <= 4; k++) if (med[k] != "") printf " %10.2f", med[1] / med[k]; else printf " %10s", "-"
    if (extra != "") {
      g0 = median("goverbs0" SUBSEP mode SUBSEP s)
      printf " %12s", (g0 == "") ? "-" : g0 " (" cnt["goverbs0" SUBSEP mode SUBSEP s] ")"
      if (g0 != "" && med[2] != "") printf " %10.2f", g0 / med[2]; else printf " %10s", "-"
      printf " %10.2f", g0 / med[1]
    }
    printf "\n"
    if (med[2] != "") res = res sprintf("RESULT %s rsocket %s %s B: median goverbs %s, rstream %s (%s); ratio goverbs/rstream %.3f\n", \
      mode, (mode == "lat") ? "round trip" : "stream", s, med[1], med[2], (mode == "lat") ? "usec/xfer" : "MB/s", med[1] / med[2])
  }
  # One line a row for test/perf/boots.sh (a "bw" row is a rate: above 1 is
  # goverbs faster; a "lat" row a time: below 1).
  printf "\n%s", res
}' "$all"
