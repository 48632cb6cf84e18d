package mlx5_test

import (
	"testing"

	"github.com/goverbs/goverbs/test/conformance"
	"github.com/goverbs/goverbs/uverbs"
)

// TestConnectX runs the conformance suite on a real ConnectX adapter: the
// first device whose kernel driver is mlx5 (RDMA_DRIVER_MLX5, found by
// driver id, not by name). Where there is none (the rig has none: it runs
// rxe and siw), the test is skipped and says so.
func TestConnectX(t *testing.T) {
	devs, err := uverbs.Devices()
	if err != nil {
		t.Skipf("did not run: no RDMA device discovery on this machine (%v), so no ConnectX to test", err)
	}
	var dev *uverbs.Device
	for i := range devs {
		if devs[i].Driver == uverbs.DriverMLX5 {
			dev = &devs[i]
			break
		}
	}
	if dev == nil {
		t.Skipf("did not run: no ConnectX here (none of the %d RDMA devices has driver id RDMA_DRIVER_MLX5); the mlx5 provider was tested on the device model only", len(devs))
	}
	ctx, err := uverbs.Open(*dev)
	if err != nil {
		t.Fatalf("Open(%s): %v", dev.Name, err)
	}
	gids, err := ctx.QueryGIDTable()
	ctx.Close()
	if err != nil {
		t.Fatalf("QueryGIDTable(%s): %v", dev.Name, err)
	}
	// Prefer a RoCEv2 GID (Ethernet ports), else the port's IB GID 0.
	var pick *uverbs.GIDEntry
	for i := range gids {
		g := &gids[i]
		if g.Port != 1 {
			continue
		}
		if g.Type == uverbs.GIDTypeRoCEv2 && (pick == nil || pick.Type != uverbs.GIDTypeRoCEv2) || pick == nil {
			pick = g
		}
	}
	if pick == nil {
		t.Fatalf("%s port 1 has no GID", dev.Name)
	}
	t.Logf("ConnectX %s, GID index %d (%v)", dev.Name, pick.Index, pick.Type)
	gid := pick.GID
	conformance.Run(t, *dev, conformance.Options{GIDIndex: uint8(pick.Index), GID: &gid, DoorbellsPerPostSend: 0})
}
