#!/bin/sh
# pair.sh: rstream interop between two guests (test/rig/pair.sh), data
# verified (-T v) at 1 B to 16 MiB: rdma-core's rstream serving on guest A and
# goverbs' dialing from B, goverbs' serving on A and rdma-core's dialing from
# B, and goverbs on both. Run on both guests with goverbs' rstream in PATH as
# grstream:
#   test/rig/pair.sh --bin DIR -- 'sh /rig/bin/rstream-pair.sh' 'sh /rig/bin/rstream-pair.sh'
# (DIR holds grstream and this script as rstream-pair.sh). Guest A serves,
# guest B dials (PAIR_SELF, PAIR_IP, PAIR_PEER come from the rig's
# pair-net.sh). B prints one line per step and a summary; it exits non-zero
# if any step failed.
port=7900
fails=0 steps=0
# rdma-core's rstream by path: a guest booted with --go ./cmd/... has
# goverbs' rstream first in PATH under the same name.
rc=/usr/bin/rstream
for pairing in "$rc grstream" "grstream $rc" "grstream grstream"; do
	set -- $pairing
	srv=$1 cli=$2
	# rdma-core's rstream in its blocking mode, as the interop rig tests run it
	sflags= cflags=
	[ "$srv" = $rc ] && sflags="-T b"
	[ "$cli" = $rc ] && cflags="-T b"
	for sc in 1:100 64:100 4096:100 65536:50 1048576:10 16777216:2; do
		size=${sc%:*} count=${sc#*:}
		port=$((port + 1))
		if [ "$PAIR_SELF" = 1 ]; then
			if timeout 300 $srv -b "$PAIR_IP" -p $port -S $size -C $count $sflags -T v >/tmp/pair-srv.txt 2>&1; then
				echo "pair-rstream: A served $srv size $size"
			else
				echo "pair-rstream: A's $srv server, size $size, failed:"
				cat /tmp/pair-srv.txt
			fi
			continue
		fi
		steps=$((steps + 1))
		i=0
		while :; do
			out=$(timeout 300 $cli -s "$PAIR_PEER" -b "$PAIR_IP" -p $port -S $size -C $count $cflags -T v 2>&1)
			rc=$?
			case "$out" in *rconnect*) i=$((i + 1)); [ $i -lt 150 ] && { sleep 0.2; continue; } ;; esac
			break
		done
		if [ $rc = 0 ]; then
			echo "pair-rstream: $srv (A) <- $cli (B) size $size: ok: $(echo "$out" | tail -1)"
		else
			fails=$((fails + 1))
			echo "pair-rstream: $srv (A) <- $cli (B) size $size: FAIL (exit $rc)"
			echo "$out" | tail -5
		fi
	done
done
[ "$PAIR_SELF" = 1 ] && exit 0
echo "pair-rstream: $((steps - fails)) of $steps steps passed"
[ $fails = 0 ]
