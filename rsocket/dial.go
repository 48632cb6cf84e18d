package rsocket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Addr is the address of an rsocket endpoint: the IP address and port of
// the RDMA device's netdev (rdma_cm's TCP port space).
type Addr struct{ netip.AddrPort }

// Network is "rsocket".
func (a *Addr) Network() string { return "rsocket" }

// Config is a connection's buffer and queue sizes and how long its
// blocked calls spin; zero fields take the defaults (rsocket.c's, for the
// sizes). Like SO_SNDBUF and SO_RCVBUF they are fixed when the connection
// is made.
type Config struct {
	// SendBuffer is the registered send buffer (default 128 KiB, at
	// least 4 KiB). rsocket's SO_SNDBUF value v makes a buffer of 2v.
	SendBuffer int
	// RecvBuffer is the receive buffer the peer writes into (default 128
	// KiB); the peer is offered half of it at a time. SO_RCVBUF v makes 2v.
	RecvBuffer int
	// SendQueue and RecvQueue are the QP's queue sizes (default 384, at
	// least 16, at most 65534); RecvQueue is also the credit count the
	// peer may send ahead.
	SendQueue, RecvQueue int
	// Inline is the largest transfer sent inline (default 64; rstream
	// uses 0 for bandwidth runs). A negative value means 0.
	Inline int
	// WaitSpinMax lets a blocked Read or Write spin longer before it
	// parks: the spin starts at uverbs.DefaultWaitSpin (1 ms) and, with
	// WaitSpinMax above that, follows the connection's waits up to it
	// (uverbs.CQOptions.WaitSpinMax), so a wait that is short enough costs
	// no wake-up. Streams of large messages on an emulated device (64 KiB
	// took 3 ms under QEMU TCG) gain from 16 ms. Default 0: the duration
	// in the environment variable uverbs.WaitSpinMaxEnv, if set;
	// otherwise the spin stays at 1 ms.
	WaitSpinMax time.Duration
}

func (c *Config) settings() settings {
	var s settings
	if c != nil {
		s = settings{sbuf: c.SendBuffer, rbuf: c.RecvBuffer, sq: c.SendQueue, rq: c.RecvQueue, inline: c.Inline, spinMax: c.WaitSpinMax}
	}
	if s.sbuf == 0 {
		s.sbuf = defaultWMem
	}
	s.sbuf = max(s.sbuf, 2*sndLowat)
	if s.rbuf == 0 {
		s.rbuf = defaultMem
	}
	// The peer gets halves; keep them a multiple of 64 bytes.
	s.rbuf = max(alignUp(s.rbuf, 128), 2*sndLowat)
	if s.sq == 0 {
		s.sq = defaultSQSize
	}
	if s.rq == 0 {
		s.rq = defaultRQSize
	}
	s.sq = min(max(s.sq, qpMinSize), qpMaxSize)
	s.rq = min(max(s.rq, qpMinSize), qpMaxSize)
	if c == nil || c.Inline == 0 {
		s.inline = defaultInline
	}
	s.inline = max(s.inline, 0)
	return s
}

// cmConfig is the rdmacm configuration of a connection with settings s;
// prepare fills the private data in place (rdmacm copies it after Prepare).
func cmConfig(s settings, iwarpInline bool) rdmacm.Config {
	inline := s.inline
	if iwarpInline {
		inline = max(inline, msgSize)
	}
	return rdmacm.Config{
		Cap:       uverbs.QPCap{MaxSendWR: uint32(s.sq), MaxRecvWR: uint32(s.rq), MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: uint32(max(inline, msgSize))},
		CQEntries: s.sq + s.rq,
		SignalAll: true,
		// One completion channel (and event goroutine) per device, not
		// per connection: an idle connection holds no goroutine.
		SharedCompChannel: true,
		WaitSpinMax:       s.spinMax,
	}
}

// Dialer dials rsocket connections.
type Dialer struct {
	// Config sizes the connection's buffers and queues.
	Config Config
	// Source is the local address to connect from (zero: the kernel's
	// choice).
	Source netip.Addr
}

// Dial connects to address ("host:port") over network "tcp", "tcp4" or
// "tcp6" with the default Dialer.
func Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d Dialer
	return d.DialContext(ctx, network, address)
}

// DialContext resolves address, connects through rdma_cm (rsocket's
// private data in the connect request) and returns the connection once
// it is established. ctx bounds the whole set-up.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := resolve(ctx, network, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "rsocket", Err: err}
	}
	c, err := d.dial(ctx, ap)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "rsocket", Addr: &Addr{ap}, Err: err}
	}
	return c, nil
}

func (d *Dialer) dial(ctx context.Context, ap netip.AddrPort) (*Conn, error) {
	s := d.Config.settings()
	c, err := newConn(s)
	if err != nil {
		return nil, err
	}
	priv := make([]byte, connDataLen)
	cfg := cmConfig(s, true)
	cfg.PrivateData = priv
	cfg.Prepare = func(rc *rdmacm.Conn) error { return c.prepare(rc, priv) }
	if d.Source.IsValid() {
		cfg.Source = netip.AddrPortFrom(d.Source, 0)
	}
	if cfg.Channel, err = dialChannel(); err != nil {
		c.release()
		return nil, err
	}
	rc, err := rdmacm.Dial(ctx, ap, &cfg)
	if err != nil {
		if errors.Is(err, rdmacm.ErrClosed) {
			dropChannel(cfg.Channel)
		}
		c.rc = nil // rdmacm destroyed it
		c.release()
		return nil, err
	}
	c.rc = rc
	if err := c.start(rc.PeerData, false); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// Dials share one rdma_cm event channel per process (librdmacm keeps its
// devices open for the process too): one event goroutine for every dialed
// connection, and each device's context and PD opened once, not per Dial.
var shared struct {
	mu sync.Mutex
	ch *rdmacm.EventChannel
}

func dialChannel() (*rdmacm.EventChannel, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ch == nil {
		ch, err := rdmacm.Open()
		if err != nil {
			return nil, err
		}
		shared.ch = ch
	}
	return shared.ch, nil
}

// dropChannel forgets a channel that stopped; the next Dial opens another.
func dropChannel(ch *rdmacm.EventChannel) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ch == ch {
		shared.ch = nil
		ch.Close()
	}
}

func resolve(ctx context.Context, network, address string) (netip.AddrPort, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "rsocket":
	default:
		return netip.AddrPort{}, net.UnknownNetworkError(network)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	p, err := net.DefaultResolver.LookupPort(ctx, "tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for _, ip := range ips {
		if (network == "tcp6") == ip.Unmap().Is6() || network == "tcp" || network == "rsocket" {
			return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("no %s address for %s", network, host)
}

// ListenConfig listens for rsocket connections.
type ListenConfig struct {
	// Config sizes the accepted connections' buffers and queues.
	Config Config
	// Backlog is the listen backlog (0: 1024).
	Backlog int
	// ReuseAddr lets the port be bound again while old connections
	// linger (SO_REUSEADDR, which rstream sets).
	ReuseAddr bool
}

// Listen listens on address ("host:port"; an empty host listens on every
// RDMA device) with the default ListenConfig.
func Listen(network, address string) (net.Listener, error) {
	var lc ListenConfig
	return lc.Listen(context.Background(), network, address)
}

// Listen binds address and listens for connect requests.
func (lc *ListenConfig) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	ap, err := resolve(ctx, network, address)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rsocket", Err: err}
	}
	s := lc.Config.settings()
	cfg := cmConfig(s, true)
	cfg.Backlog = lc.Backlog
	if lc.ReuseAddr {
		cfg.Setup = func(id *rdmacm.ID) error { return id.SetReuseAddr(true) }
	}
	l, err := rdmacm.Listen(ap, &cfg)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "rsocket", Addr: &Addr{ap}, Err: err}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Listener{l: l, s: s, addr: &Addr{l.Addr()}, ctx: ctx, cancel: cancel}, nil
}

// Listener is an rsocket listener: a net.Listener.
type Listener struct {
	l      *rdmacm.Listener
	s      settings
	addr   *Addr
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	// accepting counts the Accept calls under way: each holds its next
	// connection's memory, which Close waits for them to release (it may
	// be registered on the listener's PD, which closes with the listener).
	accepting sync.WaitGroup
}

// acceptTimeout bounds one connection's set-up after its request came.
const acceptTimeout = 60 * time.Second

// Accept waits for the next connection. A request whose private data is
// not rsocket's is rejected and Accept goes on waiting.
//
// Accept maps the connection's buffers before it waits and, on a
// listener bound to one device's address, registers them (rsocket's
// raccept does both after the request comes): the answer to the request
// then makes none of those long system calls, which shortens the peer's
// connect and leaves Go's runtime monitor asleep for the first messages.
// A waiting Accept holds that memory (SendBuffer + RecvBuffer and the
// queues' messages); an error making it ready (the locked-memory limit,
// say) is Accept's error.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConfig(nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConfig is Accept with cfg sizing this connection in place of the
// ListenConfig's (nil: the ListenConfig's). Like rsocket's socket options
// set on a listener before raccept, it lets one listener accept
// connections of different sizes (rstream's latency and bandwidth runs).
// The queue sizes and inline size are at most the ListenConfig's (the QP
// is created with those).
func (l *Listener) AcceptConfig(cfg *Config) (*Conn, error) {
	s := l.s
	if cfg != nil {
		// The QP is made with the listener's capacities.
		s = cfg.settings()
		s.sq, s.rq = min(s.sq, l.s.sq), min(s.rq, l.s.rq)
		s.inline = min(s.inline, max(l.s.inline, msgSize))
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, l.acceptError(net.ErrClosed)
	}
	l.accepting.Add(1)
	l.mu.Unlock()
	defer l.accepting.Done()
	var next *Conn // the next connection's memory, made ready before the wait
	defer func() {
		if next != nil {
			next.release()
		}
	}()
	for {
		if next == nil {
			var err error
			if next, err = l.ready(s); err != nil {
				return nil, l.acceptError(err)
			}
		}
		req, err := l.l.Accept(l.ctx)
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, rdmacm.ErrClosed) {
				err = net.ErrClosed
			}
			return nil, l.acceptError(err)
		}
		if _, err := parseConnData(req.PrivateData()); err != nil {
			req.Reject(nil)
			continue // not rsocket's; next stays ready for the next request
		}
		c := next
		next = nil
		if err := l.accept(req, c); err != nil {
			if l.ctx.Err() != nil {
				return nil, l.acceptError(net.ErrClosed)
			}
			continue // that peer's loss; wait for the next
		}
		return c, nil
	}
}

func (l *Listener) acceptError(err error) error {
	return &net.OpError{Op: "accept", Net: "rsocket", Addr: l.addr, Err: err}
}

// ready maps a connection's memory and, if the listener's device is known
// (bound to one device's address), registers it on the listener's PD.
func (l *Listener) ready(s settings) (*Conn, error) {
	c, err := newConn(s)
	if err != nil {
		return nil, err
	}
	if pd := l.l.ID.PD(); pd != nil {
		if err := c.register(pd); err != nil {
			c.release()
			return nil, err
		}
	}
	return c, nil
}

// accept answers req with c, whose memory is ready, and starts it; on an
// error c is released.
func (l *Listener) accept(req *rdmacm.ConnRequest, c *Conn) error {
	peer := append([]byte(nil), req.PrivateData()...)
	priv := make([]byte, connDataLen)
	ctx, cancel := context.WithTimeout(l.ctx, acceptTimeout)
	defer cancel()
	rc, err := req.AcceptWith(ctx, priv, func(rc *rdmacm.Conn) error { return c.prepare(rc, priv) })
	if err != nil {
		c.rc = nil
		c.release()
		return err
	}
	c.rc = rc
	if testHookAccepted != nil {
		testHookAccepted(c)
	}
	if err := c.start(peer, true); err != nil {
		c.release()
		return err
	}
	// The peer may have given up already: on iWARP the active side's MPA
	// reply timer can fire while the accept is under way, and the
	// listener still gets ESTABLISHED, then the reset. A connection that
	// broke (CM DISCONNECTED, or its receives flushed) with nothing
	// received is not handed out; one with data or an orderly end is.
	c.mu.Lock()
	c.pollLocked()
	dead := c.state&stError != 0 && c.rmsgHead == c.rmsgTail
	c.mu.Unlock()
	if dead {
		c.release()
		return errAbandoned
	}
	return nil
}

// errAbandoned is a connection that broke before Accept could return it.
var errAbandoned = errors.New("rsocket: the peer abandoned the connection during its set-up")

// testHookAccepted, if set (tests only), runs in Accept once the CM
// reported a connection ESTABLISHED, before it is started and checked.
var testHookAccepted func(*Conn)

// Close stops listening; a blocked Accept returns net.ErrClosed.
// Connections already accepted stay open. Close returns once the Accept
// calls under way have returned.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.accepting.Wait()
	return l.l.Close()
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }
