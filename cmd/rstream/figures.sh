#!/bin/sh
# figures.sh: throughput and round-trip latency of goverbs' rstream, rdma-core's
# rstream (default: nonblocking, spinning; and -T b: blocking) and rdma-core's
# rstream -T s (TCP sockets) over one netdev, at 64 B, 4 KiB, 64 KiB and 1 MiB,
# in one boot. Run inside the rig with goverbs' rstream in PATH as grstream:
#   test/rig/run.sh --kernel 6.1 --bin DIR -- 'sh /tmp/figures.sh 10.0.2.15'
# (DIR holds grstream and this script). Each line is the client's result line
# (rstream's format), prefixed by the pair.
addr=${1:-10.0.2.15}
port=7800
one() { # label server-cmd client-cmd args...
	label=$1 srv=$2 cli=$3
	shift 3
	port=$((port + 1))
	$srv -b "$addr" -p $port "$@" >/tmp/fig-srv.txt 2>&1 &
	spid=$!
	i=0
	while :; do
		out=$($cli -s "$addr" -p $port "$@" 2>&1)
		case "$out" in *rconnect*) i=$((i + 1)); [ $i -lt 50 ] && { sleep 0.2; continue; } ;; esac
		break
	done
	wait $spid
	printf '%-16s %s\n' "$label" "$(echo "$out" | tail -1)"
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
