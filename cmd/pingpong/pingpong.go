package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/goverbs/goverbs/internal/inet"
	"github.com/goverbs/goverbs/internal/rawconn"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Work request ids, as the examples number them: each completion clears
// its bit in a QP's pending set, and the next send goes out when both the
// last send and the last receive have completed.
const (
	recvID = 1
	sendID = 2
)

// udQKey is the Q_Key ibv_ud_pingpong uses.
const udQKey = 0x11111111

// grhLen is the space a UD receive leaves for the GRH in front of the data.
const grhLen = 40

// session is one run: the verbs objects and the buffers.
//
// Memory: one mapping, registered once, holds a receive area (where every
// receive lands: size bytes, plus the GRH for UD) and, a page further on,
// a send area. The client sends from its send area, which holds the
// payload rdma-core's client sends; the server echoes what it received,
// from the receive area, as rdma-core's server does (it has one buffer).
// The receive areas start out holding a byte no payload has, so -c finds
// every byte that did not arrive, not only the first of each page.
type session struct {
	c   config
	out io.Writer

	ctx  *uverbs.Context
	ch   *uverbs.CompChannel
	pd   *uverbs.PD
	mem  *mmap.Region
	mr   *uverbs.MR
	cq   *uverbs.CQ
	srq  *uverbs.SRQ
	qps  []*uverbs.QP
	ah   *uverbs.AH
	port uverbs.PortAttr
	// xconn is the address exchange's TCP connection, closed with the
	// session: rdma-core closes it before the loop, but a close is an
	// ordinary syscall, which would wake Go's runtime monitor for the loop.
	xconn net.Conn

	recvLen    int // bytes per receive
	payloadOff int // where the payload starts in the receive area (the GRH's length for UD)
	sendOff    int // the send area's offset in mem
	sendFlags  uverbs.SendFlags

	recvs []uverbs.RecvWR   // rx_depth identical receives, posted in batches
	sends [][]uverbs.SendWR // one ready send per QP
}

// poison fills receive areas before anything arrives; no payload has it.
const poison = 0xa5

// payloadByte is byte i of the payload rdma-core's client sends: its
// buffer's fill (0x7b for rc and ud, 0 for srq) with, under -c, the first
// byte of every page set to i / page_size % sizeof(char), which is 0.
func (s *session) payloadByte(i int) byte {
	if s.c.mode == modeSRQ || (s.c.validate && i%os.Getpagesize() == 0) {
		return 0
	}
	return 0x7b
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// pingpong runs the whole program after the command line: set up, exchange
// addresses, ping-pong, print the figures, tear down.
func pingpong(c config, out io.Writer) (err error) {
	s := &session{c: c, out: out}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()
	if err := s.init(); err != nil {
		return err
	}
	if err := s.postRecv(c.rxDepth); err != nil {
		return err
	}
	mine, err := s.localDests()
	if err != nil {
		return err
	}
	for _, d := range mine[:s.numQP()] {
		s.printDest("local address: ", d, c.mode == modeUD)
	}
	if c.mode == modeSRQ {
		// srq_pingpong always exchanges MAX_QP addresses; the rest are zeros.
		mine = append(mine, make([]dest, maxQP-len(mine))...)
	}
	var remote []dest
	if c.server != "" {
		remote, s.xconn, err = exchangeClient(c.server, c.tcpPort, mine)
	} else {
		remote, s.xconn, err = exchangeServer(c.tcpPort, mine, func(x net.Conn, r []dest) error {
			if err := s.connect(x, mine, r); err != nil {
				return fmt.Errorf("%v\nCouldn't connect to remote QP", err)
			}
			return nil
		})
	}
	if err != nil {
		return err
	}
	remote = remote[:s.numQP()]
	for _, d := range remote {
		s.printDest("remote address:", d, false)
	}
	if c.server != "" {
		if err := s.connect(s.xconn, mine, remote); err != nil {
			return err
		}
	}
	return s.loop(remote)
}

func (s *session) numQP() int {
	if s.c.mode == modeSRQ {
		return s.c.numQP
	}
	return 1
}

// init is pp_init_ctx: device, channel, PD, memory, CQ, SRQ, QPs in INIT.
func (s *session) init() error {
	c := s.c
	devs, err := uverbs.Devices()
	if err != nil {
		return failf("Failed to get IB devices list: %v", err)
	}
	var dev *uverbs.Device
	for i := range devs {
		if c.ibDev == "" || devs[i].Name == c.ibDev {
			dev = &devs[i]
			break
		}
	}
	switch {
	case dev == nil && c.ibDev == "":
		return failure("No IB devices found")
	case dev == nil:
		return failf("IB device %s not found", c.ibDev)
	}
	if s.ctx, err = uverbs.Open(*dev); err != nil {
		return failf("Couldn't get context for %s: %v", dev.Name, err)
	}
	if c.mode == modeUD {
		p, err := s.ctx.QueryPort(c.ibPort)
		if err != nil {
			return failf("Unable to query port info for port %d: %v", c.ibPort, err)
		}
		if mtu := p.ActiveMTU.Bytes(); c.size > mtu {
			return failf("Requested size larger than port MTU (%d)", mtu)
		}
	}
	if c.events {
		if s.ch, err = s.ctx.CreateCompChannel(); err != nil {
			return failf("Couldn't create completion channel: %v", err)
		}
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return failf("Couldn't allocate PD: %v", err)
	}

	page := os.Getpagesize()
	s.recvLen = c.size
	if c.mode == modeUD {
		s.recvLen, s.payloadOff = c.size+grhLen, grhLen
	}
	s.sendOff = roundUp(max(s.recvLen, 1), page)
	if s.mem, err = mmap.Anonymous(s.sendOff + roundUp(max(c.size, 1), page)); err != nil {
		return failf("Couldn't allocate work buf: %v", err)
	}
	b := s.mem.Bytes()
	for i := range s.sendOff {
		b[i] = poison
	}
	for i := range c.size {
		b[s.sendOff+i] = s.payloadByte(i)
	}
	if s.mr, err = s.pd.RegMR(b, uverbs.AccessLocalWrite); err != nil {
		return failf("Couldn't register MR: %v", err)
	}

	cqe := c.rxDepth + 1
	if c.mode == modeSRQ {
		cqe = c.rxDepth + c.numQP
	}
	if s.cq, err = s.ctx.CreateCQ(cqe, uverbs.CQOptions{Channel: s.ch}); err != nil {
		return failf("Couldn't create CQ: %v", err)
	}
	qpCap := uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(c.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}
	if c.mode == modeSRQ {
		if s.srq, err = s.pd.CreateSRQ(uverbs.SRQInit{MaxWR: uint32(c.rxDepth), MaxSGE: 1}); err != nil {
			return failf("Couldn't create SRQ: %v", err)
		}
		qpCap.MaxRecvWR, qpCap.MaxRecvSGE = 0, 0
	}
	typ := uverbs.QPTypeRC
	switch c.mode {
	case modeUD:
		typ = uverbs.QPTypeUD
	case modeUC:
		typ = uverbs.QPTypeUC
	}
	s.sendFlags = uverbs.SendSignaled
	for i := range s.numQP() {
		qp, err := s.pd.CreateQP(uverbs.QPInit{Type: typ, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq, Cap: qpCap})
		if err != nil {
			if c.mode == modeSRQ {
				return failf("Couldn't create QP[%d]: %v", i, err)
			}
			return failf("Couldn't create QP: %v", err)
		}
		s.qps = append(s.qps, qp)
		if int(qp.Cap().MaxInlineData) >= c.size {
			s.sendFlags |= uverbs.SendInline
		}
	}
	for i, qp := range s.qps {
		a := &uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: uint8(c.ibPort)}
		mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
		if c.mode == modeUD {
			a.QKey, mask = udQKey, mask|uverbs.QPAttrQKey
		} else {
			mask |= uverbs.QPAttrAccessFlags
		}
		if err := qp.Modify(a, mask); err != nil {
			if c.mode == modeSRQ {
				return failf("Failed to modify QP[%d] to INIT: %v", i, err)
			}
			return failf("Failed to modify QP to INIT: %v", err)
		}
	}

	sge := []uverbs.SGE{{Addr: s.addr(0), Length: uint32(s.recvLen), LKey: s.mr.LKey()}}
	s.recvs = make([]uverbs.RecvWR, c.rxDepth)
	for i := range s.recvs {
		s.recvs[i] = uverbs.RecvWR{ID: recvID, SGL: sge}
	}
	return nil
}

// addr is the address of byte off of the mapping.
func (s *session) addr(off int) uint64 { return uint64(s.mem.Addr()) + uint64(off) }

// postRecv posts n receives (to the SRQ, or the one QP) and fails unless
// all of them went in, as pp_post_recv's callers do.
func (s *session) postRecv(n int) error {
	if n <= 0 {
		return nil
	}
	var got int
	var err error
	if s.srq != nil {
		got, err = s.srq.PostRecv(s.recvs[:n])
	} else {
		got, err = s.qps[0].PostRecv(s.recvs[:n])
	}
	if got < n {
		return failf("Couldn't post receive (%d): %v", got, err)
	}
	return nil
}

// localDests are this side's addresses: LID, QPN, a random PSN, and the
// GID at -g (zeros without -g).
func (s *session) localDests() ([]dest, error) {
	c := s.c
	var err error
	if s.port, err = s.ctx.QueryPort(c.ibPort); err != nil {
		return nil, failf("Couldn't get port info: %v", err)
	}
	if c.mode != modeUD && s.port.LinkLayer != uverbs.LinkLayerEthernet && s.port.LID == 0 {
		return nil, failure("Couldn't get local LID")
	}
	var gid [16]byte
	if c.gidx >= 0 {
		e, err := s.ctx.QueryGID(c.ibPort, c.gidx)
		switch {
		case errors.Is(err, unix.ENODATA):
			// libibverbs' ibv_query_gid: an empty slot reads as zeros
		case err != nil && (c.mode == modeRC || c.mode == modeUC):
			return nil, failf("can't read sgid of index %d: %v", c.gidx, err)
		case err != nil:
			return nil, failf("Could not get local gid for gid index %d: %v", c.gidx, err)
		default:
			gid = e.GID
		}
	}
	ds := make([]dest, len(s.qps))
	for i, qp := range s.qps {
		ds[i] = dest{lid: s.port.LID, qpn: qp.QPN(), psn: rand.Uint32() & 0xffffff, gid: gid}
	}
	return ds, nil
}

// printDest prints an address line as the examples do (ud_pingpong's own
// line has a colon before "GID").
func (s *session) printDest(what string, d dest, udLocal bool) {
	sep := ","
	if udLocal {
		sep = ":"
	}
	fmt.Fprintf(s.out, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", what, d.lid, d.qpn, d.psn, sep, inet.Ntop6(d.gid))
}

// endpoint is d as a uverbs.Endpoint on this session's port: addressed
// with a GRH when d's GID has an interface id, LID-routed otherwise, as
// pp_connect_ctx decides.
func (s *session) endpoint(d dest) uverbs.Endpoint {
	e := uverbs.Endpoint{QPN: d.qpn, PSN: d.psn, LID: d.lid, Port: s.c.ibPort, GIDIndex: s.c.gidx}
	if d.hasInterfaceID() {
		e.GID = d.gid
	}
	return e
}

// connectOptions are pp_connect_ctx's: the -m path MTU, the -l service
// level and a GRH hop limit of 1; the RC timers are libibverbs' examples',
// uverbs.ConnectOptions' defaults.
func (s *session) connectOptions() uverbs.ConnectOptions {
	return uverbs.ConnectOptions{MTU: s.c.mtu, SL: uint8(s.c.sl), HopLimit: 1}
}

// connect is pp_connect_ctx: every QP (in INIT) to RTR and RTS towards its
// peer (and, for UD, the address handle), then the sends are built; x is
// the address exchange's connection (rawconn.Resolved).
func (s *session) connect(x net.Conn, mine, remote []dest) error {
	c := s.c
	o := s.connectOptions()
	if c.mode == modeUD {
		local := s.endpoint(mine[0])
		if err := s.qps[0].Connect(local, uverbs.Endpoint{}, o); err != nil {
			return failf("Failed to modify QP to RTR/RTS: %v", err)
		}
		var err error
		if s.ah, err = s.pd.CreateAH(local.PathTo(s.endpoint(remote[0]), o)); err != nil {
			return failf("Failed to create AH: %v", err)
		}
	} else {
		for i, qp := range s.qps {
			if remote[i].qpn == 0 {
				return failf("the peer sent no QP number for QP[%d]: does it use -q %d too?", i, c.numQP)
			}
			name := "QP"
			if c.mode == modeSRQ {
				name = fmt.Sprintf("QP[%d]", i)
			}
			// A peer whose GID is the address the exchange just reached, or
			// this side's own GID (a loopback): the RTR modify finds the MAC
			// at once.
			o.Resolved = rawconn.Resolved(x, mine[i].gid, remote[i].gid)
			if err := qp.Connect(s.endpoint(mine[i]), s.endpoint(remote[i]), o); err != nil {
				return failf("Failed to modify %s to RTR/RTS: %v", name, err)
			}
		}
	}
	// The client sends its payload; the server echoes what it received.
	from := s.addr(s.sendOff)
	if c.server == "" {
		from = s.addr(s.payloadOff)
	}
	s.sends = make([][]uverbs.SendWR, len(s.qps))
	for i := range s.qps {
		wr := uverbs.SendWR{ID: sendID, Opcode: uverbs.WRSend, Flags: s.sendFlags,
			SGL: []uverbs.SGE{{Addr: from, Length: uint32(c.size), LKey: s.mr.LKey()}}}
		if c.mode == modeUD {
			wr.UD = uverbs.UDDest{AH: s.ah, RemoteQPN: remote[0].qpn, QKey: udQKey}
		}
		s.sends[i] = []uverbs.SendWR{wr}
	}
	return nil
}

func (s *session) postSend(i int) error {
	if n, err := s.qps[i].PostSend(s.sends[i]); n != 1 || err != nil {
		return failf("Couldn't post send: %v", err)
	}
	return nil
}

// loop is the examples' main loop: wait for completions (polling, or
// parked on the completion channel with -e), count them, keep the receive
// queue full, and send again on a QP once its last send and receive are
// both done; then print the figures and, with -c, check the payload.
func (s *session) loop(remote []dest) error {
	c := s.c
	pending := make([]int, len(s.qps))
	for i := range pending {
		pending[i] = recvID
	}
	if c.server != "" {
		for i := range s.qps {
			if err := s.postSend(i); err != nil {
				return err
			}
			pending[i] |= sendID
		}
	}
	refillAt := 1 // rc and ud refill when at most one receive is left, srq at num_qp
	nwc := 2
	if c.mode == modeSRQ {
		refillAt, nwc = c.numQP, c.numQP+c.rxDepth
	}
	wcs := make([]uverbs.WorkCompletion, nwc)
	routs := c.rxDepth
	rcnt, scnt := 0, 0
	ctx := context.Background()

	start := time.Now()
	for rcnt < c.iters || scnt < c.iters {
		var n int
		var err error
		if c.events {
			n, err = s.cq.Wait(ctx, wcs)
		} else {
			for n == 0 && err == nil {
				n, err = s.cq.Poll(wcs)
			}
		}
		if err != nil {
			return failf("poll CQ failed: %v", err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != uverbs.WCSuccess {
				return failf("Failed status %s (%d) for wr_id %d", wc.Status, wc.Status, int(wc.ID))
			}
			qi := 0
			if c.mode == modeSRQ {
				qi = -1
				for i, qp := range s.qps {
					if qp.QPN() == wc.QPNum {
						qi = i
						break
					}
				}
				if qi < 0 {
					return failf("Couldn't find QPN %06x", wc.QPNum)
				}
			}
			switch wc.ID {
			case sendID:
				scnt++
			case recvID:
				if c.validate && int(wc.ByteLen) != s.recvLen {
					return failf("receive %d completed with %d bytes, expected %d", rcnt+1, wc.ByteLen, s.recvLen)
				}
				if routs--; routs <= refillAt {
					if err := s.postRecv(c.rxDepth - routs); err != nil {
						return err
					}
					routs = c.rxDepth
				}
				rcnt++
			default:
				return failf("Completion for unknown wr_id %d", int(wc.ID))
			}
			pending[qi] &^= int(wc.ID)
			if scnt < c.iters && pending[qi] == 0 {
				if err := s.postSend(qi); err != nil {
					return err
				}
				pending[qi] = recvID | sendID
			}
		}
	}
	elapsed := time.Since(start)

	// The examples compute in a C float from gettimeofday's microseconds.
	usec := float32(elapsed.Microseconds())
	bytes := int64(c.size) * int64(c.iters) * 2
	fmt.Fprintf(s.out, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, float64(usec)/1e6, float64(bytes)*8/float64(usec))
	fmt.Fprintf(s.out, "%d iters in %.2f seconds = %.2f usec/iter\n", c.iters, float64(usec)/1e6, float64(usec/float32(c.iters)))
	if c.validate && c.iters > 0 {
		return s.check()
	}
	return nil
}

// check compares the last payload received with what rdma-core's client
// sends, byte for byte, and reports each page with a difference as
// rdma-core does ("invalid data in page N"). rdma-core checks only the
// first byte of each page, and only on the server; goverbs checks every
// byte on both sides (the server's reply is the client's payload echoed).
func (s *session) check() error {
	b := s.mem.Bytes()[s.payloadOff : s.payloadOff+s.c.size]
	page := os.Getpagesize()
	bad := 0
	for p := 0; p < len(b); p += page {
		for i := p; i < min(p+page, len(b)); i++ {
			if b[i] != s.payloadByte(i) {
				fmt.Fprintf(s.out, "invalid data in page %d\n", p/page)
				bad++
				break
			}
		}
	}
	if bad > 0 {
		return failf("payload check failed: %d of %d pages differ from what the client sent", bad, (len(b)+page-1)/page)
	}
	return nil
}

// close is pp_close_ctx: everything in reverse order; the first failure
// is reported as the examples word it.
func (s *session) close() error {
	var first error
	note := func(err error, what string) {
		if err != nil && first == nil {
			first = failf("Couldn't %s: %v", what, err)
		}
	}
	for i := len(s.qps) - 1; i >= 0; i-- {
		note(s.qps[i].Close(), "destroy QP")
	}
	if s.srq != nil {
		note(s.srq.Close(), "destroy SRQ")
	}
	if s.cq != nil {
		note(s.cq.Close(), "destroy CQ")
	}
	if s.mr != nil {
		note(s.mr.Close(), "deregister MR")
	}
	if s.ah != nil {
		note(s.ah.Close(), "destroy AH")
	}
	if s.pd != nil {
		note(s.pd.Close(), "deallocate PD")
	}
	if s.ch != nil {
		note(s.ch.Close(), "destroy completion channel")
	}
	if s.ctx != nil {
		note(s.ctx.Close(), "release context")
	}
	if s.mem != nil {
		note(s.mem.Close(), "unmap the work buffer")
	}
	if s.xconn != nil {
		s.xconn.Close() // the peer is done with it; nothing to report
	}
	return first
}
