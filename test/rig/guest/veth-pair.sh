#!/bin/sh
# Two rxe devices that talk over a real wire: rxea on va (10.99.0.1) and rxeb
# on vb (10.99.0.2), ends of one veth pair. rdma_rxe in 6.1 works only in the
# initial network namespace (its UDP 4791 socket and route lookups live there),
# so both ends stay in it, and policy routing keeps the kernel from delivering
# 10.99.0.x locally: traffic to the peer leaves by the device it was sent from.
set -e
ip link add va type veth peer name vb
ip addr add 10.99.0.1/24 dev va
ip addr add 10.99.0.2/24 dev vb
ip link set va up
ip link set vb up
# table 101 routes out of va, 102 out of vb; the local table moves below them
ip route add 10.99.0.0/24 dev va table 101
ip route add 10.99.0.0/24 dev vb table 102
ip rule add pref 10 oif va lookup 101
ip rule add pref 11 oif vb lookup 102
ip rule add pref 100 lookup local
ip rule del pref 0 lookup local
# a packet from one local address to another arrives on the other end: accept it
for i in all va vb; do
  sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"
done
# static neighbours: no ARP needed between two addresses of this one host
ip neigh replace 10.99.0.2 lladdr "$(cat /sys/class/net/vb/address)" dev va nud permanent
ip neigh replace 10.99.0.1 lladdr "$(cat /sys/class/net/va/address)" dev vb nud permanent
rdma link add rxea type rxe netdev va
rdma link add rxeb type rxe netdev vb
