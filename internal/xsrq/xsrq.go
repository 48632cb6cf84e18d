// Package xsrq is cmd/pingpong's xsrq mode: rdma-core's ibv_xsrq_pingpong
// (libibverbs/examples/xsrq_pingpong.c, rdma-core 44) in Go, with the same
// flags, TCP exchange, output lines and termination handshake, so either
// side can be goverbs or rdma-core. It lives outside package main so that
// the mlx5 device model's tests (the only XRC device goverbs can test on)
// can run both sides in one process.
//
// Each side opens the XRC domain of one file (/tmp/xrc_domain), creates an
// XRC SRQ on its receive CQ and, per client, an XRC target QP (receives)
// and an XRC initiator QP (sends). The server accepts -c clients; per
// client each side sends 66-byte messages "%04x:%06x:%06x:%06x:%06x:%32s"
// (LID, target QPN, initiator QPN, PSN, SRQ number, GID), the client
// first. The server then sends one message to each client, round robin over
// its initiator QPs, each naming the client's SRQ; every receive is answered
// until each client got -n; only a client's last send is signaled. At the
// end the client sends "END\0" and waits for the server's, so no message
// still in flight towards a closing SRQ is lost.
package xsrq

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"

	"github.com/goverbs/goverbs/internal/hexaddr"
	"github.com/goverbs/goverbs/internal/inet"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// Config is the command line of ibv_xsrq_pingpong.
type Config struct {
	TCPPort  int        // -p (18515)
	IBPort   int        // -i (1)
	Size     int        // -s (4096)
	MTU      uverbs.MTU // -m (1024)
	Clients  int        // -c: clients the server serves (1; a client is one)
	NumTests int        // -n: messages each way per client (5)
	SL       int        // -l
	Events   bool       // -e: sleep on CQ events
	GIDIndex int        // -g (-1: none)
	Server   string     // the server to connect to; "" runs a server
	// XRCDPath is the file whose XRC domain both sides of one host share
	// (rdma-core's /tmp/xrc_domain).
	XRCDPath string
	// Open opens the device (-d): the caller's device lookup.
	Open func() (*uverbs.Context, error)
}

// failure is an error whose text is the program's message.
type failure string

func (f failure) Error() string { return string(f) }

func failf(format string, args ...any) error { return failure(fmt.Sprintf(format, args...)) }

// msgSize is MSG_SIZE: the address message, NUL-padded.
const msgSize = 66

// termMsg is TERMINATION_MSG with its NUL (TERMINATION_MSG_SIZE bytes).
var termMsg = []byte("END\x00")

// dest is struct pingpong_dest's wire part.
type dest struct {
	lid            uint16
	recvQPN        uint32
	sendQPN        uint32
	psn            uint32 // the sender's PSN (recv_psn on its side)
	srqn           uint32
	gid            [16]byte
	sendPSN        uint32 // the PSN this side's initiator starts at
	ppCnt          int
	conn           net.Conn
	recvQP, sendQP *uverbs.QP
}

func (d *dest) encode() []byte {
	return hexaddr.Encode(msgSize, fmt.Sprintf("%04x:%06x:%06x:%06x:%06x", d.lid, d.recvQPN, d.sendQPN, d.psn, d.srqn), d.gid)
}

func decode(b []byte) (dest, error) {
	var v [5]uint64
	gid, err := hexaddr.Decode(b, v[:])
	if err != nil {
		return dest{}, err
	}
	return dest{lid: uint16(v[0]), recvQPN: uint32(v[1]), sendQPN: uint32(v[2]), psn: uint32(v[3]), srqn: uint32(v[4]), gid: gid}, nil
}

// session is struct pingpong_context.
type session struct {
	c       Config
	out     io.Writer
	ctx     *uverbs.Context
	ch      *uverbs.CompChannel
	pd      *uverbs.PD
	mem     *mmap.Region
	mr      *uverbs.MR
	file    *os.File
	xrcd    *uverbs.XRCD
	recvCQ  *uverbs.CQ
	sendCQ  *uverbs.CQ
	srq     *uverbs.SRQ
	lid     uint16
	lgid    [16]byte
	rem     []dest
	closers []func() error
}

// Run is ibv_xsrq_pingpong's main after option parsing; it prints what
// rdma-core prints and returns the failure.
func Run(c Config, out io.Writer) (err error) {
	if c.Server != "" {
		c.Clients = 1
	}
	s := &session{c: c, out: out, rem: make([]dest, c.Clients)}
	defer func() {
		for i := len(s.closers) - 1; i >= 0; i-- {
			s.closers[i]()
		}
		for _, d := range s.rem {
			if d.conn != nil {
				d.conn.Close()
			}
		}
	}()
	if err := s.init(); err != nil {
		return err
	}
	if err := s.postRecv(c.Clients); err != nil {
		return failf("Couldn't post receives")
	}
	if c.Server != "" {
		if err := s.clientConnect(); err != nil {
			return err
		}
	} else {
		if err := s.serverConnect(); err != nil {
			return err
		}
		for i := range s.rem {
			if err := s.postSend(i); err != nil {
				return err
			}
		}
	}
	if err := s.loop(); err != nil {
		return err
	}
	if c.Server != "" {
		err = s.exchangeEnd()
	} else {
		for i := range s.rem {
			if err = s.readEnd(i); err != nil {
				break
			}
		}
		for i := range s.rem {
			if err == nil {
				err = s.writeEnd(i)
			}
		}
	}
	if err != nil {
		return err
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			s.closers = s.closers[:i]
			return failf("Couldn't release resources: %v", err)
		}
	}
	s.closers = nil
	fmt.Fprintf(out, "success\n")
	return nil
}

func (s *session) onClose(f func() error) { s.closers = append(s.closers, f) }

func (s *session) init() error {
	c := s.c
	var err error
	if s.ctx, err = c.Open(); err != nil {
		return failf("Failed to open device: %v", err)
	}
	s.onClose(s.ctx.Close)
	p, err := s.ctx.QueryPort(c.IBPort)
	if err != nil {
		return failf("Failed to get port info: %v", err)
	}
	s.lid = p.LID
	if p.LinkLayer != uverbs.LinkLayerEthernet && s.lid == 0 {
		return failf("Couldn't get local LID")
	}
	page := os.Getpagesize()
	if s.mem, err = mmap.Anonymous((c.Size + page - 1) / page * page); err != nil {
		return failf("Couldn't allocate work buf.")
	}
	s.onClose(s.mem.Close)
	if c.Events {
		if s.ch, err = s.ctx.CreateCompChannel(); err != nil {
			return failf("Couldn't create completion channel")
		}
		s.onClose(s.ch.Close)
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return failf("Couldn't allocate PD")
	}
	s.onClose(s.pd.Close)
	if s.mr, err = s.pd.RegMR(s.mem.Bytes()[:max(c.Size, 1)], uverbs.AccessLocalWrite); err != nil {
		return failf("Couldn't register MR")
	}
	s.onClose(s.mr.Close)
	s.file, err = os.OpenFile(c.XRCDPath, os.O_RDONLY|os.O_CREATE, 0o440)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Couldn't create the file for the XRC Domain but not stopping %v\n", err)
		s.file = nil
	} else {
		s.onClose(s.file.Close)
	}
	if s.xrcd, err = s.ctx.OpenXRCD(uverbs.XRCDOptions{File: s.file, Create: true}); err != nil {
		return failf("Couldn't Open the XRC Domain: %v", err)
	}
	s.onClose(s.xrcd.Close)
	if s.recvCQ, err = s.ctx.CreateCQ(c.Clients, uverbs.CQOptions{Channel: s.ch}); err != nil {
		return failf("Couldn't create recv CQ")
	}
	s.onClose(s.recvCQ.Close)
	if s.sendCQ, err = s.ctx.CreateCQ(c.Clients, uverbs.CQOptions{}); err != nil {
		return failf("Couldn't create send CQ")
	}
	s.onClose(s.sendCQ.Close)
	if s.srq, err = s.pd.CreateSRQEx(uverbs.SRQInitEx{Type: uverbs.SRQTypeXRC, SRQInit: uverbs.SRQInit{MaxWR: uint32(c.Clients), MaxSGE: 1},
		XRCD: s.xrcd, CQ: s.recvCQ}); err != nil {
		return failf("Couldn't create SRQ: %v", err)
	}
	s.onClose(s.srq.Close)
	for i := range s.rem {
		d := &s.rem[i]
		if d.recvQP, err = s.xrcd.CreateTargetQP(); err != nil {
			return failf("Couldn't create recv QP[%d]: %v", i, err)
		}
		s.onClose(d.recvQP.Close)
		init := uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: uint8(c.IBPort), AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}
		if err := d.recvQP.Modify(&init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			return failf("Failed to modify recv QP[%d] to INIT", i)
		}
		if d.sendQP, err = s.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeXRCIni, SendCQ: s.sendCQ,
			Cap: uverbs.QPCap{MaxSendWR: uint32(c.Clients * c.NumTests), MaxSendSGE: 1}}); err != nil {
			return failf("Couldn't create send QP[%d]: %v", i, err)
		}
		s.onClose(d.sendQP.Close)
		init.AccessFlags = 0
		if err := d.sendQP.Modify(&init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			return failf("Failed to modify send QP[%d] to INIT", i)
		}
	}
	if c.GIDIndex >= 0 {
		g, err := s.ctx.QueryGID(c.IBPort, c.GIDIndex)
		if err != nil {
			return failf("can't read sgid of index %d", c.GIDIndex)
		}
		s.lgid = g.GID
	}
	return nil
}

func (s *session) postRecv(n int) error {
	for ; n > 0; n-- {
		if _, err := s.srq.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{{Addr: uint64(s.mem.Addr()), Length: uint32(s.c.Size), LKey: s.mr.LKey()}}}}); err != nil {
			return failf("Failed to post receive to SRQ")
		}
	}
	return nil
}

func (s *session) sendLocal(conn net.Conn, i int) error {
	d := &s.rem[i]
	d.sendPSN = rand.Uint32() & 0xffffff
	l := dest{lid: s.lid, recvQPN: d.recvQP.QPN(), sendQPN: d.sendQP.QPN(), psn: d.sendPSN, srqn: s.srq.SRQN(), gid: s.lgid}
	fmt.Fprintf(s.out, "%8s: LID %04x, QPN RECV %06x SEND %06x, PSN %06x, SRQN %06x, GID %s\n",
		"local", l.lid, l.recvQPN, l.sendQPN, l.psn, l.srqn, inet.Ntop6(l.gid))
	if _, err := conn.Write(l.encode()); err != nil {
		return failf("Couldn't send local address")
	}
	return nil
}

func (s *session) recvRemote(conn net.Conn, i int) error {
	b := make([]byte, msgSize)
	if _, err := io.ReadFull(conn, b); err != nil {
		return failf("Couldn't read remote address [%d]: %v", i, err)
	}
	r, err := decode(b)
	if err != nil {
		return failf("%v", err)
	}
	d := &s.rem[i]
	d.lid, d.recvQPN, d.sendQPN, d.psn, d.srqn, d.gid, d.conn = r.lid, r.recvQPN, r.sendQPN, r.psn, r.srqn, r.gid, conn
	fmt.Fprintf(s.out, "%8s: LID %04x, QPN RECV %06x SEND %06x, PSN %06x, SRQN %06x, GID %s\n",
		"remote", d.lid, d.recvQPN, d.sendQPN, d.psn, d.srqn, inet.Ntop6(d.gid))
	return nil
}

// connectQPs is connect_qps: the target to RTR and RTS towards the peer's
// initiator, the initiator to RTR and RTS towards the peer's target.
func (s *session) connectQPs(i int) error {
	c, d := s.c, &s.rem[i]
	av := uverbs.AHAttr{DLID: d.lid, SL: uint8(c.SL), PortNum: uint8(c.IBPort)}
	var zero [8]byte
	if [8]byte(d.gid[8:]) != zero {
		av.GRH = &uverbs.GlobalRoute{HopLimit: 5, DGID: d.gid, SGIDIndex: uint8(c.GIDIndex)}
	}
	rtr := uverbs.QPAttr{State: uverbs.QPStateRTR, DestQPN: d.sendQPN, PathMTU: c.MTU, RQPSN: d.psn, MinRNRTimer: 12, AH: av}
	if err := d.recvQP.Modify(&rtr, uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|
		uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRDAtomic|uverbs.QPAttrMinRNRTimer); err != nil {
		return failf("Failed to modify recv QP[%d] to RTR: %v", i, err)
	}
	rts := uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, SQPSN: d.sendPSN}
	if err := d.recvQP.Modify(&rts, uverbs.QPAttrState|uverbs.QPAttrTimeout|uverbs.QPAttrSQPSN); err != nil {
		return failf("Failed to modify recv QP[%d] to RTS: %v", i, err)
	}
	rtr = uverbs.QPAttr{State: uverbs.QPStateRTR, DestQPN: d.recvQPN, PathMTU: c.MTU, RQPSN: d.psn, AH: av}
	if err := d.sendQP.Modify(&rtr, uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|uverbs.QPAttrRQPSN); err != nil {
		return failf("Failed to modify send QP[%d] to RTR: %v", i, err)
	}
	rts = uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: d.sendPSN}
	if err := d.sendQP.Modify(&rts, uverbs.QPAttrState|uverbs.QPAttrTimeout|uverbs.QPAttrSQPSN|uverbs.QPAttrRetryCnt|
		uverbs.QPAttrRNRRetry|uverbs.QPAttrMaxQPRDAtomic); err != nil {
		return failf("Failed to modify send QP[%d] to RTS: %v", i, err)
	}
	return nil
}

func (s *session) clientConnect() error {
	conn, err := net.Dial("tcp", net.JoinHostPort(s.c.Server, strconv.Itoa(s.c.TCPPort)))
	if err != nil {
		return failf("Couldn't connect to %s:%d", s.c.Server, s.c.TCPPort)
	}
	s.rem[0].conn = conn
	if err := s.sendLocal(conn, 0); err != nil {
		return err
	}
	if err := s.recvRemote(conn, 0); err != nil {
		return err
	}
	return s.connectQPs(0)
}

func (s *session) serverConnect() error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(s.c.TCPPort))
	if err != nil {
		return failf("Couldn't listen to port %d", s.c.TCPPort)
	}
	defer l.Close()
	for i := range s.rem {
		conn, err := l.Accept()
		if err != nil {
			return failf("accept() failed for client %d", i)
		}
		s.rem[i].conn = conn
		if err := s.recvRemote(conn, i); err != nil {
			return err
		}
		if err := s.sendLocal(conn, i); err != nil {
			return err
		}
		if err := s.connectQPs(i); err != nil {
			return err
		}
	}
	return nil
}

// postSend is pp_post_send: the next message to client i, on the
// initiator QPs round robin, naming its SRQ; only its last is signaled.
func (s *session) postSend(i int) error {
	d := &s.rem[i]
	qpi := (i + d.ppCnt) % s.c.Clients
	d.ppCnt++
	var flags uverbs.SendFlags
	if d.ppCnt >= s.c.NumTests {
		flags = uverbs.SendSignaled
	}
	wr := uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSend, Flags: flags, RemoteSRQN: d.srqn,
		SGL: []uverbs.SGE{{Addr: uint64(s.mem.Addr()), Length: uint32(s.c.Size), LKey: s.mr.LKey()}}}
	if _, err := s.rem[qpi].sendQP.PostSend([]uverbs.SendWR{wr}); err != nil {
		return failf("Couldn't post send: %v", err)
	}
	return nil
}

// findQP is find_qp: the client whose target QP received.
func (s *session) findQP(qpn uint32) int {
	if s.c.Clients == 1 {
		return 0
	}
	for i := range s.rem {
		if s.rem[i].recvQP.QPN() == qpn {
			return i
		}
	}
	fmt.Fprintf(os.Stderr, "Unable to find qp %x\n", qpn)
	return 0
}

func (s *session) loop() error {
	c := s.c
	total := c.Clients * c.NumTests
	wc := make([]uverbs.WorkCompletion, 1)
	for cnt := 0; cnt < total; {
		var n int
		var err error
		if c.Events {
			n, err = s.recvCQ.Wait(context.Background(), wc)
		} else {
			n, err = s.recvCQ.Poll(wc)
		}
		if err != nil {
			return failf("Error polling cq %v", err)
		}
		if n == 0 {
			continue
		}
		if wc[0].Status != uverbs.WCSuccess {
			return failf("Work completion error %d", wc[0].Status)
		}
		if err := s.postRecv(n); err != nil {
			return err
		}
		qpi := s.findQP(wc[0].QPNum)
		if s.rem[qpi].ppCnt < c.NumTests {
			if err := s.postSend(qpi); err != nil {
				return err
			}
		}
		cnt += n
	}
	for cnt := 0; cnt < c.Clients; {
		n, err := s.sendCQ.Poll(wc)
		if err != nil {
			return failf("Error polling cq %v", err)
		}
		if n > 0 && wc[0].Status != uverbs.WCSuccess {
			return failf("Work completion error %d", wc[0].Status)
		}
		cnt += n
	}
	return nil
}

func (s *session) writeEnd(i int) error {
	if _, err := s.rem[i].conn.Write(termMsg); err != nil {
		return failf("Couldn't send termination ack")
	}
	return nil
}

func (s *session) readEnd(i int) error {
	b := make([]byte, len(termMsg))
	if _, err := io.ReadFull(s.rem[i].conn, b); err != nil {
		return failf("%d/%d: Couldn't read remote termination ack", 0, len(termMsg))
	}
	if string(b) != string(termMsg) {
		return failf("Invalid termination ack was accepted")
	}
	return nil
}

// exchangeEnd is the client's termination: send, then wait for the
// server's.
func (s *session) exchangeEnd() error {
	if err := s.writeEnd(0); err != nil {
		return err
	}
	return s.readEnd(0)
}
