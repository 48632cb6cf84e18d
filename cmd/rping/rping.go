package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

var errInvalid = errors.New("invalid argument")

// errReported is an error rping has already printed in its own words.
var errReported = errors.New("rping: failed")

// reported prints msg to stderr as rdma-core's rping does and returns errReported.
func (o *options) reported(msg string) error {
	fmt.Fprintln(o.stderr, msg)
	return errReported
}

type options struct {
	server     int // -1 unset, 0 client, 1 server
	addr, src  string
	port       uint16
	size       int
	count      int
	verbose    int
	validate   bool
	debug      bool
	persistent bool
	tos        uint8
	setTOS     bool
	// stdout and stderr are where rping prints (the process's, or a
	// test's buffers).
	stdout, stderr io.Writer
}

func (o *options) debugf(format string, args ...any) {
	if o.debug {
		fmt.Fprintf(o.stderr, format, args...)
	}
}

// resolve parses an address or looks a host name up (getaddrinfo's role).
func resolve(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, nil
	}
	ips, err := net.LookupIP(s)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("getaddrinfo failed (%v) - invalid hostname or IP address", err)
	}
	a, _ := netip.AddrFromSlice(ips[0])
	return a.Unmap(), nil
}

// The rping wire message: where a buffer is, for the peer's RDMA.
const infoSize = 16

// Buffer layout in the one registered region.
const (
	offRecv  = 0
	offSend  = 64
	offRDMA  = 128
	sqDepth  = 16
	rqDepth  = 2
	wrRecv   = 1
	wrSend   = 2
	wrRDMA   = 3
	wrNudge  = 4
	maxPings = 0
)

// session is one connection's buffers and state (rping's struct rping_cb).
type session struct {
	o     *options
	conn  *rdmacm.Conn
	mem   *mmap.Region
	mr    *uverbs.MR
	start int // offset of the client's start_buf
	wc    []uverbs.WorkCompletion
	ctx   context.Context // done when the connection is
	// nudge: on iWARP, before the peer's first message, wait posts
	// nudgeOp every nudgeEvery (see nudgeEvery).
	nudge   bool
	nudgeOp uverbs.WROpcode
}

// watch makes s.ctx end when the CM reports the connection down.
func (s *session) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx = ctx
	go func() {
		<-s.conn.Done()
		cancel()
	}()
}

func (o *options) config() *rdmacm.Config {
	cfg := &rdmacm.Config{
		Cap:                uverbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries:          sqDepth * 2,
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
	}
	if o.setTOS {
		cfg.Setup = func(id *rdmacm.ID) error { return id.SetTOS(o.tos) }
	}
	return cfg
}

// setup registers the buffers and posts the first receive (rping_setup_buffers).
func (s *session) setup(c *rdmacm.Conn) error {
	s.conn = c
	s.start = offRDMA + s.o.size
	var err error
	if s.mem, err = mmap.Anonymous(s.start + s.o.size); err != nil {
		return err
	}
	if s.mr, err = c.PD().RegMR(s.mem.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite); err != nil {
		s.mem.Close()
		s.mem = nil
		return fmt.Errorf("rdma_buf reg_mr failed: %w", err)
	}
	s.wc = make([]uverbs.WorkCompletion, 1)
	return s.postRecv()
}

func (s *session) close() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.mr != nil {
		s.mr.Close()
	}
	if s.mem != nil {
		s.mem.Close()
	}
}

func (s *session) sge(off, n int) []uverbs.SGE {
	return []uverbs.SGE{{Addr: s.mr.Addr() + uint64(off), Length: uint32(n), LKey: s.mr.LKey()}}
}

func (s *session) postRecv() error {
	_, err := s.conn.QP.PostRecv([]uverbs.RecvWR{{ID: wrRecv, SGL: s.sge(offRecv, infoSize)}})
	return err
}

// sendInfo sends {addr, rkey, size} of the buffer at off (rping_format_send).
func (s *session) sendInfo(off int) error {
	b := s.mem.Bytes()[offSend:]
	binary.BigEndian.PutUint64(b[0:], s.mr.Addr()+uint64(off))
	binary.BigEndian.PutUint32(b[8:], s.mr.RKey())
	binary.BigEndian.PutUint32(b[12:], uint32(s.o.size))
	return s.send()
}

func (s *session) send() error {
	_, err := s.conn.QP.PostSend([]uverbs.SendWR{{ID: wrSend, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: s.sge(offSend, infoSize)}})
	return err
}

var errDisconnected = errors.New("disconnected")

// next returns the next completion that is not a SEND's (rping's CQ
// thread only logs those), or errDisconnected once the CM said so.
func (s *session) next() (uverbs.WorkCompletion, error) {
	for {
		if _, err := s.wait(); err != nil {
			if s.ctx.Err() != nil {
				return uverbs.WorkCompletion{}, errDisconnected
			}
			return uverbs.WorkCompletion{}, err
		}
		wc := s.wc[0]
		s.o.debugf("completion: id %d opcode %v status %v\n", wc.ID, wc.Opcode, wc.Status)
		if wc.Status != uverbs.WCSuccess {
			if wc.Status == uverbs.WCWRFlushErr {
				select {
				case <-s.conn.Done():
					return wc, errDisconnected
				default:
				}
				continue
			}
			return wc, fmt.Errorf("cq completion failed status %d", wc.Status)
		}
		if wc.Opcode == uverbs.WCSend {
			s.o.debugf("send completion\n")
			continue
		}
		if wc.ID == wrNudge {
			continue
		}
		if wc.Opcode == uverbs.WCRecv {
			s.nudge = false
			if wc.ByteLen != infoSize {
				return wc, s.o.reported(fmt.Sprintf("Received bogus data, size %d", wc.ByteLen))
			}
			if err := s.postRecv(); err != nil {
				return wc, fmt.Errorf("post recv error: %w", err)
			}
		}
		return wc, nil
	}
}

// nudgeEvery is how long either side on iWARP waits for the peer's first
// message before it nudges. siw's accept (siw_accept in Linux's siw_cm.c,
// 6.1 to 7.x) sends the MPA reply before it hands the socket's receive
// callback to the QP: a first message that arrives in between stays unread
// in the server's socket until more data comes, and server and client each
// wait for the other (rping's client against rdma-core's server stalled on
// siw0 so, and rdma-core's client against this server: 4 connects in 30
// on Linux 7.3). The client nudges with an unsignaled zero-length RDMA
// WRITE: siw places nothing and completes nothing for it at the server
// (siw_proc_write; MPA's RTR message is one), and its arrival makes the QP
// read the socket. The server, which must not rely on its client doing so,
// nudges with an unsignaled zero-length RDMA READ: the client's siw
// answers it with a zero-length READ RESPONSE (siw_init_rresp; siw checks
// no memory for a zero-length SGE on either side, siw_check_sgl_tx and
// siw_proc_rresp) whose arrival does the same. That needs the client to
// have granted an IRD (rping's client grants 1; the READ sink is an empty
// SGE) and it may only be sent once the client's kernel has taken the MPA
// reply (an FPDU right behind the reply fails siw's connect,
// siw_recv_mpa_rr): a second after the accept returned, the reply, sent
// before it returned, has long been read there.
const nudgeEvery = time.Second

// nudgeOff: GOVERBS_SIW_NUDGE=0 turns the nudges off (the rig's tests
// show the hang they cure with it).
var nudgeOff = os.Getenv("GOVERBS_SIW_NUDGE") == "0"

// nudges counts the nudges posted (the rig's tests read it).
var nudges atomic.Int64

// wait waits for the next completion, nudging while s.nudge holds.
func (s *session) wait() (int, error) {
	for s.nudge && !nudgeOff {
		ctx, cancel := context.WithTimeout(s.ctx, nudgeEvery)
		n, err := s.conn.CQ.Wait(ctx, s.wc)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || s.ctx.Err() != nil {
			return n, err
		}
		_, _ = s.conn.QP.PostSend([]uverbs.SendWR{{ID: wrNudge, Opcode: s.nudgeOp}}) // a full send queue: next turn
		nudges.Add(1)
	}
	return s.conn.CQ.Wait(s.ctx, s.wc)
}

// stateDisconnected is DISCONNECTED in rdma-core rping's enum test_state,
// the state its "wait for" line names when the connection went down.
const stateDisconnected = 10

// await waits for the completion of opcode that ends rping's state what
// (the peer's next message, or this side's RDMA). If the connection went
// down instead, it prints rping's line for that ("wait for RDMA_READ_ADV
// state 10": a server's normal end, or a drop mid-run) and returns
// errDisconnected, which ends the run as a success, as rping does.
func (s *session) await(what string, opcode uverbs.WCOpcode) error {
	wc, err := s.next()
	if err == errDisconnected {
		fmt.Fprintf(s.o.stderr, "wait for %s state %d\n", what, stateDisconnected)
	}
	if err != nil {
		return err
	}
	if wc.Opcode != opcode {
		return fmt.Errorf("wait for %s: completion %v", what, wc.Opcode)
	}
	return nil
}

// watchDisconnect prints rping's disconnect message when DISCONNECTED comes.
func (s *session) watchDisconnect(side string) {
	go func() {
		ev, err := s.conn.NextEvent(context.Background())
		if err == nil && ev.Type == rdmacm.EventDisconnected {
			fmt.Fprintf(s.o.stderr, "%s DISCONNECT EVENT...\n", side)
		} else if err == nil && ev.Type == rdmacm.EventDeviceRemoval {
			fmt.Fprintf(s.o.stderr, "cma detected device removal!!!!\n")
		}
	}()
}

func runClient(o *options) error {
	if o.addr == "" {
		usage(o.stdout)
		return errInvalid
	}
	dst, err := resolve(o.addr)
	if err != nil {
		return err
	}
	cfg := o.config()
	if o.src != "" {
		src, err := resolve(o.src)
		if err != nil {
			return err
		}
		cfg.Source = netip.AddrPortFrom(src, 0)
	}
	s := &session{o: o}
	defer s.close()
	cfg.Prepare = s.setup
	c, err := rdmacm.Dial(context.Background(), netip.AddrPortFrom(dst, o.port), cfg)
	if err != nil {
		if ev, ok := rdmacm.Rejected(err); ok {
			return fmt.Errorf("cma event %v, error %d", ev.Type, ev.Status)
		}
		var ee *rdmacm.EventError
		if errors.As(err, &ee) {
			return fmt.Errorf("cma event %v, error %d", ee.Event.Type, ee.Event.Status)
		}
		return err
	}
	s.conn = c
	s.nudge, s.nudgeOp = c.ID.Device().Transport == uverbs.TransportIWARP, uverbs.WRRDMAWrite
	s.watch()
	s.watchDisconnect("client")
	o.debugf("rmda_connect successful\n")
	err = s.client()
	o.debugf("rping_test_client done\n")
	if err == errDisconnected {
		return nil // already down; rping's status is 0 then too
	}
	if err != nil {
		return err
	}
	return c.Disconnect()
}

// client is rping_test_client.
func (s *session) client() error {
	mem := s.mem.Bytes()
	start := byte(65)
	startBuf := mem[s.start : s.start+s.o.size]
	rdmaBuf := mem[offRDMA : offRDMA+s.o.size]
	for ping := 0; s.o.count == 0 || ping < s.o.count; ping++ {
		cc := copy(startBuf, fmt.Sprintf("rdma-ping-%d: ", ping))
		c := start
		for i := cc; i < len(startBuf); i++ {
			startBuf[i] = c
			c++
			if c > 122 {
				c = 65
			}
		}
		start++
		if start > 122 {
			start = 65
		}
		startBuf[len(startBuf)-1] = 0
		if err := s.sendInfo(s.start); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if err := s.await("RDMA_WRITE_ADV", uverbs.WCRecv); err != nil {
			return err
		}
		if err := s.sendInfo(offRDMA); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if err := s.await("RDMA_WRITE_COMPLETE", uverbs.WCRecv); err != nil {
			return err
		}
		if s.o.validate && !bytes.Equal(startBuf, rdmaBuf) {
			return s.o.reported("data mismatch!")
		}
		if s.o.verbose > 0 {
			fmt.Fprintf(s.o.stdout, "ping data: %s\n", cstring(rdmaBuf))
		}
	}
	return nil
}

func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

func runServer(o *options) error {
	var addr netip.Addr
	if o.addr != "" {
		var err error
		if addr, err = resolve(o.addr); err != nil {
			return err
		}
	}
	l, err := rdmacm.Listen(netip.AddrPortFrom(addr, o.port), o.config())
	if err != nil {
		return fmt.Errorf("rdma_bind_addr: %w", err)
	}
	defer l.Close()
	o.debugf("rdma_listen\n")
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		r, err := l.Accept(context.Background())
		if err != nil {
			return err
		}
		if !o.persistent {
			return serve(o, r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(o, r); err != nil {
				fmt.Fprintln(o.stderr, err)
			}
		}()
	}
}

// serve is rping_run_server after the connect request.
func serve(o *options, r *rdmacm.ConnRequest) error {
	s := &session{o: o}
	defer s.close()
	// The listener's Config has no Prepare: set up on the request's own copy.
	c, err := r.AcceptWith(context.Background(), nil, func(c *rdmacm.Conn) error { return s.setup(c) })
	if err != nil {
		return fmt.Errorf("rdma_accept: %w", err)
	}
	s.conn = c
	// On iWARP the negotiated ORD is ESTABLISHED's responder_resources
	// (Linux's cma_iw_handler gives siw's ord there), its IRD the
	// initiator_depth; a READ needs both ends' consent.
	s.nudge = c.ID.Device().Transport == uverbs.TransportIWARP && c.Param.ResponderResources >= 1 && c.Param.InitiatorDepth >= 1
	s.nudgeOp = uverbs.WRRDMARead
	s.watch()
	s.watchDisconnect("server")
	o.debugf("accepting client connection request\n")
	err = s.server()
	if err == errDisconnected {
		return nil
	}
	return err
}

// server is rping_test_server.
func (s *session) server() error {
	mem := s.mem.Bytes()
	rdmaBuf := mem[offRDMA : offRDMA+s.o.size]
	for {
		if err := s.await("RDMA_READ_ADV", uverbs.WCRecv); err != nil {
			return err
		}
		info := mem[offRecv : offRecv+infoSize]
		raddr, rkey, rlen := binary.BigEndian.Uint64(info), binary.BigEndian.Uint32(info[8:]), binary.BigEndian.Uint32(info[12:])
		s.o.debugf("Received rkey %x addr %x len %d from peer\n", rkey, raddr, rlen)
		if int(rlen) > s.o.size {
			return fmt.Errorf("peer's buffer (%d bytes) is larger than -S %d", rlen, s.o.size)
		}
		if _, err := s.conn.QP.PostSend([]uverbs.SendWR{{ID: wrRDMA, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
			SGL: s.sge(offRDMA, int(rlen)), RemoteAddr: raddr, RKey: rkey}}); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if err := s.await("RDMA_READ_COMPLETE", uverbs.WCRDMARead); err != nil {
			return err
		}
		if s.o.verbose > 0 {
			fmt.Fprintf(s.o.stdout, "server ping data: %s\n", cstring(rdmaBuf))
		}
		if err := s.send(); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if err := s.await("RDMA_WRITE_ADV", uverbs.WCRecv); err != nil {
			return err
		}
		raddr, rkey = binary.BigEndian.Uint64(info), binary.BigEndian.Uint32(info[8:])
		n := len(cstring(rdmaBuf)) + 1
		if _, err := s.conn.QP.PostSend([]uverbs.SendWR{{ID: wrRDMA, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: s.sge(offRDMA, n), RemoteAddr: raddr, RKey: rkey}}); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
		if err := s.await("RDMA_WRITE_COMPLETE", uverbs.WCRDMAWrite); err != nil {
			return err
		}
		if err := s.send(); err != nil {
			return fmt.Errorf("post send error %w", err)
		}
	}
}
