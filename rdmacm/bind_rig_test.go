package rdmacm_test

import (
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
)

// TestRigBindOpensDevice: a Bind to one device's address opens that
// device (Context, PD and Device set, as librdmacm's rdma_bind_addr sets
// id->verbs), so does a listener on it; an unspecified address binds to
// no device and opens none.
func TestRigBindOpensDevice(t *testing.T) {
	rigtest.Require(t)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, c := range []struct {
		addr netip.Addr
		dev  string // "": none
	}{
		{addrRXE0, "rxe0"},
		{addrRXEA, "rxea"},
		{addrSIW0, "siw0"},
		{netip.IPv4Unspecified(), ""},
		{netip.IPv6Unspecified(), ""},
	} {
		id, err := ch.CreateID(rdmacm.PSTCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := id.Bind(netip.AddrPortFrom(c.addr, 0)); err != nil {
			t.Fatalf("Bind %v: %v", c.addr, err)
		}
		name, opened := id.Device().Name, id.Context() != nil && id.PD() != nil
		if name != c.dev || opened != (c.dev != "") {
			t.Errorf("Bind %v: device %q, context and PD set %v; want %q, %v", c.addr, name, opened, c.dev, c.dev != "")
		}
		if err := id.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		addr netip.Addr
		dev  string
	}{{addrRXE0, "rxe0"}, {addrSIW0, "siw0"}, {netip.IPv4Unspecified(), ""}} {
		l, err := rdmacm.Listen(netip.AddrPortFrom(c.addr, 0), &rdmacm.Config{Channel: ch, SharedCompChannel: true})
		if err != nil {
			t.Fatalf("Listen %v: %v", c.addr, err)
		}
		if name := l.ID.Device().Name; name != c.dev || (l.ID.Context() != nil) != (c.dev != "") {
			t.Errorf("Listen %v: device %q, context %v; want %q", c.addr, name, l.ID.Context(), c.dev)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
