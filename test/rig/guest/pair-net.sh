#!/bin/sh
# Sourced in each guest of a two-machine run (pair.sh) before its command:
# the NIC on the QEMU socket network between the two guests (found by the MAC
# pair.sh gave it, 52:54:00:77:00:0N), address 10.77.0.N/24, and its own rxe
# device rxe1 on it (GID index 1 = RoCEv2 IPv4 10.77.0.N). Exports
#   PAIR_SELF  1 (guest A, the socket's listening side) or 2 (guest B)
#   PAIR_IP    this guest's address, PAIR_PEER the other guest's
#   PAIR_NET   the netdev, PAIR_DEV the RDMA device (rxe1)
# and returns non-zero (with a message) if the link or the GID is not there.
PAIR_SELF=${PAIR_SELF:?pair-net.sh: PAIR_SELF unset}
PAIR_IP=10.77.0.$PAIR_SELF PAIR_PEER=10.77.0.$((3 - PAIR_SELF)) PAIR_DEV=rxe1 PAIR_NET=
for n in /sys/class/net/*; do
  [ "$(cat "$n/address")" = "52:54:00:77:00:0$PAIR_SELF" ] && PAIR_NET=$(basename "$n")
done
export PAIR_SELF PAIR_IP PAIR_PEER PAIR_DEV PAIR_NET
if [ -z "$PAIR_NET" ]; then echo "pair-net: no NIC with MAC 52:54:00:77:00:0$PAIR_SELF"; return 1; fi
if ! { ip link set "$PAIR_NET" up && ip addr add "$PAIR_IP/24" dev "$PAIR_NET" &&
       rdma link add "$PAIR_DEV" type rxe netdev "$PAIR_NET"; }; then
  echo "pair-net: setting up $PAIR_NET/$PAIR_DEV failed"; return 1
fi
pair_gid=/sys/class/infiniband/$PAIR_DEV/ports/1/gids/1
pair_end=$(( $(cut -d. -f1 /proc/uptime) + 20 ))
until grep -q '0a4d' "$pair_gid" 2>/dev/null; do   # ::ffff:10.77.0.N
  if [ "$(cut -d. -f1 /proc/uptime)" -ge $pair_end ]; then echo "pair-net: $PAIR_DEV has no GID 1 after 20 s"; return 1; fi
  sleep 0.1
done
echo "[rig $(cut -d' ' -f1 /proc/uptime)s] pair: $PAIR_DEV on $PAIR_NET $PAIR_IP (GID 1 $(cat "$pair_gid")), peer $PAIR_PEER"
