package main

import (
	"fmt"

	"github.com/goverbs/goverbs/uverbs"
)

// printExtra is -x: a "goverbs:" block after a device's ibv_devinfo
// output with what ibv_devinfo does not show, in its layout (a label, tabs,
// a value), then a blank line:
//
//	goverbs:
//		driver:			rxe (14)
//		uverbs_dev:		/dev/infiniband/uverbs0
//		abi:			core 6, driver 2
//		node_type:		InfiniBand channel adapter (1)
//		node_desc:		rxe
//		discovery:		netlink
//		port 1 netdev:		eth0 (ifindex 2)
//		GID[  1] port 1:	::ffff:10.0.2.15, RoCE v2, eth0 (ifindex 2)
//		transport:		Open ioctl
//		transport:		QueryDevice ioctl
func (p *prog) printExtra(dev uverbs.Device, ctx *uverbs.Context, gids []uverbs.GIDEntry) {
	w := p.out
	printf(w, "\tgoverbs:\n")
	printf(w, "\t\tdriver:\t\t\t%s (%d)\n", dev.Driver, dev.Driver)
	printf(w, "\t\tuverbs_dev:\t\t%s\n", dev.CharDev)
	printf(w, "\t\tabi:\t\t\tcore %d, driver %d\n", dev.CoreABI, dev.DriverABI)
	printf(w, "\t\tnode_type:\t\t%s (%d)\n", dev.NodeType, dev.NodeType)
	printf(w, "\t\tnode_desc:\t\t%s\n", dev.NodeDesc)
	printf(w, "\t\tdiscovery:\t\t%s\n", dev.Source)
	for _, port := range dev.Ports {
		printf(w, "\t\tport %d netdev:\t\t%s\n", port.Number, netdevText(port.Netdev, port.NetdevIndex))
	}
	for _, e := range gids {
		printf(w, "\t\tGID[%3d] port %d:\t%s, %s, %s\n", e.Index, e.Port,
			gidText(e, uverbs.LinkLayerUnspecified), e.Type, netdevText(e.Netdev, e.NetdevIndex))
	}
	tr := ctx.Transports()
	for _, verb := range sortedVerbs(tr) {
		printf(w, "\t\ttransport:\t\t%s %s\n", verb, transportName(tr[verb]))
	}
	printf(w, "\n")
}

func netdevText(name string, index int) string {
	switch {
	case name == "" && index == 0:
		return "none"
	case name == "":
		return fmt.Sprintf("ifindex %d", index)
	}
	return fmt.Sprintf("%s (ifindex %d)", name, index)
}
