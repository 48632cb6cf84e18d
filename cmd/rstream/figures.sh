#!/bin/sh
# figures.sh: throughput and round-trip latency of goverbs' rstream, rdma-core's
# rstream (default: nonblocking, spinning; and -T b: blocking) and rdma-core's
# rstream -T s (TCP sockets) over one netdev, at 64 B, 4 KiB, 64 KiB and 1 MiB,
# in one boot. Run inside the rig with goverbs' rstream in PATH as grstream:
#   test/rig/run.sh --kernel 6.1 --bin DIR -- 'sh /tmp/figures.sh 10.0.2.15'
# (DIR holds grstream and this script). Each line is the client's result line
# (rstream's format), prefixed by the pair; then a table of ratios: goverbs'
# throughput (Gb/s) or round trip (usec/xfer) over rdma-core rstream's, its
# blocking mode's and TCP's (throughput: above 1 is goverbs faster; latency:
# below 1 is goverbs faster).
addr=${1:-10.0.2.15}
port=7800
all=/tmp/fig-all.txt
: >"$all"
one() { # label server-cmd client-cmd args...
	label=$1 srv=$2 cli=$3
	shift 3
	port=$((port + 1))
	# A pair that hangs (rstream -T s at 64 B bw once sat for minutes) is
	# killed after ${PAIR_TIMEOUT:-180} s and reported; the others still run.
	timeout -k 5 "${PAIR_TIMEOUT:-180}" $srv -b "$addr" -p $port "$@" >/tmp/fig-srv.txt 2>&1 &
	spid=$!
	i=0
	while :; do
		out=$(timeout -k 5 "${PAIR_TIMEOUT:-180}" $cli -s "$addr" -p $port "$@" 2>&1) || out="$out
timed out or failed (status $?)"
		case "$out" in *rconnect*) i=$((i + 1)); [ $i -lt 50 ] && { sleep 0.2; continue; } ;; esac
		break
	done
	wait $spid
	line=$(echo "$out" | tail -1)
	printf '%-16s %s\n' "$label" "$line"
	echo "$label $size $line" >>"$all"
}
for size in 64 4096 65536 1048576; do
	case $size in
	64) lat=2000 bw=20000 ;;
	4096) lat=2000 bw=10000 ;;
	65536) lat=500 bw=1000 ;;
	1048576) lat=50 bw=100 ;;
	esac
	for mode in lat bw; do
		if [ $mode = lat ]; then set -- -S $size -C 1 -I $lat; else set -- -S $size -C $bw -I 1; fi
		one "goverbs-$mode" grstream grstream "$@"
		one "rstream-$mode" rstream rstream "$@"
		one "rstream-b-$mode" "rstream -T b" "rstream -T b" "$@"
		one "tcp-$mode" "rstream -T s" "rstream -T s" "$@"
	done
done
echo
echo "ratios (goverbs / other): bw = Gb/s ratio, lat = usec/xfer ratio"
awk '
{ split($1, p, "-"); mode = p[length(p)]; impl = $1; sub("-" mode "$", "", impl)
  v = (mode == "bw") ? $(NF-1) : $NF; val[impl, mode, $2] = v; sizes[$2] = 1 }
END {
  printf "%-8s %-4s %12s %12s %12s %12s %10s %10s %10s\n", "size", "mode", "goverbs", "rstream", "rstream-b", "tcp", "/rstream", "/rstream-b", "/tcp"
  n = split("64 4096 65536 1048576", order, " ")
  for (i = 1; i <= n; i++) for (m = 1; m <= 2; m++) {
    s = order[i]; mode = (m == 1) ? "lat" : "bw"
    if (!(("goverbs", mode, s) in val)) continue
    g = val["goverbs", mode, s]
    printf "%-8s %-4s %12s %12s %12s %12s", s, mode, g, val["rstream", mode, s], val["rstream-b", mode, s], val["tcp", mode, s]
    split("rstream rstream-b tcp", others, " ")
    for (k = 1; k <= 3; k++) { o = val[others[k], mode, s]; if (o + 0 > 0) printf " %10.2f", g / o; else printf " %10s", "-" }
    printf "\n"
  }
}' "$all"
