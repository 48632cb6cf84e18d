package rdmacm_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"golang.org/x/sys/unix"
)

// TestRigECE: the enhanced connection establishment option each side
// offers (Config.ECE) reaches the other through the kernel's CM: on
// RoCE (rxe0 and the veth pair: the IB CM carries the vendor ID in the
// REQ's and REP's 24-bit field and the attribute modifier in the MAD
// header, cm.c), the server reads the client's in the request's event
// and Conn.PeerECE, the client the server's in Conn.PeerECE (the
// CONNECT_RESPONSE event); on iWARP (siw0) the CM carries none and both
// read zero. The connection works either way (a message each way).
func TestRigECE(t *testing.T) {
	rigtest.Require(t)
	cliECE := rdmacm.ECE{VendorID: 0xabcdef, AttrMod: 0x12345678}
	srvECE := rdmacm.ECE{VendorID: 0x0002c9, AttrMod: 0xa5a50002}
	for _, c := range []struct {
		name     string
		cli, srv netip.Addr
		carried  bool
	}{
		{"rxe0-loopback", netip.Addr{}, addrRXE0, true},
		{"rxea-rxeb", addrRXEA, addrRXEB, true},
		{"siw0", netip.Addr{}, addrSIW0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := rigCtx(t, 60*time.Second)
			l, err := rdmacm.Listen(netip.AddrPortFrom(c.srv, 0), &rdmacm.Config{ECE: srvECE})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			type res struct {
				c   *rdmacm.Conn
				req rdmacm.ECE
				err error
			}
			done := make(chan res, 1)
			go func() {
				r, err := l.Accept(ctx)
				if err != nil {
					done <- res{err: err}
					return
				}
				got := r.Event.ECE
				conn, err := r.Accept(ctx, nil)
				done <- res{conn, got, err}
			}()
			cfg := &rdmacm.Config{ECE: cliECE}
			if c.cli.IsValid() {
				cfg.Source = netip.AddrPortFrom(c.cli, 0)
			}
			client, err := rdmacm.Dial(ctx, netip.AddrPortFrom(c.srv, l.Addr().Port()), cfg)
			if err != nil {
				t.Fatal("Dial:", err)
			}
			defer client.Close()
			r := <-done
			if r.err != nil {
				t.Fatal("Accept:", r.err)
			}
			server := r.c
			defer server.Close()
			wantCli, wantSrv := cliECE, srvECE
			if !c.carried {
				wantCli, wantSrv = rdmacm.ECE{}, rdmacm.ECE{}
			}
			if r.req != wantCli || server.PeerECE != wantCli {
				t.Errorf("the server read the client's ECE as %+v (request event), %+v (PeerECE); want %+v", r.req, server.PeerECE, wantCli)
			}
			if client.PeerECE != wantSrv {
				t.Errorf("the client read the server's ECE as %+v, want %+v", client.PeerECE, wantSrv)
			}
			t.Logf("%s: the server read vendor %#x attr_mod %#x, the client vendor %#x attr_mod %#x", c.name, server.PeerECE.VendorID, server.PeerECE.AttrMod, client.PeerECE.VendorID, client.PeerECE.AttrMod)
			bc := newBuffers(t, client.PD(), 4096)
			bs := newBuffers(t, server.PD(), 4096)
			exchange(t, ctx, client, server, bc, bs, "ece ping")
			exchange(t, ctx, server, client, bs, bc, "ece pong")
		})
	}
}

// TestRigRejectECE: RejectECE refuses a request with the IB CM's reason
// IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED (35), which the kernel's
// ucma_reject accepts besides the consumer's 28, and the client's Dial
// fails with a REJECTED event of that reason and the private data. A
// vendor ID that does not fit the CM's 24 bits is refused before the
// connect request.
func TestRigRejectECE(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXE0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	seen := make(chan rdmacm.ECE, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err == nil {
			seen <- r.Event.ECE
			r.RejectECE([]byte("not that option"))
		}
	}()
	offer := rdmacm.ECE{VendorID: 0x123456, AttrMod: 7}
	_, err = rdmacm.Dial(ctx, netip.AddrPortFrom(addrRXE0, l.Addr().Port()), &rdmacm.Config{ECE: offer})
	ev, ok := rdmacm.Rejected(err)
	if !ok {
		t.Fatalf("Dial: %v, want a rejection", err)
	}
	if ev.Reason() != rdmacm.RejectReasonVendorOptionNotSupported || !bytes.HasPrefix(ev.PrivateData, []byte("not that option")) {
		t.Errorf("rejected with reason %d, private data %q; want %d", ev.Reason(), ev.PrivateData, rdmacm.RejectReasonVendorOptionNotSupported)
	}
	if e := <-seen; e != offer {
		t.Errorf("the server read the offer as %+v, want %+v", e, offer)
	}
	t.Logf("%v", err)

	_, err = rdmacm.Dial(ctx, netip.AddrPortFrom(addrRXE0, l.Addr().Port()), &rdmacm.Config{ECE: rdmacm.ECE{VendorID: 1 << 24}})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("Dial with a 25-bit ECE vendor ID: %v, want EINVAL", err)
	} else {
		t.Logf("%v", err)
	}
}
