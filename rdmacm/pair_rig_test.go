package rdmacm_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestRigPairPeer is goverbs' side of the two-machine steps with rdma-core's
// ucmatose, udaddy, mckey, rdma_server and rdma_client
// (test/rig/guest/pair-cm.sh, run by pair.sh --cm): RDMACM_PAIR_PEER names
// the role and RDMACM_PAIR_ADDR the address to listen on (a server) or to
// connect to (a client), the other guest's; the mckey roles take this
// guest's own address and RDMACM_PAIR_PORT, RDMACM_PAIR_GROUP, and
// pair-net.sh's PAIR_DEV and PAIR_NET:
//
//	ucmatose-client  ucmConns connections to ADDR:7471, ucmatose's protocol
//	ucmatose-server  ucmatose's server on ADDR:7471 for ucmConns connections;
//	                 once it listens, it accepts TCP on ADDR:PORT (readyOn)
//	udaddy-client    a UD connection (SIDR) to ADDR:7174, messages both ways
//	udaddy-server    udaddy's server on ADDR:7174
//	rdma-client      rdma_client's connection to ADDR:PORT, 16 bytes each way
//	rdma-server      rdma_server on ADDR:PORT for one rdma_client
//	mckey-receiver   joins GROUP (then the next groups, while the sender
//	                 transmits nothing) from ADDR on PAIR_DEV and receives
//	                 what the other guest's mckey -s sends
//	mckey-sender     sends to the groups the other guest's mckey joined
//
// The rdma-core tool is the other guest's. Multicast has no reply to tell
// a sender that the receiver is there or what arrived, so a mckey step
// has a side channel: this test listens on ADDR:PORT (TCP on the pair
// network) and the other guest's test/rig/guest/pair-mckey.sh connects,
// one line per message: the receiver says "ready GROUP COUNT SIZE" once
// it is a member, the sender answers "sent N" once its device put N
// datagrams on the wire (its rxe's sent_pkts), and the receiver ends with
// "done R", R how many arrived; each side checks R against N. Outside a
// two-machine run (RDMACM_PAIR_PEER unset) there is no peer, and the test
// says so and skips; the same protocols run against the tools in one
// guest in the TestRigInterop* tests.
func TestRigPairPeer(t *testing.T) {
	rigtest.Require(t)
	role := os.Getenv("RDMACM_PAIR_PEER")
	if role == "" {
		t.Skip("not a two-machine step: RDMACM_PAIR_PEER is unset (test/rig/pair.sh --cm sets it)")
	}
	addr, err := netip.ParseAddr(os.Getenv("RDMACM_PAIR_ADDR"))
	if err != nil {
		t.Fatalf("RDMACM_PAIR_ADDR: %v", err)
	}
	port := func() uint16 {
		p, err := strconv.ParseUint(os.Getenv("RDMACM_PAIR_PORT"), 10, 16)
		if err != nil {
			t.Fatalf("RDMACM_PAIR_PORT: %v", err)
		}
		return uint16(p)
	}
	nic := func() rxeNIC {
		n := rxeNIC{dev: os.Getenv("PAIR_DEV"), netdev: os.Getenv("PAIR_NET"), addr: addr}
		if n.dev == "" || n.netdev == "" {
			t.Fatalf("PAIR_DEV=%q PAIR_NET=%q: pair-net.sh exports both", n.dev, n.netdev)
		}
		return n
	}
	// The client retries until the other guest's server listens.
	ctx := rigCtx(t, 300*time.Second)
	switch role {
	case "ucmatose-client":
		var wg sync.WaitGroup
		errs := make(chan error, ucmConns)
		for i := 0; i < ucmConns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- ucmatoseClient(t, ctx, netip.AddrPortFrom(addr, 7471))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	case "ucmatose-server":
		// ucmatose -c 4 sends its four REQs at once and exits on the first
		// REJECTED, destroying the others the listener may already hold:
		// its retry must wait until the listener is up (readyOn).
		ucmatoseServe(t, ctx, netip.AddrPortFrom(addr, 7471), func() { readyOn(t, ctx, netip.AddrPortFrom(addr, port())) })
	case "udaddy-client":
		udaddyDial(t, ctx, netip.AddrPortFrom(addr, 7174))
	case "udaddy-server":
		udaddyServe(t, ctx, netip.AddrPortFrom(addr, 7174), nil)
	case "rdma-client":
		rdmaClient(t, ctx, netip.AddrPortFrom(addr, port()))
	case "rdma-server":
		rdmaServe(t, ctx, netip.AddrPortFrom(addr, port()), nil)
	case "mckey-receiver":
		group, err := netip.ParseAddr(os.Getenv("RDMACM_PAIR_GROUP"))
		if err != nil || !group.Is4() || !group.IsMulticast() {
			t.Fatalf("RDMACM_PAIR_GROUP=%q: not an IPv4 multicast address (%v)", os.Getenv("RDMACM_PAIR_GROUP"), err)
		}
		pairMckeyReceiver(t, ctx, nic(), group, acceptSide(t, ctx, netip.AddrPortFrom(addr, port())))
	case "mckey-sender":
		pairMckeySender(t, ctx, nic(), acceptSide(t, ctx, netip.AddrPortFrom(addr, port())))
	default:
		t.Fatalf("RDMACM_PAIR_PEER=%q: not a role", role)
	}
}

// pairMckeyReceiver is goverbs receiving from the other guest's mckey -s:
// it joins group, says ready, and checks that it received exactly what
// the sender's rxe transmitted; while that is nothing (mcAttempts) it
// tries again on the next group.
func pairMckeyReceiver(t *testing.T, ctx context.Context, nic rxeNIC, group netip.Addr, side *sideLine) {
	sent, got := 0, 0
	var err error
	for try := 1; try <= mcAttempts && sent == 0 && err == nil; try, group = try+1, group.Next() {
		r := joinMcast(t, ctx, nic, group, mcSends)
		// The kernel's CM joined the netdev to the IPv4 group (IGMP), which
		// lets the group's MAC in.
		t.Logf("%s IGMP member of %v: %v", nic.netdev, group, nic.igmpJoined(t, group))
		t.Logf("%s filter: %s", nic.netdev, nic.groupMACs(t, group))
		side.send("ready %v %d %d", group, mcSends, ucmSize)
		f := side.recv(120 * time.Second)
		if len(f) != 2 || f[0] != "sent" {
			t.Fatalf("side channel: %q, want \"sent N\"", f)
		}
		if sent, err = strconv.Atoi(f[1]); err != nil || sent < 0 || sent > mcSends {
			t.Fatalf("side channel: %q: the sender transmitted %q of %d datagrams", f, f[1], mcSends)
		}
		got, err = r.expect(ctx, sent)
		r.close()
		t.Logf("try %d on %v: the sender's rxe transmitted %d of mckey's %d sends, goverbs received %d", try, group, sent, mcSends, got)
	}
	side.send("done %d", got)
	if err != nil {
		t.Fatal(err)
	}
	if sent == 0 {
		t.Fatalf("the other guest's mckey transmitted nothing in %d tries", mcAttempts)
	}
}

// pairMckeySender is goverbs sending to the other guest's mckey receiver,
// on each group it says it joined, until it says done; it checks the
// receiver got what goverbs sent last.
func pairMckeySender(t *testing.T, ctx context.Context, nic rxeNIC, side *sideLine) {
	last := -1
	for {
		f := side.recv(150 * time.Second)
		switch {
		case len(f) == 4 && f[0] == "ready":
			group, err := netip.ParseAddr(f[1])
			n, err1 := strconv.Atoi(f[2])
			size, err2 := strconv.Atoi(f[3])
			if err != nil || err1 != nil || err2 != nil || !group.IsMulticast() || n < 1 || n > 1000 || size < 1 || size > 4096 {
				t.Fatalf("side channel: %q: want \"ready GROUP COUNT SIZE\"", f)
			}
			mcSend(t, ctx, nic, group, n, size)
			last = n
			side.send("sent %d", n)
		case len(f) == 2 && f[0] == "done":
			r, err := strconv.Atoi(f[1])
			if err != nil || last < 0 || r != last {
				t.Fatalf("side channel: %q: the receiver got %q of the %d datagrams goverbs sent", f, f[1], last)
			}
			t.Logf("the receiver got all %d datagrams", r)
			return
		default:
			t.Fatalf("side channel: %q, want \"ready GROUP COUNT SIZE\" or \"done R\"", f)
		}
	}
}

// sideLine is a mckey step's side channel: one TCP connection, one line
// per message.
type sideLine struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// acceptSide listens on addr and takes the first connection (the other
// guest's pair-mckey.sh, which retries until this listens).
func acceptSide(t *testing.T, ctx context.Context, addr netip.AddrPort) *sideLine {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if d, ok := ctx.Deadline(); ok {
		l.(*net.TCPListener).SetDeadline(d)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("side channel on %v: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	t.Logf("side channel: %v <- %v", addr, c.RemoteAddr())
	return &sideLine{t: t, c: c, r: bufio.NewReader(c)}
}

// readyOn tells the other guest that this test's CM listener is up: it
// accepts (and closes at once) TCP connections on addr until the test
// ends; test/rig/guest/pair-cm.sh starts ucmatose's client only once
// such a connection succeeds.
func readyOn(t *testing.T, ctx context.Context, addr netip.AddrPort) {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr.String())
	if err != nil {
		t.Fatalf("readiness listener: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Logf("listening; readiness on tcp %v", addr)
}

func (s *sideLine) send(format string, args ...any) {
	s.t.Helper()
	line := fmt.Sprintf(format, args...)
	s.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintln(s.c, line); err != nil {
		s.t.Fatalf("side channel: sending %q: %v", line, err)
	}
	s.t.Logf("side channel: -> %s", line)
}

// recv reads the next line, waiting at most d, and returns its words.
func (s *sideLine) recv(d time.Duration) []string {
	s.t.Helper()
	s.c.SetReadDeadline(time.Now().Add(d))
	line, err := s.r.ReadString('\n')
	if err != nil {
		s.t.Fatalf("side channel: reading (%q so far): %v", line, err)
	}
	s.t.Logf("side channel: <- %s", strings.TrimSpace(line))
	return strings.Fields(line)
}
