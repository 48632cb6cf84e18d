package rdmacm_test

import (
	"errors"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

func sh(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// TestRigDeviceRemoval deletes an rxe device (`rdma link delete`) under
// live connections: DEVICE_REMOVAL reaches each connection on it, their
// blocked calls return, and closing them lets the delete finish.
func TestRigDeviceRemoval(t *testing.T) {
	rigtest.Require(t)
	began := time.Now()
	// A veth pair of its own, rxermva on rmva and rxermvb on rmvb, made
	// and routed as the rig's va/vb pair is (/rig/veth-pair.sh: per-device
	// tables 103 and 104, rules 12 and 13, permanent neighbours; without
	// them the first Dial took 25-42 s on 5.10).
	pair := []string{"rmva", "rmvb", "10.98.0", "103", "12", "62"}
	t.Cleanup(func() {
		// What the script made, as far as it got and the test left it.
		exec.Command("sh", append([]string{"/rig/veth-pair.sh", "-d"}, pair...)...).Run()
	})
	sh(t, append([]string{"sh", "/rig/veth-pair.sh"}, pair...)...)
	ctx := rigCtx(t, 120*time.Second)
	srv, cli := netip.MustParseAddr("10.98.0.2"), netip.MustParseAddr("10.98.0.1")
	const n = 4
	l, err := rdmacm.Listen(netip.AddrPortFrom(srv, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	servers := make(chan *rdmacm.Conn, n)
	go func() {
		for i := 0; i < n; i++ {
			r, err := l.Accept(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			c, err := r.Accept(ctx, nil)
			if err != nil {
				t.Error(err)
				return
			}
			servers <- c
		}
	}()
	var clients []*rdmacm.Conn
	for i := 0; i < n; i++ {
		c, err := rdmacm.Dial(ctx, netip.AddrPortFrom(srv, l.Addr().Port()), &rdmacm.Config{Source: netip.AddrPortFrom(cli, 0)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var conns []*rdmacm.Conn
	for i := 0; i < n; i++ {
		select {
		case c := <-servers:
			conns = append(conns, c)
		case <-ctx.Done():
			t.Fatal("accepts did not finish")
		}
	}
	t.Logf("%d connections up %v after the test began", n, time.Since(began).Round(time.Millisecond))
	if d := conns[0].ID.Device().Name; d != "rxermvb" {
		t.Fatalf("server connection on %s", d)
	}
	// A call blocked on a connection returns when the device goes.
	blocked := make(chan error, 1)
	go func() {
		_, err := conns[0].CQ.Wait(ctx, make([]uverbs.WorkCompletion, 1))
		blocked <- err
	}()
	del := exec.Command("rdma", "link", "delete", "rxermvb")
	removed := time.Now()
	if err := del.Start(); err != nil {
		t.Fatal(err)
	}
	delDone := make(chan error, 1)
	go func() { delDone <- del.Wait() }()
	for i, c := range conns {
		ev, err := c.NextEvent(ctx)
		if err != nil || ev.Type != rdmacm.EventDeviceRemoval {
			t.Fatalf("connection %d: %v, %v; want DEVICE_REMOVAL", i, ev.Type, err)
		}
		if !errors.Is(c.ID.Err(), rdmacm.ErrDeviceRemoved) {
			t.Errorf("connection %d: Err %v", i, c.ID.Err())
		}
	}
	// DEVICE_REMOVAL woke the blocked CQ.Wait (rdmacm tells the uverbs
	// context; the kernel deletes the uverbs node only after the CM IDs go).
	select {
	case err := <-blocked:
		if !errors.Is(err, unix.ENODEV) {
			t.Errorf("CQ.Wait blocked during the removal returned %v, want ENODEV", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("CQ.Wait blocked during the removal did not return on DEVICE_REMOVAL")
	}
	for i, c := range conns {
		if s := c.QP.State(); s != uverbs.QPStateErr {
			// QP.State is the last successful Modify's: a kernel that
			// disassociated the context first (rxe on 7.3, at a moment of
			// its choosing) refused rdmacm's move to ERR with EIO, and the
			// QP is gone with the context. Any other reason is a failure.
			if _, _, qerr := c.QP.Query(uverbs.QPAttrState); errors.Is(qerr, unix.EIO) {
				t.Logf("connection %d: QP.State() = %v: its context was disassociated before the move to ERR (QP.Query: %v)", i, s, qerr)
				continue
			}
			t.Errorf("connection %d: QP.State() = %v after DEVICE_REMOVAL, want ERR", i, s)
		}
	}
	// Whether the removal waits for the connections is the kernel's: a
	// driver with disassociate_ucontext (rxe on 7.3) is removed at once
	// and the core answers EIO to the contexts' commands (uverbs
	// TestDeviceGoneRig); without it (rxe up to 6.12) the removal waits
	// for every context to close, and commands keep working meanwhile.
	select {
	case err := <-delDone:
		if _, _, qerr := conns[0].QP.Query(uverbs.QPAttrState); !errors.Is(qerr, unix.EIO) {
			t.Fatalf("rdma link delete finished (%v) with connections open whose contexts still work (QP.Query: %v)", err, qerr)
		} else {
			t.Logf("the kernel disassociated the connections' contexts (QP.Query: %v): the removal did not wait for them", qerr)
		}
		delDone <- err
	case <-time.After(500 * time.Millisecond):
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Logf("Close after removal: %v", err)
		}
	}
	select {
	case err := <-delDone:
		if err != nil {
			t.Fatalf("rdma link delete: %v", err)
		}
		t.Logf("rdma link delete returned %v after it began", time.Since(removed).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("rdma link delete still waiting 30s after the connections closed")
	}
	for i, c := range clients {
		select {
		case <-c.Done():
			t.Logf("client %d: DISCONNECTED %v after the removal began", i, time.Since(removed).Round(time.Millisecond))
		case <-time.After(30 * time.Second):
			t.Errorf("client %d: no DISCONNECTED after the server's device went", i)
		}
	}
}
