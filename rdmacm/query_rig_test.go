package rdmacm_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
)

// TestRigQueryPath checks the path record and the AF_IB addresses the
// kernel reports for a resolved route and for both ends of a connection,
// in loopback on rxe0 and across the veth pair, against what the kernel
// says elsewhere: the GIDs are the IPv4-mapped addresses (present in the
// device's GID table), the MTU the port's active MTU, the service IDs the
// TCP port space's with the ports QUERY ADDR reports.
func TestRigQueryPath(t *testing.T) {
	rigtest.Require(t)
	for _, c := range []struct {
		name     string
		cli, srv netip.Addr
	}{
		{"rxe0-loopback", netip.Addr{}, addrRXE0},
		{"rxea-rxeb", addrRXEA, addrRXEB},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := rigCtx(t, 60*time.Second)
			client, server := pair(t, ctx, c.cli, c.srv, nil)
			for i, conn := range []*rdmacm.Conn{client, server} {
				checkPaths(t, ctx, i, conn.ID)
			}
		})
	}
}

// checkPaths checks id's QUERY PATH and QUERY GID answers (which = 0: the
// active side, 1: the passive side).
func checkPaths(t *testing.T, ctx context.Context, which int, id *rdmacm.ID) {
	t.Helper()
	local, err := id.LocalAddr()
	if err != nil {
		t.Fatal(err)
	}
	remote, err := id.RemoteAddr()
	if err != nil {
		t.Fatal(err)
	}
	// RoCE's GID of an IPv4 address is the IPv4-mapped IPv6 address.
	lgid, rgid := local.Addr().As16(), remote.Addr().As16()
	devCtx := id.Context()
	gids, err := devCtx.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range gids {
		found = found || g.Port == id.Port() && g.GID == lgid
	}
	if !found {
		t.Errorf("side %d: no GID %x for %v in %s's table", which, lgid, local, id.Device().Name)
	}
	pa, err := devCtx.QueryPort(id.Port())
	if err != nil {
		t.Fatal(err)
	}

	paths, err := id.QueryPath()
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Fatalf("side %d: %d paths, want 1: %+v", which, len(paths), paths)
	}
	p := paths[0]
	t.Logf("side %d (%v -> %v): %+v", which, local, remote, p)
	if want := uint32(rdmacm.PathGMP | rdmacm.PathPrimary | rdmacm.PathBidirectional); p.Flags != want {
		t.Errorf("side %d: flags %#x, want %#x", which, p.Flags, want)
	}
	// Each side's path is its own view: the passive side's is the
	// request's primary path turned around.
	if p.SGID != lgid || p.DGID != rgid {
		t.Errorf("side %d: SGID %x DGID %x, want %x, %x", which, p.SGID, p.DGID, lgid, rgid)
	}
	if p.PKey != 0xffff {
		t.Errorf("side %d: P_Key %#x, want 0xffff", which, p.PKey)
	}
	if p.MTU != uint8(pa.ActiveMTU) {
		t.Errorf("side %d: MTU %d, want the port's active MTU %d", which, p.MTU, pa.ActiveMTU)
	}

	src, dst, err := id.QueryGID()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("side %d: QUERY GID src %+v dst %+v", which, src, dst)
	const psTCP = 0x0106 // RDMA_PS_TCP
	if src.GID != lgid || dst.GID != rgid {
		t.Errorf("side %d: AF_IB GIDs %x, %x, want %x, %x", which, src.GID, dst.GID, lgid, rgid)
	}
	if src.SID != psTCP<<16|uint64(local.Port()) || dst.SID != psTCP<<16|uint64(remote.Port()) {
		t.Errorf("side %d: service IDs %#x, %#x, want the TCP space's with ports %d, %d", which, src.SID, dst.SID, local.Port(), remote.Port())
	}
	// The AF_IB P_Key is what QUERY ADDR reports, read from the netdev's
	// broadcast address as on IPoIB: on Ethernet (RoCE) its bytes 8-9,
	// beyond a MAC's six, are zero (6.1). Both ends carry the same one.
	if src.PKey != dst.PKey {
		t.Errorf("side %d: AF_IB P_Keys %#x, %#x differ", which, src.PKey, dst.PKey)
	}
}

// TestRigQueryPathBeforeRoute checks that an ID has no path before its
// route is resolved, and one after.
func TestRigQueryPathBeforeRoute(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	id, err := ch.CreateID(rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Close()
	if p, err := id.QueryPath(); err != nil || len(p) != 0 {
		t.Errorf("fresh ID: %d paths, %v; want none", len(p), err)
	}
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(addrRXEB, 7999)); err != nil {
		t.Fatal(err)
	}
	if p, err := id.QueryPath(); err != nil || len(p) != 0 {
		t.Errorf("address resolved: %d paths, %v; want none", len(p), err)
	}
	if err := id.ResolveRoute(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := id.QueryPath()
	if err != nil || len(p) != 1 {
		t.Fatalf("route resolved: %d paths, %v; want 1", len(p), err)
	}
	if p[0].DGID != addrRXEB.As16() {
		t.Errorf("DGID %x, want %x", p[0].DGID, addrRXEB.As16())
	}
}

// TestRigMigrate moves IDs between event channels: a resolving ID (its
// events then come through the new channel, with the old one closed), and
// a connection request before Accept (the connection's events, and its
// disconnect, come through the new channel).
func TestRigMigrate(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	ch1, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch1.Close()
	ch2, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch2.Close()

	// A resolving ID: address on ch0, route on ch2 after ch0 is gone.
	ch0, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	id, err := ch0.CreateID(rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(addrRXE0, 7999)); err != nil {
		t.Fatal(err)
	}
	if err := id.Migrate(ch2); err != nil {
		t.Fatal(err)
	}
	if err := ch0.Close(); err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveRoute(ctx); err != nil {
		t.Fatalf("ResolveRoute after Migrate and the old channel's Close: %v", err)
	}
	if id.Device().Name != "rxe0" || id.Context() == nil {
		t.Errorf("after Migrate: device %q, context %v", id.Device().Name, id.Context())
	}
	if err := id.Close(); err != nil {
		t.Fatal(err)
	}

	// A connection request moved to a channel of its own before Accept.
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXE0, 0), &rdmacm.Config{Channel: ch1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type res struct {
		c   *rdmacm.Conn
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			if err = r.ID.Migrate(ch2); err != nil {
				r.Reject(nil)
			}
		}
		if err != nil {
			done <- res{nil, err}
			return
		}
		c, err := r.Accept(ctx, nil)
		done <- res{c, err}
	}()
	client, err := rdmacm.Dial(ctx, netip.AddrPortFrom(addrRXE0, l.Addr().Port()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	server := r.c
	defer server.Close()
	// The listener and its channel go; the migrated connection stays.
	l.Close()
	if err := client.Disconnect(); err != nil {
		t.Fatal(err)
	}
	ev, err := server.NextEvent(ctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("migrated server side after the client's Disconnect: %v, %v", ev.Type, err)
	}
	// A connection (it has a QP) cannot move.
	if err := server.ID.Migrate(ch1); err == nil {
		t.Error("Migrate of a connection's ID succeeded")
	}
}

// TestRigAFIB binds an ID to an AF_IB wildcard address in the TCP space
// (librdmacm's probe of AF_IB support): the kernel picks a port into the
// service ID, as QUERY GID shows. An AF_IB destination (rxe0's own GID)
// resolves on a RoCE port (RoCE ports have the AF_IB capability).
func TestRigAFIB(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	id, err := ch.CreateID(rdmacm.PSIB)
	if err != nil {
		t.Fatal(err)
	}
	defer id.Close()
	if err := id.BindIB(rdmacm.IBAddr{SID: rdmacm.IBServiceIDTCP, SIDMask: rdmacm.IBServiceIDMask}); err != nil {
		t.Fatalf("AF_IB wildcard bind: %v", err)
	}
	src, _, err := id.QueryGID()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bound: %+v", src)
	if src.SID&rdmacm.IBServiceIDMask != rdmacm.IBServiceIDTCP || src.SID&0xffff == 0 || src.SIDMask != ^uint64(0) || src.GID != [16]byte{} {
		t.Errorf("AF_IB bind: service ID %#x mask %#x GID %x; want the TCP space with a port, mask all ones, no GID", src.SID, src.SIDMask, src.GID)
	}

	id2, err := ch.CreateID(rdmacm.PSIB)
	if err != nil {
		t.Fatal(err)
	}
	defer id2.Close()
	dst := rdmacm.IBAddr{PKey: 0xffff, GID: addrRXE0.As16(), SID: rdmacm.IBServiceIDTCP | 7999, SIDMask: ^uint64(0)}
	if err := id2.ResolveAddrIB(ctx, rdmacm.IBAddr{}, dst); err != nil {
		t.Fatalf("ResolveAddrIB to rxe0's GID: %v", err)
	}
	// The kernel (cma_resolve_ib_dev) takes the first port, in its device
	// order, holding the GID or one of its subnet prefix (the first 8
	// bytes: zero for every IPv4-mapped GID, so any rxe device may win).
	_, got, err := id2.QueryGID()
	if err != nil {
		t.Fatal(err)
	}
	gids, err := id2.Context().QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	prefix := false
	for _, g := range gids {
		prefix = prefix || g.Port == id2.Port() && [8]byte(g.GID[:8]) == [8]byte(dst.GID[:8])
	}
	if !prefix || got.GID != dst.GID || got.PKey != dst.PKey {
		t.Errorf("AF_IB destination resolved on %s port %d (a GID of its subnet prefix: %v) to %+v, want GID %x P_Key %#x",
			id2.Device().Name, id2.Port(), prefix, got, dst.GID, dst.PKey)
	}
	t.Logf("AF_IB destination on RoCE: resolved on %s (%s), destination %+v", id2.Device().Name, rigtest.Kernel(), got)
}
