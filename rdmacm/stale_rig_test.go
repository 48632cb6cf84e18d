package rdmacm_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
)

// TestRigClosedIDCommands: a closed ID's commands fail with ErrClosed and
// touch no other ID. The kernel hands a destroyed id to the next ID
// created (the lowest free one), so a command sent with the old id after
// DESTROY_ID acts on the new ID: a Bind after Close bound the next ID, and
// the Disconnect that answers a peer's DREQ, sent from its own goroutine
// after the application's Close, disconnected the next connection the
// moment it was set up (rdmacm's siw first-message test on 5.10).
func TestRigClosedIDCommands(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	old, err := ch.CreateID(rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal("Close:", err)
	}
	next, err := ch.CreateID(rdmacm.PSTCP) // the kernel's id of old, if nothing else took it
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := old.Bind(netip.AddrPortFrom(addrRXE0, 0)); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Bind after Close: %v, want ErrClosed", err)
	}
	if err := old.Disconnect(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Disconnect after Close: %v, want ErrClosed", err)
	}
	if err := next.Bind(netip.AddrPortFrom(addrRXE0, 0)); err != nil {
		t.Errorf("Bind of the next ID: %v (the closed ID's Bind took it)", err)
	}

	// Connections: the first pair is closed (both sides), then a second
	// one made; the first's late Disconnects fail with ErrClosed and leave
	// the second connected.
	ctx := rigCtx(t, time.Minute)
	c1, s1 := pair(t, ctx, netip.Addr{}, addrRXE0, nil)
	c1.Close()
	s1.Close()
	c2, s2 := pair(t, ctx, netip.Addr{}, addrRXE0, nil)
	for _, c := range []*rdmacm.Conn{c1, s1} {
		if err := c.ID.Disconnect(); !errors.Is(err, rdmacm.ErrClosed) {
			t.Errorf("Disconnect of a closed connection: %v, want ErrClosed", err)
		}
	}
	bc, bs := newBuffers(t, c2.PD(), 4096), newBuffers(t, s2.PD(), 4096)
	exchange(t, ctx, c2, s2, bc, bs, "still connected")
	exchange(t, ctx, s2, c2, bs, bc, "both ways")
	for _, c := range []*rdmacm.Conn{c2, s2} {
		if err := c.ID.Err(); err != nil {
			t.Errorf("the second connection: %v", err)
		}
	}
}
