#!/bin/sh
# Two rxe devices that talk over a real wire: rxea on va (10.99.0.1) and rxeb
# on vb (10.99.0.2), ends of one veth pair. rdma_rxe in 6.1 works only in the
# initial network namespace (its UDP 4791 socket and route lookups live there),
# so both ends stay in it, and policy routing keeps the kernel from delivering
# 10.99.0.x locally: traffic to the peer leaves by the device it was sent from.
# One `ip -batch`: every ip process costs ~50 ms of a TCG guest's boot.
# Fixed MACs make the devices' GUIDs and link-local GIDs the same every boot.
set -e
ip -batch - <<'IP'
link add va address 02:00:0a:63:00:01 type veth peer name vb address 02:00:0a:63:00:02
addr add 10.99.0.1/24 dev va
addr add 10.99.0.2/24 dev vb
link set va up
link set vb up
route add 10.99.0.0/24 dev va table 101
route add 10.99.0.0/24 dev vb table 102
rule add pref 10 oif va lookup 101
rule add pref 11 oif vb lookup 102
rule add pref 100 lookup local
rule del pref 0 lookup local
neigh replace 10.99.0.2 lladdr 02:00:0a:63:00:02 dev va nud permanent
neigh replace 10.99.0.1 lladdr 02:00:0a:63:00:01 dev vb nud permanent
IP
# table 101 routes out of va, 102 out of vb; the local table now comes after
# them. A packet from one local address to another arrives on the other end:
# accept it. The static neighbours spare ARP between two addresses of one host.
for i in all va vb; do
  sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"
done
printf 'link add rxea type rxe netdev va\nlink add rxeb type rxe netdev vb\n' | rdma -b -
