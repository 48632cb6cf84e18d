package siw_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/cmloop"
	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// addrSIW0 is siw0's address in the rig (test/rig).
var addrSIW0 = netip.MustParseAddr("10.0.3.15")

type buf struct {
	mem *mmap.Region
	mr  *uverbs.MR
}

func newBuf(t testing.TB, pd *uverbs.PD, size int) *buf {
	t.Helper()
	mem, err := mmap.Anonymous(size)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(mem.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite)
	if err != nil {
		mem.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close(); mem.Close() })
	return &buf{mem, mr}
}

func (b *buf) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: b.mr.Addr() + uint64(off), Length: uint32(n), LKey: b.mr.LKey()}
}

// connect makes a loopback RC connection on siw0 through rdma_cm, its
// QPs created by rdma_cm from cfg.
func connect(t testing.TB, ctx context.Context, cfg rdmacm.Config) (client, server *rdmacm.Conn) {
	t.Helper()
	rigtest.Require(t)
	rigtest.Device(t, "siw0")
	client, server, err := cmloop.Connect(ctx, addrSIW0, &cfg, &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	if client.ID.Device().Driver != uverbs.DriverSIW {
		t.Fatalf("connected on %s, not a siw device", client.ID.Device().Name)
	}
	return client, server
}

func waitN(t *testing.T, ctx context.Context, cq *uverbs.CQ, n int) []uverbs.WorkCompletion {
	t.Helper()
	var out []uverbs.WorkCompletion
	wc := make([]uverbs.WorkCompletion, 16)
	for len(out) < n {
		k, err := cq.Wait(ctx, wc[:min(16, n-len(out))])
		if err != nil {
			t.Fatalf("waiting for %d completions (%d so far: %+v): %v", n, len(out), out, err)
		}
		out = append(out, wc[:k]...)
	}
	return out
}

func expectWC(t *testing.T, w uverbs.WorkCompletion, id uint64, st uverbs.WCStatus, op uverbs.WCOpcode, n uint32) {
	t.Helper()
	if w.ID != id || w.Status != st || w.Opcode != op || (st == uverbs.WCSuccess && w.ByteLen != n && op != uverbs.WCSend && op != uverbs.WCRDMAWrite) {
		t.Errorf("completion %+v; want id %d status %v opcode %v bytes %d", w, id, st, op, n)
	}
}

// TestRigDataPath moves data over a siw0 loopback connection with every
// opcode siw carries, and checks what it refuses.
func TestRigDataPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cfg := rdmacm.Config{Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64},
		CQEntries: 256, InitiatorDepth: 4, ResponderResources: 4}
	client, server := connect(t, ctx, cfg)
	bc, bs := newBuf(t, client.PD(), 1<<16), newBuf(t, server.PD(), 1<<16)
	for i := range bc.mem.Bytes() {
		bc.mem.Bytes()[i] = byte(i * 7)
	}

	// SEND with two SGEs into a receive with two SGEs.
	if _, err := server.QP.PostRecv([]uverbs.RecvWR{{ID: 100, SGL: []uverbs.SGE{bs.sge(0, 1000), bs.sge(4096, 4000)}}}); err != nil {
		t.Fatal(err)
	}
	sys := client.PD().Context().Syscalls()
	if _, err := client.QP.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{bc.sge(0, 1500), bc.sge(2000, 500)}}}); err != nil {
		t.Fatal(err)
	}
	if d := client.PD().Context().Syscalls() - sys; d != 1 {
		t.Errorf("PostSend on an idle queue made %d syscalls, want 1 (the doorbell)", d)
	}
	expectWC(t, waitN(t, ctx, client.CQ, 1)[0], 1, uverbs.WCSuccess, uverbs.WCSend, 2000)
	expectWC(t, waitN(t, ctx, server.CQ, 1)[0], 100, uverbs.WCSuccess, uverbs.WCRecv, 2000)
	want := append(append([]byte(nil), bc.mem.Bytes()[0:1500]...), bc.mem.Bytes()[2000:2500]...)
	got := append(append([]byte(nil), bs.mem.Bytes()[0:1000]...), bs.mem.Bytes()[4096:4096+1000]...)
	if !bytes.Equal(got, want) {
		t.Error("SEND: the received bytes differ from the sent ones")
	}

	// Inline SEND (the source need not be registered).
	msg := []byte("inline, 40 bytes of it, no lkey needed!!")
	src, err := mmap.Anonymous(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	copy(src.Bytes(), msg)
	if _, err := server.QP.PostRecv([]uverbs.RecvWR{{ID: 101, SGL: []uverbs.SGE{bs.sge(8192, 100)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.QP.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: uint64(src.Addr()), Length: uint32(len(msg))}}}}); err != nil {
		t.Fatal(err)
	}
	clear(src.Bytes()) // inline: the bytes were copied at the post
	expectWC(t, waitN(t, ctx, client.CQ, 1)[0], 2, uverbs.WCSuccess, uverbs.WCSend, 0)
	w := waitN(t, ctx, server.CQ, 1)[0]
	expectWC(t, w, 101, uverbs.WCSuccess, uverbs.WCRecv, uint32(len(msg)))
	if !bytes.Equal(bs.mem.Bytes()[8192:8192+len(msg)], msg) {
		t.Errorf("inline SEND: received %q", bs.mem.Bytes()[8192:8192+len(msg)])
	}

	// RDMA WRITE (unsignaled, then a signaled one: one completion) and
	// RDMA READ back.
	remote := func(off int) uint64 { return bs.mr.Addr() + uint64(off) }
	if _, err := client.QP.PostSend([]uverbs.SendWR{
		{ID: 3, Opcode: uverbs.WRRDMAWrite, RemoteAddr: remote(16384), RKey: bs.mr.RKey(), SGL: []uverbs.SGE{bc.sge(100, 3000)}},
		{ID: 4, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: remote(20000), RKey: bs.mr.RKey(), SGL: []uverbs.SGE{bc.sge(5000, 100)}},
	}); err != nil {
		t.Fatal(err)
	}
	expectWC(t, waitN(t, ctx, client.CQ, 1)[0], 4, uverbs.WCSuccess, uverbs.WCRDMAWrite, 0)
	if !bytes.Equal(bs.mem.Bytes()[16384:16384+3000], bc.mem.Bytes()[100:3100]) || !bytes.Equal(bs.mem.Bytes()[20000:20100], bc.mem.Bytes()[5000:5100]) {
		t.Error("RDMA WRITE: the target bytes differ")
	}
	clear(bc.mem.Bytes()[32768:40000])
	if _, err := client.QP.PostSend([]uverbs.SendWR{{ID: 5, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: remote(16384), RKey: bs.mr.RKey(), SGL: []uverbs.SGE{bc.sge(32768, 3000)}}}); err != nil {
		t.Fatal(err)
	}
	expectWC(t, waitN(t, ctx, client.CQ, 1)[0], 5, uverbs.WCSuccess, uverbs.WCRDMARead, 3000)
	if !bytes.Equal(bc.mem.Bytes()[32768:32768+3000], bs.mem.Bytes()[16384:16384+3000]) {
		t.Error("RDMA READ: the bytes read differ")
	}

	// A bad rkey: an iWARP WRITE is unacknowledged (it completes once
	// sent), but a READ needs the peer's response: it completes in error.
	if _, err := client.QP.PostSend([]uverbs.SendWR{{ID: 6, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: remote(0), RKey: bs.mr.RKey() ^ 0xff00, SGL: []uverbs.SGE{bc.sge(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	if w := waitN(t, ctx, client.CQ, 1)[0]; w.ID != 6 || w.Status == uverbs.WCSuccess {
		t.Errorf("READ with a bad rkey: %+v", w)
	} else {
		t.Logf("READ with a bad rkey: status %v", w.Status)
	}
}

// TestRigRefusals: what siw cannot carry is refused before anything is
// posted, with the provider's error; the connection then still works.
func TestRigRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	client, server := connect(t, ctx, rdmacm.Config{})
	bc, bs := newBuf(t, client.PD(), 4096), newBuf(t, server.PD(), 4096)
	for _, c := range []struct {
		wr uverbs.SendWR
		is error
	}{
		{uverbs.SendWR{Opcode: uverbs.WRSendWithImm, Imm: 1}, provider.ErrNotSupported},
		{uverbs.SendWR{Opcode: uverbs.WRRDMAWriteWithImm, RKey: bs.mr.RKey(), RemoteAddr: bs.mr.Addr()}, provider.ErrNotSupported},
		{uverbs.SendWR{Opcode: uverbs.WRAtomicFetchAndAdd, RKey: bs.mr.RKey(), RemoteAddr: bs.mr.Addr(), SGL: []uverbs.SGE{bc.sge(0, 8)}}, provider.ErrNotSupported},
		{uverbs.SendWR{Opcode: uverbs.WRLocalInv, InvalidateRKey: bc.mr.RKey()}, provider.ErrNotSupported},
		{uverbs.SendWR{Opcode: uverbs.WRRDMARead, Flags: uverbs.SendFence, RKey: bs.mr.RKey(), RemoteAddr: bs.mr.Addr(), SGL: []uverbs.SGE{bc.sge(0, 8)}}, unix.EINVAL},
	} {
		n, err := client.QP.PostSend([]uverbs.SendWR{c.wr})
		var we *provider.WRError
		if n != 0 || !errors.As(err, &we) || !errors.Is(err, c.is) {
			t.Errorf("PostSend(%v) = %d, %v; want a WRError wrapping %v", c.wr.Opcode, n, err, c.is)
		}
	}
	if _, err := server.QP.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{bs.sge(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.QP.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{bc.sge(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	expectWC(t, waitN(t, ctx, client.CQ, 1)[0], 2, uverbs.WCSuccess, uverbs.WCSend, 0)
	expectWC(t, waitN(t, ctx, server.CQ, 1)[0], 1, uverbs.WCSuccess, uverbs.WCRecv, 64)
}

// TestRigFlush: receives posted before a disconnect complete with flush
// errors; posts after it are refused.
func TestRigFlush(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	client, server := connect(t, ctx, rdmacm.Config{})
	bs := newBuf(t, server.PD(), 4096)
	for i := range 4 {
		if _, err := server.QP.PostRecv([]uverbs.RecvWR{{ID: uint64(10 + i), SGL: []uverbs.SGE{bs.sge(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Disconnect(); err != nil {
		t.Fatal(err)
	}
	ws := waitN(t, ctx, server.CQ, 4)
	for i, w := range ws {
		expectWC(t, w, uint64(10+i), uverbs.WCWRFlushErr, uverbs.WCRecv, 0)
	}
	// rdmacm moved the server's QP to ERR on the DISCONNECTED event.
	for server.QP.State() != uverbs.QPStateErr {
		select {
		case <-ctx.Done():
			t.Fatal("the server's QP never reached ERR")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := server.QP.PostRecv([]uverbs.RecvWR{{ID: 99}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv in ERR: %v, want EINVAL", err)
	}
	if _, err := server.QP.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostSend in ERR: %v, want EINVAL", err)
	}
}

// TestRigDeviceGone deletes a siw device (`rdma link delete`) under an open
// context with a QP, a CQ and a posted receive. The kernel delivers
// DEVICE_FATAL and either keeps the context working until it is closed (the
// removal waits for it: the fast path goes on working) or disassociates it
// (the removal finishes at once: every command answers EIO, and so must
// the fast path). Which one is what AllocPD finds.
func TestRigDeviceGone(t *testing.T) {
	rigtest.Require(t)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "link", "add", "siwgone0", "type", "dummy")
	t.Cleanup(func() { exec.Command("ip", "link", "del", "siwgone0").Run() })
	run("ip", "link", "set", "siwgone0", "up")
	run("rdma", "link", "add", "siwgone", "type", "siw", "netdev", "siwgone0")
	t.Cleanup(func() { exec.Command("rdma", "link", "delete", "siwgone").Run() })
	var d uverbs.Device
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if d, err = uverbs.DeviceByName("siwgone"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	c, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(8, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBuf(t, pd, 4096)
	if _, err := qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{b.sge(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	fatal := make(chan error, 1)
	go func() {
		ev, err := c.NextAsyncEvent(context.Background())
		if err == nil && ev.Type != uverbs.EventDeviceFatal {
			err = fmt.Errorf("event %v, want DEVICE_FATAL", ev.Type)
		}
		fatal <- err
	}()
	removal := exec.Command("rdma", "link", "delete", "siwgone")
	if err := removal.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- removal.Wait() }()
	select {
	case err := <-fatal:
		if err != nil {
			t.Fatal("NextAsyncEvent after the removal:", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no DEVICE_FATAL 20 s after rdma link delete")
	}
	time.Sleep(100 * time.Millisecond) // uverbs told the provider before the event was read
	wc := make([]uverbs.WorkCompletion, 4)
	pd2, err := c.AllocPD()
	if errors.Is(err, unix.EIO) {
		// Disassociated: the fast path answers EIO too.
		t.Logf("the kernel disassociated the context: AllocPD: %v", err)
		if _, err := qp.PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{b.sge(0, 64)}}}); !errors.Is(err, unix.EIO) {
			t.Errorf("PostRecv on a disassociated context: %v, want EIO", err)
		}
		if _, err := qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}}); !errors.Is(err, unix.EIO) {
			t.Errorf("PostSend on a disassociated context: %v, want EIO", err)
		}
		if n, err := cq.Poll(wc); n != 0 || !errors.Is(err, unix.EIO) {
			t.Errorf("Poll on a disassociated context: %d, %v, want EIO", n, err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal("rdma link delete:", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the context is disassociated but rdma link delete has not finished 20 s later")
		}
	} else {
		if err != nil {
			t.Fatal("the open context stopped working while the removal waits:", err)
		}
		t.Log("the kernel keeps the context working until it is closed")
		pd2.Close()
		if _, err := qp.PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{b.sge(0, 64)}}}); err != nil {
			t.Errorf("PostRecv while the removal waits: %v", err)
		}
		if n, err := cq.Poll(wc); n != 0 || err != nil {
			t.Errorf("Poll while the removal waits: %d, %v; want 0, nil", n, err)
		}
		select {
		case err := <-done:
			t.Fatalf("rdma link delete finished (%v) with the context open and working", err)
		default:
		}
	}
	qp.Close()
	cq.Close()
	b.mr.Close()
	pd.Close()
	if err := c.Close(); err != nil {
		t.Error("Close:", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal("rdma link delete:", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rdma link delete still waiting 30 s after the context closed")
	}
}

// TestRigDialRefused: a loopback dial on siw0 to a port nobody listens on
// fails with an error for which errors.Is(err, unix.ECONNREFUSED) holds,
// the condition on which internal/cmloop dials again (see its Connect).
func TestRigDialRefused(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "siw0")
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrSIW0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().Port()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rdmacm.Dial(ctx, netip.AddrPortFrom(addrSIW0, port), nil)
	if err == nil {
		c.Close()
		t.Fatalf("Dial to closed port %d succeeded", port)
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("Dial to closed port %d: %v; want ECONNREFUSED", port, err)
	}
}
