package rdmacm_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// procStatus returns a field of /proc/self/status ("Threads").
func procStatus(t *testing.T, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rdmaRes is `rdma resource show` (per-device counts of kernel objects).
func rdmaRes(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("rdma", "resource", "show").CombinedOutput()
	if err != nil {
		t.Logf("rdma resource show: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestRigContextTimeouts(t *testing.T) {
	rigtest.Require(t)
	// Address resolution of an address on the veth subnet that nobody has:
	// ARP never answers; ctx ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := rdmacm.Dial(ctx, netip.MustParseAddrPort("10.99.0.77:7174"), &rdmacm.Config{Source: netip.AddrPortFrom(addrRXEA, 0)})
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		// The kernel's own timeout (the ctx deadline too) may answer first.
		t.Logf("Dial to a silent address: %v", err)
		if err == nil {
			t.Fatal("Dial to a silent address succeeded")
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial took %v with a 300ms context", d)
	}
	// A cancel (no deadline: the kernel's timeout is 2 s) ends the wait at once.
	ctx3, cancel3 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel3)
	start = time.Now()
	_, err = rdmacm.Dial(ctx3, netip.MustParseAddrPort("10.99.0.78:7174"), &rdmacm.Config{Source: netip.AddrPortFrom(addrRXEA, 0)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Dial cancelled after 100ms: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancelled Dial took %v", d)
	}
	// Accept with nobody connecting ends with ctx; Close wakes a blocked Accept.
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXE0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := l.Accept(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Accept: %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, rdmacm.ErrClosed) || !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Accept during Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestRigPeerDies: a peer process is killed while connected; DISCONNECTED
// arrives, the QP is flushed and every posted receive completes.
func TestRigPeerDies(t *testing.T) {
	if dst := os.Getenv("RDMACM_TEST_CHILD_DIAL"); dst != "" {
		c, err := rdmacm.Dial(context.Background(), netip.MustParseAddrPort(dst), nil)
		if err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		_ = c
		fmt.Println("connected")
		select {}
	}
	rigtest.Require(t)
	ctx := rigCtx(t, 90*time.Second)
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXE0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRigPeerDies$")
	cmd.Env = append(os.Environ(), "RDMACM_TEST_CHILD_DIAL="+netip.AddrPortFrom(addrRXE0, l.Addr().Port()).String())
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const posted = 8
	var b *buffers
	r2 := r
	c, err := r2.Accept(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b = newBuffers(t, c.PD(), 4096)
	if err := postRecvs(c, b, posted, 64); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "connected\n" {
		t.Fatalf("child said %q", line)
	}
	start := time.Now()
	cmd.Process.Kill()
	cmd.Wait()
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("no DISCONNECTED after the peer died")
	}
	t.Logf("DISCONNECTED %v after the kill; Err = %v", time.Since(start), c.ID.Err())
	if !errors.Is(c.ID.Err(), rdmacm.ErrDisconnected) {
		t.Errorf("Err = %v", c.ID.Err())
	}
	// Done closes only after the QP is in ERR (no race with State).
	if s := c.QP.State(); s != uverbs.QPStateErr {
		t.Errorf("QP.State() = %v once Done is closed, want ERR", s)
	}
	wc := make([]uverbs.WorkCompletion, posted)
	got := 0
	for got < posted {
		n, err := c.CQ.Wait(ctx, wc[got:])
		if err != nil {
			t.Fatalf("after %d flushed receives: %v", got, err)
		}
		for _, w := range wc[got : got+n] {
			if w.Status != uverbs.WCWRFlushErr {
				t.Errorf("receive %d: %v, want a flush", w.ID, w.Status)
			}
		}
		got += n
	}
}

// TestRigManyConnections sets up and tears down N connections at once, one
// goroutine each, on one channel per side (cmtime's shape), and checks
// nothing leaks. N is RDMACM_TEST_CONNS: 200 by default, which keeps the
// suite's run of five kernels within its budget (1,000, the scale,
// took 35-60 s a kernel under TCG, and minutes on a loaded host);
// RDMACM_TEST_CONNS=1000 for the full scale.
//
// At most RDMACM_TEST_INFLIGHT handshakes (default 32; 0: all) run at once,
// on the way up and on the way down; every connection stays open until all
// N are up. Under TCG, 5.10's CM
// times out when ~200 handshakes queue at once: rdma-core's own `cmtime -c
// 200` on 5.10 ends in UNREACHABLE (ETIMEDOUT) and REJECTED events too
// (session 4), so an unbounded burst tests the emulator, not goverbs.
func TestRigManyConnections(t *testing.T) {
	rigtest.Require(t)
	n, inflight := 200, 32
	if s := os.Getenv("RDMACM_TEST_CONNS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("RDMACM_TEST_INFLIGHT"); s != "" {
		inflight, _ = strconv.Atoi(s)
	}
	if inflight <= 0 || inflight > n {
		inflight = n
	}
	handshakes := make(chan struct{}, inflight)
	ctx := rigCtx(t, 600*time.Second)
	fds0, res0 := openFDs(t), rdmaRes(t)
	cfg := rdmacm.Config{PollOnly: true, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, Backlog: n}
	srvCh, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	cliCh, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	scfg := cfg
	scfg.Channel = srvCh
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXE0, 0), &scfg)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(addrRXE0, l.Addr().Port())
	var srvWG sync.WaitGroup
	var accepted, orphaned atomic.Int32
	// clientsGone closes 30 s after the clients' teardown: a server side
	// still waiting then (its client's Dial failed after the server's
	// accept) is counted, not waited for.
	clientsGone := make(chan struct{})
	go func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			srvWG.Add(1)
			go func() {
				defer srvWG.Done()
				c, err := r.Accept(ctx, nil)
				if err != nil {
					t.Errorf("Accept: %v", err)
					return
				}
				accepted.Add(1)
				select {
				case <-c.Done(): // the client disconnects
				case <-clientsGone:
					orphaned.Add(1)
				}
				c.Close()
			}()
		}
	}()
	ccfg := cfg
	ccfg.Channel = cliCh
	conns := make([]*rdmacm.Conn, n)
	var wg sync.WaitGroup
	var maxThreads atomic.Int32
	start := time.Now()
	var failed atomic.Int32
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			handshakes <- struct{}{}
			c, err := rdmacm.Dial(ctx, dst, &ccfg)
			<-handshakes
			if err != nil {
				if failed.Add(1) < 5 {
					t.Errorf("Dial %d: %v", i, err)
				}
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	setup := time.Since(start)
	maxThreads.Store(int32(procStatus(t, "Threads")))
	start = time.Now()
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The same bound for teardown: 5.10 under TCG loses CM MADs
			// in a burst of 200 disconnects (neither side then hears of
			// the DREQ for 20 s and more; seen in 4 of 4 runs that waited).
			handshakes <- struct{}{}
			defer func() { <-handshakes }()
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	wg.Wait()
	grace := time.AfterFunc(30*time.Second, func() { close(clientsGone) })
	srvWG.Wait()
	grace.Stop()
	teardown := time.Since(start)
	if k := orphaned.Load(); k > 0 {
		t.Errorf("%d accepted connections never saw their client's disconnect", k)
	}
	l.Close()
	if err := cliCh.Close(); err != nil {
		t.Error(err)
	}
	if err := srvCh.Close(); err != nil {
		t.Error(err)
	}
	t.Logf("%d connections (%d handshakes at a time): set up in %v (%.2f ms/conn), torn down in %v; %d accepted; OS threads after set-up: %d; GOMAXPROCS-bound",
		n, inflight, setup, float64(setup.Microseconds())/1000/float64(n), teardown, accepted.Load(), maxThreads.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d dials failed", failed.Load())
	}
	if fds := openFDs(t); fds != fds0 {
		t.Errorf("%d open fds after, %d before", fds, fds0)
	}
	if res := rdmaRes(t); res != res0 {
		t.Errorf("rdma resources before:\n%s\nafter:\n%s", res0, res)
	}
	if th := maxThreads.Load(); th > 64 {
		t.Errorf("%d OS threads for %d connections", th, n)
	}
}

// cmtimeTotals sums cmtime's "total ms" column: set-up (create id to
// connect) and tear-down (disconnect, destroy).
func cmtimeTotals(t *testing.T, out []byte) (setup, teardown float64) {
	t.Helper()
	cmtimeFailed(t, out)
	for _, l := range strings.Split(string(out), "\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 1 {
			continue
		}
		ms, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(name) {
		case "create id", "bind", "resolve addr", "resolve route", "create qp", "connect":
			setup += ms
		case "disconnect", "destroy":
			teardown += ms
		}
	}
	if setup == 0 {
		t.Fatalf("no cmtime figures in:\n%s", out)
	}
	return setup, teardown
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// TestRigCmtime compares goverbs with rdma-core's cmtime in one boot,
// against the same server (cmtime's): N connections set up concurrently
// and torn down, and single connections (connect to ESTABLISHED).
func TestRigCmtime(t *testing.T) {
	rigtest.Require(t)
	// A comparison, not a check: it times rdma-core's cmtime beside goverbs
	// and takes minutes per kernel, and cmtime itself can wait forever for
	// a failed connection. It runs when asked for, not in every suite run.
	if os.Getenv("GOVERBS_COMPARE") == "" {
		t.Skip("comparison with rdma-core's cmtime: run with GOVERBS_COMPARE=1 (e.g. RIG_RUN=TestRigCmtime and GOVERBS_COMPARE=1 in the guest's environment)")
	}
	n := 1000
	if s := os.Getenv("RDMACM_TEST_CONNS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := rigCtx(t, 900*time.Second)
	// A cmtime server per phase, each holding a first connection of
	// goverbs' open while it is used (see cmtimeServer: cmtime 44's server
	// rejects everything once its first connection is gone).
	server := func(port int) netip.AddrPort {
		dst, _ := cmtimeServer(t, ctx, port)
		return dst
	}
	// rdma-core's cmtime waits forever for a connection that failed (seen
	// under load with -c 1000): give it 5 minutes. Where cmtime itself
	// fails at N (5.10 under TCG: its CM loses MADs in a burst of a few
	// hundred handshakes, "failure rconnecting: Invalid argument" and
	// UNREACHABLE/REJECTED events for cmtime alone; session 5 with -c 1000),
	// the comparison is made at N/4, then N/16, each on a fresh server,
	// down to 50; goverbs then dials as many.
	var out []byte
	var err error
	for port := 7483; ; port++ {
		server(port)
		cctx, ccancel := context.WithTimeout(ctx, 300*time.Second)
		out, err = exec.CommandContext(cctx, "cmtime", "-s", addrRXE0.String(), "-p", strconv.Itoa(port), "-c", strconv.Itoa(n)).CombinedOutput()
		ccancel()
		if err == nil {
			break
		}
		if n/4 < 50 {
			t.Fatalf("cmtime -c %d: %v\n%.3000s", n, err, out)
		}
		lines := strings.SplitN(string(out), "\n", 4)
		t.Logf("cmtime -c %d failed (%v; its first lines: %q): the comparison is made at %d connections", n, err, lines[:min(3, len(lines))], n/4)
		n /= 4
	}
	t.Logf("cmtime -c %d:\n%s", n, out)
	cSetup, cTeardown := cmtimeTotals(t, out)

	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cfg := &rdmacm.Config{Channel: ch, PollOnly: true, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	conns := make([]*rdmacm.Conn, n)
	var wg sync.WaitGroup
	var failed atomic.Int32
	dst := server(7481)
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := rdmacm.Dial(ctx, dst, cfg)
			if err != nil {
				if failed.Add(1) < 5 {
					t.Errorf("Dial: %v", err)
				}
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	gSetup := time.Since(start)
	threads := procStatus(t, "Threads")
	start = time.Now()
	for _, c := range conns {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
	gTeardown := time.Since(start)
	t.Logf("%d connections to cmtime's server: goverbs set-up %.1f ms, tear-down %.1f ms (OS threads %d); cmtime set-up %.1f ms, tear-down %.1f ms; set-up ratio %.2f×",
		n, ms(gSetup), ms(gTeardown), threads, cSetup, cTeardown, ms(gSetup)/cSetup)

	// One connection at a time: connect to ESTABLISHED.
	// Warm: the channel and its device context exist (a long-lived
	// program). Cold: Dial opens a channel and the device, like a fresh
	// cmtime process, whose create-qp step opens the device.
	const reps = 20
	var gov, cold, ct []time.Duration
	dst = server(7482)
	coldCfg := *cfg
	coldCfg.Channel = nil
	for i := 0; i < reps; i++ {
		start := time.Now()
		c, err := rdmacm.Dial(ctx, dst, cfg)
		if err != nil {
			t.Fatal(err)
		}
		gov = append(gov, time.Since(start))
		c.Close()
		start = time.Now()
		c, err = rdmacm.Dial(ctx, dst, &coldCfg)
		if err != nil {
			t.Fatal(err)
		}
		cold = append(cold, time.Since(start))
		c.Close()
		out, err := exec.CommandContext(ctx, "cmtime", "-s", addrRXE0.String(), "-p", "7482", "-c", "1").CombinedOutput()
		if err != nil {
			t.Fatalf("cmtime -c 1: %v\n%s", err, out)
		}
		s, _ := cmtimeTotals(t, out)
		ct = append(ct, time.Duration(s*float64(time.Millisecond)))
	}
	t.Logf("one connection, create id to ESTABLISHED, median of %d: goverbs Dial warm %.2f ms, cold (new channel and device context) %.2f ms; cmtime -c 1 (create id … connect, fresh process) %.2f ms; cold ratio %.2f×",
		reps, ms(median(gov)), ms(median(cold)), ms(median(ct)), float64(median(cold))/float64(median(ct)))
	if failed.Load() != 0 {
		t.Fatalf("%d dials failed", failed.Load())
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestRigChannelCloseWakes: closing an event channel wakes a call blocked
// on one of its IDs with an error matching ErrClosed, as EventChannel.Close
// says. (The reader, parked on the poller, sees the file's close as the
// poller's "use of closed file", which is not os.ErrClosed: until session
// 18 that error reached the blocked call.)
func TestRigChannelCloseWakes(t *testing.T) {
	rigtest.Require(t)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrRXE0, 0), &rdmacm.Config{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // Accept parks, the reader is parked
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, rdmacm.ErrClosed) {
			t.Errorf("Accept when its channel closed: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still blocked 10s after its channel closed")
	}
}
