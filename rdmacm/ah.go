package rdmacm

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/uverbs"
)

// AddressTo builds the address (AH attributes) of peer as seen from the
// ID's device and port, on RoCE: a global route from the GID of the ID's
// local IP address (RoCE v2 preferred) to peer's IPv4-mapped or IPv6 GID.
// A UD server uses it to answer a client whose request carries no route
// (SIDR requests do not), where libibverbs programs call
// ibv_create_ah_from_wc. InfiniBand link layers need a path record
// instead and are not supported.
func (id *ID) AddressTo(peer netip.Addr) (uverbs.AHAttr, error) {
	if id.dev == nil {
		return uverbs.AHAttr{}, opError("AddressTo", errors.New("the ID has no device yet"))
	}
	local, err := id.LocalAddr()
	if err != nil {
		return uverbs.AHAttr{}, err
	}
	gids, err := id.dev.ctx.QueryGIDTable()
	if err != nil {
		return uverbs.AHAttr{}, opError("AddressTo", err)
	}
	want := local.Addr().Unmap().As16()
	best := -1
	for i, g := range gids {
		if g.Port != int(id.port) || g.GID != want {
			continue
		}
		if best < 0 || g.Type == uverbs.GIDTypeRoCEv2 {
			best = i
		}
	}
	if best < 0 {
		return uverbs.AHAttr{}, opError("AddressTo", fmt.Errorf("no GID for %v on %s port %d", local.Addr(), id.dev.dev.Name, id.port))
	}
	return uverbs.AHAttr{PortNum: id.port, GRH: &uverbs.GlobalRoute{
		DGID: peer.Unmap().As16(), SGIDIndex: uint8(gids[best].Index), HopLimit: 64,
	}}, nil
}
