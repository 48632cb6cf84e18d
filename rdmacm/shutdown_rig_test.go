package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// TestRigShutdown: Conn.Shutdown returns only once the CM has reported the
// connection down (the peer's DREP, on iWARP the peer's close), so when it
// returns nil the DISCONNECTED event was there before the ID was destroyed
// (Close destroys it at once, without waiting). The peer, which called
// nothing, sees DISCONNECTED with its QP in ERR; a second Shutdown, and
// Close, are no-ops. Both roles: the client shuts down on rxe0 and siw0,
// the server across the veth pair.
func TestRigShutdown(t *testing.T) {
	rigtest.Require(t)
	for _, c := range []struct {
		name         string
		dev          string
		cli, srv     netip.Addr
		serverCloses bool
	}{
		{"rxe0-client", "rxe0", netip.Addr{}, addrRXE0, false},
		{"veth-server", "rxeb", addrRXEA, addrRXEB, true},
		{"siw0-client", "siw0", netip.Addr{}, addrSIW0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rigtest.Device(t, c.dev)
			ctx := rigCtx(t, 60*time.Second)
			client, server := pair(t, ctx, c.cli, c.srv, nil)
			bc := newBuffers(t, client.PD(), 8192)
			bs := newBuffers(t, server.PD(), 8192)
			exchange(t, ctx, client, server, bc, bs, "before the shutdown")
			closer, peer, closerBuf := client, server, bc
			if c.serverCloses {
				closer, peer, closerBuf = server, client, bs
			}
			// The closer's MR goes first: Close deallocates the channel's PD
			// with the device's last connection, which an MR would keep busy.
			if err := closerBuf.mr.Close(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := closer.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			t.Logf("Shutdown took %v", time.Since(start))
			select {
			case <-closer.Done():
			default:
				t.Fatal("Shutdown returned before the CM reported the connection down")
			}
			if err := closer.ID.Err(); !errors.Is(err, rdmacm.ErrDisconnected) {
				t.Errorf("closer's Err() = %v, want ErrDisconnected", err)
			}
			ev, err := peer.NextEvent(ctx)
			if err != nil || ev.Type != rdmacm.EventDisconnected {
				t.Fatalf("peer: %v, %v; want DISCONNECTED", ev.Type, err)
			}
			if s := peer.QP.State(); s != uverbs.QPStateErr {
				t.Errorf("peer's QP in %v, want ERR", s)
			}
			if err := closer.Shutdown(ctx); err != nil {
				t.Errorf("second Shutdown: %v", err)
			}
			if err := closer.Close(); err != nil {
				t.Errorf("Close after Shutdown: %v", err)
			}
			if _, _, err := closer.QP.Query(uverbs.QPAttrState); !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("closer's QP after Shutdown: Query = %v, want ErrClosed", err)
			}
		})
	}
}

// TestRigShutdownDeadline: a ctx that has ended makes Shutdown give up
// waiting at once, say so, and still close everything; a connection whose
// peer disconnected first needs no wait.
func TestRigShutdownDeadline(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	client, server := pair(t, ctx, netip.Addr{}, addrRXE0, nil)
	done, cancel := context.WithCancel(ctx)
	cancel()
	err := client.Shutdown(done)
	var oe *rdmacm.OpError
	switch {
	case err == nil && client.ID.Err() != nil:
		// The DREP won the race with the select: nothing was left to wait for.
		t.Log("the disconnect completed before Shutdown looked at ctx")
	case !errors.Is(err, context.Canceled) || !errors.As(err, &oe) || oe.Op != "Shutdown":
		t.Errorf("Shutdown with a cancelled ctx: %v, want an OpError Shutdown wrapping context.Canceled", err)
	}
	if _, _, err := client.QP.Query(uverbs.QPAttrState); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("client's QP after Shutdown: Query = %v, want ErrClosed", err)
	}
	// The server hears the DREQ (sent before Shutdown gave up) and is down.
	select {
	case <-server.Done():
	case <-ctx.Done():
		t.Fatal("server never saw the disconnect")
	}
	start := time.Now()
	if err := server.Shutdown(done); err != nil {
		t.Errorf("Shutdown of a connection already down, with a cancelled ctx: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown of a connection already down took %v", d)
	}
}
