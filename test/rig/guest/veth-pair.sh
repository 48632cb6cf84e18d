#!/bin/sh
# veth-pair.sh [-d] [A B NET TABLE PREF MAC]: two rxe devices that talk
# over a real wire, rxe${A#v} on A (NET.1) and rxe${B#v} on B (NET.2), ends
# of one veth pair. -d, with the same arguments, removes what a call made,
# as far as it is still there (a test's cleanup). With no arguments (the boot's call, guest/init): rxea on va
# (10.99.0.1) and rxeb on vb (10.99.0.2), routing tables 101 and 102 chosen
# by rules of preference 10 and 11, MACs 02:00:0a:63:00:0{1,2}. rdmacm's
# TestRigDeviceRemoval makes a pair of its own with other arguments.
# rdma_rxe in 6.1 works only in the initial network namespace (its UDP 4791
# socket and route lookups live there), so both ends stay in it, and policy
# routing keeps the kernel from delivering NET.x locally: traffic to the peer
# leaves by the device it was sent from. Without the tables and the static
# neighbours ResolveAddr took 24.5 s on 5.10 (addr.c retries a request it
# could not resolve only at its timeout or on some neighbour update).
# One `ip -batch`: every ip process costs ~50 ms of a TCG guest's boot.
# Fixed MACs make the devices' GUIDs and link-local GIDs the same every boot.
remove=
[ "${1:-}" = -d ] && { remove=1; shift; }
set -e
a=${1:-va} b=${2:-vb} net=${3:-10.99.0} table=${4:-101} pref=${5:-10} mac=02:00:0a:${6:-63}:00
if [ -n "$remove" ]; then
  # Each step alone: a test may have deleted a device already. The routes
  # and neighbours go with the link, the peer end with its pair.
  rdma link delete "rxe${a#v}" 2>/dev/null || true
  rdma link delete "rxe${b#v}" 2>/dev/null || true
  ip link del "$a" 2>/dev/null || true
  ip rule del pref "$pref" 2>/dev/null || true
  ip rule del pref $((pref + 1)) 2>/dev/null || true
  exit 0
fi
# The local table goes after the per-device ones once per boot: the first
# call moves it (rule 0 to 100).
move_local=
if [ $# -eq 0 ]; then
  move_local='rule add pref 100 lookup local
rule del pref 0 lookup local'
fi
ip -batch - <<IP
link add $a address $mac:01 type veth peer name $b address $mac:02
addr add $net.1/24 dev $a
addr add $net.2/24 dev $b
link set $a up
link set $b up
route add $net.0/24 dev $a table $table
route add $net.0/24 dev $b table $((table + 1))
rule add pref $pref oif $a lookup $table
rule add pref $((pref + 1)) oif $b lookup $((table + 1))
$move_local
neigh replace $net.2 lladdr $mac:02 dev $a nud permanent
neigh replace $net.1 lladdr $mac:01 dev $b nud permanent
IP
# A packet from one local address to another arrives on the other end:
# accept it. The static neighbours spare ARP between two addresses of one host.
for i in all "$a" "$b"; do
  sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"
done
printf 'link add rxe%s type rxe netdev %s\nlink add rxe%s type rxe netdev %s\n' "${a#v}" "$a" "${b#v}" "$b" | rdma -b -
