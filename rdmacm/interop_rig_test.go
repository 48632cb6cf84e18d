package rdmacm_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// tool starts an rdma-core program and returns a function that waits for
// it and checks its exit status and output.
func tool(t *testing.T, ctx context.Context, name string, args ...string) func() string {
	t.Helper()
	wait := startTool(t, ctx, name, args...)
	return func() string {
		out, err := wait()
		if err != nil {
			t.Errorf("%s %v: %v\n%s", name, args, err, out)
		}
		return out
	}
}

// startTool is tool for callers that judge the tool's exit themselves:
// wait returns its output and its exit error.
func startTool(t *testing.T, ctx context.Context, name string, args ...string) func() (string, error) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if rigtest.InRig() {
			t.Fatalf("no %s in PATH", name)
		}
		t.Skipf("no %s", name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	wait := func() (string, error) {
		once.Do(func() { werr = cmd.Wait() })
		return out.String(), werr
	}
	t.Cleanup(func() { cmd.Process.Kill(); once.Do(func() { werr = cmd.Wait() }) })
	return wait
}

// dialRetry dials until the peer tool listens (a REJECTED with reason 8,
// invalid service ID, means nobody listens yet).
func dialRetry(t *testing.T, ctx context.Context, dst netip.AddrPort, cfg *rdmacm.Config) *rdmacm.Conn {
	t.Helper()
	for {
		c, err := rdmacm.Dial(ctx, dst, cfg)
		if err == nil {
			return c
		}
		if ev, ok := rdmacm.Rejected(err); !ok || ev.Reason() != 8 || ctx.Err() != nil {
			t.Fatalf("Dial %v: %v", dst, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postRecvs posts n receives of size bytes each from b, slot i at i*size.
func postRecvs(c *rdmacm.Conn, b *buffers, n, size int) error {
	for i := 0; i < n; i++ {
		if _, err := c.QP.PostRecv([]uverbs.RecvWR{{ID: uint64(i), SGL: b.sge(i*size, size)}}); err != nil {
			return err
		}
	}
	return nil
}

// waitSent waits for n send completions on c's CQ: successful, or flushed
// once the peer has disconnected (c.Done closed).
func waitSent(ctx context.Context, c *rdmacm.Conn, n int) error {
	wc := make([]uverbs.WorkCompletion, 8)
	for got := 0; got < n; {
		k, err := c.CQ.Wait(ctx, wc)
		if err != nil {
			return fmt.Errorf("after %d of %d completions: %w", got, n, err)
		}
		for _, w := range wc[:k] {
			if w.Status == uverbs.WCSuccess {
				continue
			}
			select {
			case <-c.Done():
				if w.Status == uverbs.WCWRFlushErr {
					continue
				}
			default:
			}
			return fmt.Errorf("completion %d: %v", got, w.Status)
		}
		got += k
	}
	return nil
}

// waitN waits for n successful completions of opcode op on c's CQ.
func waitN(ctx context.Context, c *rdmacm.Conn, n int) error {
	wc := make([]uverbs.WorkCompletion, 8)
	for got := 0; got < n; {
		k, err := c.CQ.Wait(ctx, wc)
		if err != nil {
			return fmt.Errorf("after %d of %d completions: %w", got, n, err)
		}
		for _, w := range wc[:k] {
			if w.Status != uverbs.WCSuccess {
				return fmt.Errorf("completion %d: %v", got, w.Status)
			}
		}
		got += k
	}
	return nil
}

// ucmatose's protocol: the server sends -C messages of -S bytes on each
// connection once all are established, then receives as many; the client
// receives, then replies; the server disconnects.
const ucmCount, ucmSize, ucmConns = 10, 100, 4

func TestRigInteropUcmatoseServer(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 120*time.Second)
	wait := tool(t, ctx, "ucmatose", "-b", addrRXE0.String(), "-p", "7471", "-c", strconv.Itoa(ucmConns),
		"-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	var wg sync.WaitGroup
	errs := make(chan error, ucmConns)
	for i := 0; i < ucmConns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- ucmatoseClient(t, ctx, netip.AddrPortFrom(addrRXE0, 7471))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	out := wait()
	if !bytes.Contains([]byte(out), []byte("data transfers complete")) || !bytes.Contains([]byte(out), []byte("return status 0")) {
		t.Errorf("ucmatose server:\n%s", out)
	}
}

// ucmatoseClient is one connection of ucmatose's client, to dst.
func ucmatoseClient(t *testing.T, ctx context.Context, dst netip.AddrPort) error {
	var b *buffers
	cfg := &rdmacm.Config{
		Cap: uverbs.QPCap{MaxSendWR: ucmCount, MaxRecvWR: ucmCount, MaxSendSGE: 1, MaxRecvSGE: 1}, SignalAll: true,
		Prepare: func(c *rdmacm.Conn) error {
			b = newBuffers(t, c.PD(), ucmCount*ucmSize)
			return postRecvs(c, b, ucmCount, ucmSize)
		},
	}
	c := dialRetry(t, ctx, dst, cfg)
	defer c.Close()
	if err := waitN(ctx, c, ucmCount); err != nil {
		return fmt.Errorf("receiving: %w", err)
	}
	for i := 0; i < ucmCount; i++ {
		if _, err := c.QP.PostSend([]uverbs.SendWR{{ID: uint64(i), Opcode: uverbs.WRSend, SGL: b.sge(0, ucmSize)}}); err != nil {
			return err
		}
	}
	// ucmatose's server disconnects as soon as it has received every reply,
	// and rdmacm moves the QP to ERR on DISCONNECTED: a send the server
	// got but whose ACK had not come back yet completes flushed (seen
	// 7.3.4 client <-> 5.10 server across two guests). The server checks
	// that every reply arrived; here a flush counts after the disconnect.
	if err := waitSent(ctx, c, ucmCount); err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	ev, err := c.NextEvent(ctx)
	if err != nil || ev.Type != rdmacm.EventDisconnected {
		return fmt.Errorf("waiting for the server's disconnect: %v, %v", ev.Type, err)
	}
	return nil
}

func TestRigInteropUcmatoseClient(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 120*time.Second)
	var wait func() string
	ucmatoseServe(t, ctx, netip.AddrPortFrom(addrRXE0, 7472), func() {
		wait = tool(t, ctx, "ucmatose", "-s", addrRXE0.String(), "-p", "7472", "-c", strconv.Itoa(ucmConns),
			"-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	})
	if out := wait(); !bytes.Contains([]byte(out), []byte("return status 0")) {
		t.Errorf("ucmatose client:\n%s", out)
	}
}

// ucmatoseServe is ucmatose's server on addr for ucmConns connections:
// start (if not nil) runs once it listens.
func ucmatoseServe(t *testing.T, ctx context.Context, addr netip.AddrPort, start func()) {
	bufs := map[*rdmacm.Conn]*buffers{}
	var mu sync.Mutex
	cfg := &rdmacm.Config{
		Cap: uverbs.QPCap{MaxSendWR: ucmCount, MaxRecvWR: ucmCount, MaxSendSGE: 1, MaxRecvSGE: 1}, SignalAll: true,
		Prepare: func(c *rdmacm.Conn) error {
			b := newBuffers(t, c.PD(), ucmCount*ucmSize)
			mu.Lock()
			bufs[c] = b
			mu.Unlock()
			return postRecvs(c, b, ucmCount, ucmSize)
		},
	}
	l, err := rdmacm.Listen(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if start != nil {
		start()
	}
	var conns []*rdmacm.Conn
	for len(conns) < ucmConns {
		r, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Accept(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for _, c := range conns {
		for i := 0; i < ucmCount; i++ {
			if _, err := c.QP.PostSend([]uverbs.SendWR{{ID: 100 + uint64(i), Opcode: uverbs.WRSend, SGL: bufs[c].sge(0, ucmSize)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range conns {
		// ucmCount sends, then the client's ucmCount replies.
		if err := waitN(ctx, c, 2*ucmCount); err != nil {
			t.Fatal(err)
		}
		if err := c.Disconnect(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		if ev, err := c.NextEvent(ctx); err != nil || ev.Type != rdmacm.EventDisconnected {
			t.Fatalf("after disconnect: %v, %v", ev.Type, err)
		}
	}
}

// rdma_server / rdma_client: one connection, one 16-byte message each way:
// the client sends first, the server answers, and the server disconnects
// once its send completed. rdma-core's tools send the 16 zero bytes of a
// static buffer and check nothing but completions.
const rdmaMsg = 16

func TestRigInteropRdmaServer(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	wait := tool(t, ctx, "rdma_server", "-s", addrRXE0.String(), "-p", "7473")
	rdmaClient(t, ctx, netip.AddrPortFrom(addrRXE0, 7473))
	out := wait()
	t.Logf("rdma_server:\n%s", out)
}

// rdmaClient is rdma_client against the rdma_server at dst (dialled until
// it listens): it sends 16 bytes and checks the 16 it receives.
func rdmaClient(t *testing.T, ctx context.Context, dst netip.AddrPort) {
	var b *buffers
	cfg := &rdmacm.Config{Prepare: func(c *rdmacm.Conn) error {
		b = newRdmaBuffers(t, c.PD())
		return postRecvs(c, b, 1, rdmaMsg)
	}}
	c := dialRetry(t, ctx, dst, cfg)
	defer c.Close()
	copy(b.mem.Bytes()[1024:], "goverbs client!!")
	if _, err := c.QP.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: b.sge(1024, rdmaMsg)}}); err != nil {
		t.Fatal(err)
	}
	if err := rdmaComplete(ctx, c, b, 2); err != nil {
		t.Fatal(err)
	}
}

func TestRigInteropRdmaClient(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	var wait func() string
	rdmaServe(t, ctx, netip.AddrPortFrom(addrRXE0, 7474), func() {
		wait = tool(t, ctx, "rdma_client", "-s", addrRXE0.String(), "-p", "7474")
	})
	t.Logf("rdma_client:\n%s", wait())
}

// rdmaServe is rdma_server on addr for one rdma_client: it receives the
// client's 16 bytes (checked), answers with 16 and waits for the client's
// disconnect; start (if not nil) runs once it listens.
func rdmaServe(t *testing.T, ctx context.Context, addr netip.AddrPort, start func()) {
	var b *buffers
	l, err := rdmacm.Listen(addr, &rdmacm.Config{Prepare: func(c *rdmacm.Conn) error {
		b = newRdmaBuffers(t, c.PD())
		return postRecvs(c, b, 1, rdmaMsg)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if start != nil {
		start()
	}
	r, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Accept(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := rdmaComplete(ctx, c, b, 1); err != nil {
		t.Fatal("receiving:", err)
	}
	copy(b.mem.Bytes()[1024:], "goverbs server!!")
	if _, err := c.QP.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: b.sge(1024, rdmaMsg)}}); err != nil {
		t.Fatal(err)
	}
	if err := rdmaComplete(ctx, c, b, 1); err != nil {
		t.Fatal("sending:", err)
	}
	if ev, err := c.NextEvent(ctx); err != nil || ev.Type != rdmacm.EventDisconnected {
		t.Fatalf("waiting for rdma_client's disconnect: %v, %v", ev.Type, err)
	}
}

// newRdmaBuffers is the buffer of one rdma_server/rdma_client connection:
// the receive slot at 0, filled with 0xa5 so that rdmaComplete sees the
// peer's zeros land, the send at 1024.
func newRdmaBuffers(t *testing.T, pd *uverbs.PD) *buffers {
	b := newBuffers(t, pd, 4096)
	for i := range b.mem.Bytes()[:rdmaMsg] {
		b.mem.Bytes()[i] = 0xa5
	}
	return b
}

// rdmaComplete waits for n completions on c and checks them: every one
// successful, and the receive among them (at most one) 16 bytes, the
// rdma-core tool's zeros over the slot's 0xa5.
func rdmaComplete(ctx context.Context, c *rdmacm.Conn, b *buffers, n int) error {
	wc := make([]uverbs.WorkCompletion, n)
	for got := 0; got < n; {
		k, err := c.CQ.Wait(ctx, wc[:n-got])
		if err != nil {
			return fmt.Errorf("after %d of %d completions: %w", got, n, err)
		}
		for _, w := range wc[:k] {
			if w.Status != uverbs.WCSuccess {
				return fmt.Errorf("completion %d: %v", got, w.Status)
			}
			if w.Opcode != uverbs.WCRecv {
				continue
			}
			if w.ByteLen != rdmaMsg {
				return fmt.Errorf("received %d bytes, want %d", w.ByteLen, rdmaMsg)
			}
			if m := b.mem.Bytes()[:rdmaMsg]; !bytes.Equal(m, make([]byte, rdmaMsg)) {
				return fmt.Errorf("received % x, want rdma-core's %d zero bytes", m, rdmaMsg)
			}
		}
		got += k
	}
	return nil
}

// udaddy: UD through the CM (SIDR). The client sends -C SEND_WITH_IMM
// (imm = its QPN) to the server, which replies to each connection.
func TestRigInteropUdaddyServer(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	wait := tool(t, ctx, "udaddy", "-b", addrRXE0.String(), "-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	udaddyDial(t, ctx, netip.AddrPortFrom(addrRXE0, 7174))
	if out := wait(); !bytes.Contains([]byte(out), []byte("data transfers complete")) {
		t.Errorf("udaddy server:\n%s", out)
	}
}

// udaddyDial is udaddy's client: a UD connection to dst (retried until
// the server listens), ucmCount messages sent, as many replies received.
func udaddyDial(t *testing.T, ctx context.Context, dst netip.AddrPort) {
	var b *buffers
	const slot = ucmSize + 40 // GRH
	cfg := &rdmacm.Config{PortSpace: rdmacm.PSUDP, SignalAll: true,
		Cap: uverbs.QPCap{MaxSendWR: ucmCount, MaxRecvWR: ucmCount, MaxSendSGE: 1, MaxRecvSGE: 1},
		Prepare: func(c *rdmacm.Conn) error {
			b = newBuffers(t, c.PD(), 2*ucmCount*slot)
			return postRecvs(c, b, ucmCount, slot)
		}}
	var c *rdmacm.Conn
	for {
		var err error
		if c, err = rdmacm.Dial(ctx, dst, cfg); err == nil {
			break
		}
		t.Logf("Dial: %v", err)
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	for i := 0; i < ucmCount; i++ {
		wr := uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: c.QP.QPN(), SGL: b.sge(ucmCount*slot, ucmSize),
			UD: uverbs.UDDest{AH: c.AH, RemoteQPN: c.UD.QPN, QKey: c.UD.QKey}}
		if _, err := c.QP.PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitN(ctx, c, 2*ucmCount); err != nil {
		t.Fatal(err)
	}
}

// TestRigInteropUdaddyClient: udaddy is the client; a goverbs UD listener
// answers its SIDR request, receives its messages and replies to each.
func TestRigInteropUdaddyClient(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	var wait func() string
	udaddyServe(t, ctx, netip.AddrPortFrom(addrRXE0, 7174), func() {
		wait = tool(t, ctx, "udaddy", "-s", addrRXE0.String(), "-C", strconv.Itoa(ucmCount), "-S", strconv.Itoa(ucmSize))
	})
	if out := wait(); !bytes.Contains([]byte(out), []byte("data transfers complete")) {
		t.Errorf("udaddy client:\n%s", out)
	}
}

// udaddyServe is udaddy's server on addr: it answers one SIDR request,
// receives ucmCount messages and replies to each; start (if not nil) runs
// once it listens.
func udaddyServe(t *testing.T, ctx context.Context, addr netip.AddrPort, start func()) {
	const slot = ucmSize + 40 // GRH
	var b *buffers
	l, err := rdmacm.Listen(addr, &rdmacm.Config{PortSpace: rdmacm.PSUDP, SignalAll: true,
		Cap: uverbs.QPCap{MaxSendWR: ucmCount, MaxRecvWR: ucmCount, MaxSendSGE: 1, MaxRecvSGE: 1},
		Prepare: func(c *rdmacm.Conn) error {
			b = newBuffers(t, c.PD(), 2*ucmCount*slot)
			return postRecvs(c, b, ucmCount, slot)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if start != nil {
		start()
	}
	r, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Accept(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wc := make([]uverbs.WorkCompletion, 1)
	var peerQPN uint32
	for got := 0; got < ucmCount; got++ {
		if _, err := c.CQ.Wait(ctx, wc); err != nil || wc[0].Status != uverbs.WCSuccess || wc[0].Opcode != uverbs.WCRecv {
			t.Fatalf("receive %d: %+v, %v", got, wc[0], err)
		}
		peerQPN = wc[0].Imm // udaddy sends its QPN as immediate data
		if wc[0].SrcQP != peerQPN {
			t.Errorf("source QP %d, immediate %d", wc[0].SrcQP, peerQPN)
		}
	}
	peer, err := c.ID.RemoteAddr()
	if err != nil {
		t.Fatal(err)
	}
	attr, err := c.ID.AddressTo(peer.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ah, err := c.PD().CreateAH(attr)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	qa, _, err := c.QP.Query(uverbs.QPAttrQKey)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < ucmCount; i++ {
		wr := uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSendWithImm, Imm: c.QP.QPN(), SGL: b.sge(ucmCount*slot, ucmSize),
			UD: uverbs.UDDest{AH: ah, RemoteQPN: peerQPN, QKey: qa.QKey}}
		if _, err := c.QP.PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitN(ctx, c, ucmCount); err != nil {
		t.Fatal(err)
	}
}
