#!/bin/bash
# pair-mckey.sh receive|send PORT GROUP: rdma-core's side of a mckey step of
# pair-cm.sh, rdma-core's mckey on this guest's rxe (PAIR_DEV on PAIR_NET,
# bound to PAIR_IP) against goverbs in the other guest (rdmacm's
# TestRigPairPeer, roles mckey-sender and mckey-receiver). Multicast has no
# reply that tells a sender the receiver is there or what arrived, so the
# two talk over a side channel: the test listens on PAIR_PEER:PORT (TCP on
# the pair network), this script connects (retrying while the test is not
# listening yet, up to PAIR_MCKEY_WAIT s, default 150), one line a message
# (rdmacm/pair_rig_test.go has the protocol):
#   receive  mckey joins GROUP (and GROUP+1, GROUP+2 on a retry) and waits
#            for MCKEY_COUNT (10) datagrams of 100 bytes; once PAIR_NET is an
#            IGMP member of the group and mckey's QP is attached (rxe's
#            33:33 MAC for the group on PAIR_NET; 5 s at most), this says
#            "ready GROUP COUNT SIZE"; goverbs sends them and answers
#            "sent N" (what its rxe put on the wire); mckey exits 0 only
#            once it has received COUNT, then this says "done COUNT", else
#            (PAIR_MCKEY_RECV_WAIT s after "sent", default 20) it kills
#            mckey and tries the next group, three tries, and says "done 0"
#            after the last
#   send     on each "ready GROUP COUNT SIZE", mckey -s sends COUNT datagrams
#            of SIZE bytes; this says "sent N", N what PAIR_DEV's sent_pkts
#            rose by (rxe from 6.4 on drops what mckey, exiting at once
#            without waiting for its unsignaled sends, left queued), and at
#            "done R" checks that R, what goverbs received, is the last N
# Every mckey runs under timeout -s KILL (90 s); one stopped early gets
# SIGTERM (a coreutils timeout passes it on; busybox's execs mckey itself).
# The last line is "pair-mckey: PASS ..." (exit 0) or "pair-mckey: FAIL ..."
# (exit 1).
set -u
role=$1 port=$2 group=$3
count=${MCKEY_COUNT:-10} size=100 tries=3
# (PAIR_HW, PAIR_IGMP, PAIR_DEV_MCAST and PAIR_MCKEY_RECV_WAIT: for the host
# test with fakes, test/rig_pair_test.go)
hw=${PAIR_HW:-/sys/class/infiniband/$PAIR_DEV/ports/1/hw_counters}
igmp=${PAIR_IGMP:-/proc/net/igmp} dev_mcast=${PAIR_DEV_MCAST:-/proc/net/dev_mcast} recv_wait=${PAIR_MCKEY_RECV_WAIT:-20}
say() { echo "pair-mckey: $*"; }
fail() { say "FAIL: $*"; exit 1; }
up() { cut -d. -f1 /proc/uptime; }
# cnt NAME: a port counter of PAIR_DEV, read 50 ms after any other read (the
# core caches hw_counters for 10 ms).
cnt() { sleep 0.05; cat "$hw/$1"; }
tell() { echo "$*" >&3 || fail "side channel: cannot send '$*'"; say "-> $*"; }
# hear S: the next line from the other guest, in $line (waiting at most S s).
hear() { line=; read -r -t "$1" line <&3 || fail "side channel: no line from $PAIR_PEER:$port within $1 s (got '$line')"; say "<- $line"; }
# joined GROUP: PAIR_NET is an IGMP member of GROUP (/proc/net/igmp prints a
# group as a hex host integer of its big-endian value).
joined() {
  local IFS=. hex
  # shellcheck disable=SC2086 # split the address at its dots
  set -- $1
  hex=$(printf '%02X%02X%02X%02X' "$4" "$3" "$2" "$1")
  awk -v dev="$PAIR_NET" -v g="$hex" '/^[0-9]/ {d = $2} /^\t/ && d == dev && $1 == g {f = 1} END {exit !f}' "$igmp"
}
# macs: the link-layer multicast addresses PAIR_NET lets in.
macs() { awk -v dev="$PAIR_NET" '$2 == dev {printf "%s ", $5}' "$dev_mcast"; }
# has MAC: whether PAIR_NET lets MAC in.
has() { case " $(macs)" in *" $1 "*) echo yes ;; *) echo no ;; esac; }
# show: mckey's output, indented.
show() { sed 's/^/  | /' /tmp/mckey.out; }

end=$(( $(up) + ${PAIR_MCKEY_WAIT:-150} ))
until { exec 3<>"/dev/tcp/$PAIR_PEER/$port"; } 2>/dev/null; do
  [ "$(up)" -lt $end ] || fail "no side channel: $PAIR_PEER:$port did not accept for ${PAIR_MCKEY_WAIT:-150} s"
  sleep 0.5
done
say "side channel to $PAIR_PEER:$port"

case $role in
receive)
  for try in $(seq "$tries"); do
    g=${group%.*}.$(( ${group##*.} + try - 1 ))
    say "try $try: mckey -m $g -b $PAIR_IP -C $count -S $size"
    timeout -s KILL 90 mckey -m "$g" -b "$PAIR_IP" -C "$count" -S "$size" > /tmp/mckey.out 2>&1 &
    pid=$!
    # mckey posts its receives and joins: the kernel's CM joins PAIR_NET to
    # the IPv4 group (IGMP, which adds the group's MAC to the NIC's filter)
    # and mckey attaches its QP when it reads the join event.
    end=$(( $(up) + 30 ))
    until joined "$g"; do
      if ! kill -0 $pid 2>/dev/null || [ "$(up)" -ge $end ]; then
        kill -TERM $pid 2>/dev/null; wait $pid; show
        tell "done 0"
        fail "mckey never joined $g (no IGMP membership on $PAIR_NET)"
      fi
      sleep 0.1
    done
    # rxe adds a MAC of its own to the netdev when the first QP attaches to
    # a group (rxe_mcast_add: 33:33 and the MGID's, ::ffff:GROUP's, last 4
    # bytes): the sign that mckey's QP is attached; 5 s at most.
    # shellcheck disable=SC2086 # split the address at its dots
    attach=3333$(IFS=.; printf '%02x' $g)
    for _ in $(seq 50); do
      [ "$(has "$attach")" = no ] || break
      sleep 0.1
    done
    # the IPv4 group's MAC (01:00:5e, low 23 bits), which its frames carry
    # shellcheck disable=SC2086
    ipmac=$(IFS=.; set -- $g; printf '01005e%02x%02x%02x' $(($2 & 127)) "$3" "$4")
    say "$PAIR_NET: IGMP member of $g"
    say "$PAIR_NET filter: $ipmac (IPv4) $(has "$ipmac"), $attach (rxe) $(has "$attach")"
    rcvd0=$(cnt rcvd_pkts)
    tell "ready $g $count $size"
    hear 60
    # mckey exits once it has received all of them
    end=$(( $(up) + recv_wait ))
    while kill -0 $pid 2>/dev/null && [ "$(up)" -lt $end ]; do sleep 0.2; done
    kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    show
    rcvd=$(( $(cnt rcvd_pkts) - rcvd0 ))
    if [ $rc = 0 ] && grep -q 'data transfers complete' /tmp/mckey.out; then
      tell "done $count"
      say "PASS: mckey received the $count datagrams goverbs sent ('$line'); $PAIR_DEV received $rcvd packets"
      exit 0
    fi
    say "try $try on $g: mckey exit $rc without all $count datagrams ('$line'); $PAIR_DEV received $rcvd packets"
  done
  tell "done 0"
  fail "mckey never received all $count datagrams goverbs sent in $tries tries"
  ;;
send)
  last=-1 bad=
  while :; do
    hear 150
    # shellcheck disable=SC2086 # the line's words
    set -- $line
    case "$1 $#" in
    "ready 4")
      sent0=$(cnt sent_pkts)
      say "mckey -m $2 -b $PAIR_IP -s -C $3 -S $4"
      timeout -s KILL 90 mckey -m "$2" -b "$PAIR_IP" -s -C "$3" -S "$4" > /tmp/mckey.out 2>&1
      rc=$?
      show
      sleep 1 # anything still in rxe's work queue
      last=$(( $(cnt sent_pkts) - sent0 ))
      say "mckey posted $3 sends; $PAIR_DEV transmitted $last"
      if [ $rc != 0 ] || ! grep -q 'data transfers complete' /tmp/mckey.out; then bad="mckey -s exit $rc, $bad"; fi
      if [ $last -gt "$3" ]; then bad="$PAIR_DEV transmitted $last packets for $3 sends, $bad"; fi
      tell "sent $last"
      ;;
    "done 2")
      [ -z "$bad" ] || fail "$bad"
      if [ "$2" != "$last" ] || [ "$last" -le 0 ]; then fail "goverbs received $2 of the $last datagrams $PAIR_DEV transmitted"; fi
      say "PASS: goverbs received all $last datagrams mckey's $PAIR_DEV transmitted"
      exit 0
      ;;
    *) fail "side channel: '$line', want 'ready GROUP COUNT SIZE' or 'done R'" ;;
    esac
  done
  ;;
*) fail "role '$role': receive or send" ;;
esac
