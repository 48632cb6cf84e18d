package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/internal/cmloop"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// connectCM connects A (dialing) and B (accepting), both in RESET, through
// rdma_cm on the IPv4 address of the device's netdev: iWARP QPs reach RTS
// only so. IRD and ORD are 4 each (RDMA READ needs them). It returns the
// connections' closer.
func (w *workload) connectCM(a, b *end) (func(), error) {
	ip, err := netdevIPv4(w.dev)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := rdmacm.Config{ResponderResources: 4, InitiatorDepth: 4}
	dial := cfg
	dial.QP = a.qp
	ca, cb, err := cmloop.Connect(ctx, ip, &cfg, &dial, b.qp)
	if err != nil {
		return nil, err
	}
	return func() { ca.Close(); cb.Close() }, nil
}

// netdevIPv4 is the first IPv4 address of the device's first port's netdev.
func netdevIPv4(d uverbs.Device) (netip.Addr, error) {
	if len(d.Ports) == 0 || d.Ports[0].Netdev == "" {
		return netip.Addr{}, fmt.Errorf("%s has no network device", d.Name)
	}
	ifi, err := net.InterfaceByName(d.Ports[0].Netdev)
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%s (%s) has no IPv4 address", d.Name, ifi.Name)
}
