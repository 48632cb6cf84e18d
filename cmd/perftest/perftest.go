package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/rawconn"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// udQKey is perftest's DEF_QKEY; udGRH the room a UD receive leaves for
// the GRH (UD_ADDITION).
const (
	udQKey = 0x11111111
	udGRH  = 40
)

// resultLine is perftest's RESULT_LINE.
const resultLine = "---------------------------------------------------------------------------------------\n"

// session is one run of a test: the exchange, the verbs objects, the
// buffer and the timestamps.
type session struct {
	c      config
	out    io.Writer
	errOut io.Writer
	comm   *comm

	ctx      *uverbs.Context
	dev      uverbs.Device
	port     uverbs.PortAttr
	ch       *uverbs.CompChannel
	pd       *uverbs.PD
	mem      *mmap.Region
	mr       *uverbs.MR
	sendCQ   *uverbs.CQ
	recvCQ   *uverbs.CQ // sendCQ itself except for send tests
	qps      []*uverbs.QP
	cmConns  []*rdmacm.Conn // -R: the connections the QPs belong to
	ahs      []*uverbs.AH
	mtu      uverbs.MTU // the path MTU both sides agreed on
	cycle    int        // cycle buffer: the larger page size of the two sides
	line     int        // the larger cache line size
	bufSize  int        // BUFF_SIZE: bytes of each QP's send area and of its receive area
	inline   int        // the inline size in use
	outReads int

	mine, remote []dest
	credit       *credits // ib_send_bw on iWARP: the receive credits

	posted, completed []int64 // stamps (see now), per iteration
	clock             *clock  // -D: the run's phases (nil: -n iterations)
	base              time.Time
	baseTicks         int64 // ticks() at base; 0: stamps are nanoseconds (tests)
}

// now is a timestamp: CPU ticks since the session began (perftest reads
// the TSC too), converted to nanoseconds by nsPerTick when reported. A
// tick costs no syscall, where a clock read is one whenever the kernel's
// clocksource has no vDSO read (hpet: the rig's 6.1 under TCG), once per
// iteration on the latency loops' critical path.
func (s *session) now() int64 {
	if s.baseTicks == 0 {
		return int64(time.Since(s.base))
	}
	return ticks() - s.baseTicks
}

// nsPerTick converts now's stamps into nanoseconds: the monotonic clock's
// time since the session began over the ticks counted meanwhile.
func (s *session) nsPerTick() float64 {
	if s.baseTicks == 0 {
		return 1
	}
	t, ns := ticks()-s.baseTicks, time.Since(s.base)
	if t <= 0 || ns <= 0 {
		return 1
	}
	return float64(ns) / float64(t)
}

// toNs converts stamps into nanoseconds in place.
func (s *session) toNs(stamps ...[]int64) {
	if s.baseTicks == 0 {
		return
	}
	k := s.nsPerTick()
	for _, v := range stamps {
		for i := range v {
			v[i] = int64(float64(v[i]) * k)
		}
	}
}

func perftest(c config, out, errOut io.Writer) (err error) {
	s := &session{c: c, out: out, errOut: errOut, base: time.Now(), baseTicks: ticks()}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()
	for _, n := range c.notes {
		fmt.Fprint(out, resultLine)
		fmt.Fprintln(out, n)
	}
	if !c.commCM {
		if err := s.open(); err != nil {
			return err
		}
	}
	if c.server == "" {
		fmt.Fprintf(out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		if c.commCM {
			s.comm, err = cmAccept(c.port, c.sourceIP)
		} else {
			s.comm, err = accept(c.port)
		}
	} else if c.commCM {
		s.comm, err = cmDial(c.server, c.port, c.sourceIP)
	} else {
		s.comm, err = dial(c.server, c.port)
	}
	if err != nil {
		return failf("Unable to init the socket connection: %v", err)
	}
	s.comm.withGID, s.comm.gidIndex = c.gidx >= 0, c.gidx
	if c.commCM {
		if c.rdmaCM {
			// The test's QPs go on the device and port the CM picked for
			// these addresses (perftest: ctx->context = cm_id->verbs).
			id := s.comm.cm.conn.ID
			s.c.ibDev, s.c.ibPort = id.Device().Name, id.Port()
		}
		if err := s.open(); err != nil {
			return err
		}
	}
	if _, err := s.comm.versions(); err != nil {
		return err
	}
	if s.cycle, s.line, err = s.comm.sysData(os.Getpagesize(), cacheLine()); err != nil {
		return err
	}
	local := s.port.ActiveMTU
	if c.mtu > 0 {
		local = mtuOf(c.mtu)
	}
	m, err := s.comm.mtu(int(local))
	if err != nil {
		return err
	}
	s.mtu = uverbs.MTU(m)
	if c.conn == connUD && c.verb == verbSend && c.size > s.mtu.Bytes() {
		if c.all || !c.sizeSet {
			fmt.Fprintf(s.errOut, " Max msg size in UD is MTU %d\n Changing to this MTU\n", s.mtu.Bytes())
			s.c.size = s.mtu.Bytes()
		} else {
			return failure("Max message size in UD cannot be greater than MTU")
		}
	}
	if err := s.resources(); err != nil {
		return err
	}
	if c.rdmaCM {
		if err := s.cmConnect(); err != nil {
			return failf("Failed to create RDMA CM connection with resources: %v", err)
		}
	}
	s.localDests()
	if err := s.setupCredits(); err != nil {
		return err
	}
	s.printInfo()
	return s.runTest()
}

// cacheLine is the CPU's L1 cache line size as sysfs reports it (64 when
// it does not).
func cacheLine() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return n
		}
	}
	return 64
}

func mtuOf(bytes int) uverbs.MTU {
	m := uverbs.MTU256
	for m < uverbs.MTU4096 && m.Bytes() < bytes {
		m++
	}
	return m
}

// open finds and opens the device and reads the port.
func (s *session) open() error {
	c := s.c
	devs, err := uverbs.Devices()
	if err != nil {
		return failf("Unable to find the Infiniband/RoCE device: %v", err)
	}
	found := false
	for _, d := range devs {
		if c.ibDev == "" || d.Name == c.ibDev {
			s.dev, found = d, true
			break
		}
	}
	if !found {
		if c.ibDev != "" {
			return failf("IB device %s not found\n Unable to find the Infiniband/RoCE device", c.ibDev)
		}
		return failure("No IB devices found\n Unable to find the Infiniband/RoCE device")
	}
	if s.ctx, err = uverbs.Open(s.dev); err != nil {
		return failf("Couldn't get context for the device: %v", err)
	}
	if s.port, err = s.ctx.QueryPort(c.ibPort); err != nil {
		return failf("Couldn't query port %d of %s: %v", c.ibPort, s.dev.Name, err)
	}
	if s.port.LinkLayer == uverbs.LinkLayerEthernet && c.gidx < 0 && !c.rdmaCM {
		return failf("%s is RoCE: give the GID index with -x (index 1 is RoCEv2 IPv4 on the rig's rxe)", s.dev.Name)
	}
	s.outReads = 1
	if c.verb == verbRead || c.verb == verbAtomic {
		a, err := s.ctx.QueryDevice()
		if err != nil {
			return failf("Couldn't query device %s: %v", s.dev.Name, err)
		}
		s.outReads = int(a.MaxQPRdAtom)
		if c.outReads > s.outReads {
			fmt.Fprint(s.out, resultLine)
			fmt.Fprintf(s.errOut, " Number of outstanding reads is above max = %d\n Changing to that max value\n", s.outReads)
		} else if c.outReads > 0 {
			s.outReads = c.outReads
		}
	}
	// perftest knows the inline limits of the devices it recognises; rxe and
	// siw are not among them, so it sends nothing inline there.
	s.inline = 0
	if c.verb == verbRead || c.verb == verbAtomic || c.inline >= 0 {
		if s.dev.Driver != uverbs.DriverMLX5 {
			fmt.Fprintln(s.errOut, "Device not recognized to implement inline feature. Disabling it")
			fmt.Fprint(s.out, resultLine)
		} else if c.inline >= 0 && c.verb != verbRead && c.verb != verbAtomic {
			s.inline = c.inline
		}
	} else if s.dev.Driver == uverbs.DriverMLX5 && c.kind == lat {
		switch {
		case c.verb == verbWrite:
			s.inline = 220
		case c.verb == verbSend && c.conn == connUD:
			s.inline = 188
		case c.verb == verbSend:
			s.inline = 236
		}
	}
	return nil
}

// resources is ctx_init: channel, PD, the buffer and its MR, the CQs and
// the QPs in INIT.
func (s *session) resources() error {
	c := s.c
	var err error
	if c.events {
		if s.ch, err = s.ctx.CreateCompChannel(); err != nil {
			return failf("Couldn't create completion channel: %v", err)
		}
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return failf("Couldn't allocate PD: %v", err)
	}
	size := c.size
	if c.conn == connUD {
		size += udGRH
	}
	s.bufSize = max(size, s.cycle)
	page := os.Getpagesize()
	s.bufSize = (s.bufSize + page - 1) / page * page
	if s.mem, err = mmap.Anonymous(2 * c.numQP * s.bufSize); err != nil {
		return failf("Couldn't allocate work buf: %v", err)
	}
	b := s.mem.Bytes()
	for i := range b {
		b[i] = 0
	}
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
	if s.mr, err = s.pd.RegMR(b, access); err != nil {
		return failf("Couldn't allocate MR: %v", err)
	}
	sendCQE := c.txDepth * c.numQP
	if s.sendCQ, err = s.ctx.CreateCQ(sendCQE, uverbs.CQOptions{Channel: s.ch}); err != nil {
		return failf("Couldn't create CQ: %v", err)
	}
	s.recvCQ = s.sendCQ
	if c.verb == verbSend {
		if s.recvCQ, err = s.ctx.CreateCQ(c.rxDepth*c.numQP, uverbs.CQOptions{Channel: s.ch}); err != nil {
			return failf("Couldn't create a receiver CQ: %v", err)
		}
	}
	if c.rdmaCM {
		return nil // the QPs come from rdma_cm (cmConnect)
	}
	typ := map[connType]uverbs.QPType{connRC: uverbs.QPTypeRC, connUC: uverbs.QPTypeUC, connUD: uverbs.QPTypeUD}[c.conn]
	qpCap := s.qpCap()
	for range c.numQP {
		qp, err := s.pd.CreateQP(uverbs.QPInit{Type: typ, SendCQ: s.sendCQ, RecvCQ: s.recvCQ, Cap: qpCap})
		if err != nil {
			return failf("Couldn't create QP: %v", err)
		}
		s.qps = append(s.qps, qp)
	}
	for _, qp := range s.qps {
		a := &uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: uint8(c.ibPort)}
		mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
		if c.conn == connUD {
			a.QKey, mask = udQKey, mask|uverbs.QPAttrQKey
		} else {
			switch c.verb {
			case verbAtomic:
				a.AccessFlags = uverbs.AccessRemoteAtomic
			case verbRead:
				a.AccessFlags = uverbs.AccessRemoteRead
			case verbWrite:
				a.AccessFlags = uverbs.AccessRemoteWrite
			case verbSend:
				a.AccessFlags = uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite
			}
			mask |= uverbs.QPAttrAccessFlags
		}
		if err := qp.Modify(a, mask); err != nil {
			return failf("Failed to modify QP to INIT: %v", err)
		}
	}
	return nil
}

// qpCap is the capacities of each test QP.
func (s *session) qpCap() uverbs.QPCap {
	c := s.c
	qpCap := uverbs.QPCap{MaxSendWR: uint32(c.txDepth), MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: uint32(s.inline)}
	if c.verb == verbSend {
		qpCap.MaxRecvWR = uint32(c.rxDepth)
	}
	return qpCap
}

// sendAddr and recvAddr are QP i's send area and receive area (the one the
// peer's RDMA operations target).
func (s *session) sendAddr(i int) uint64 { return s.mr.Addr() + uint64(i*s.bufSize) }
func (s *session) recvAddr(i int) uint64 {
	return s.mr.Addr() + uint64((s.c.numQP+i)*s.bufSize)
}

// localDests is set_up_connection: this side's address of each QP.
func (s *session) localDests() {
	var gid [16]byte
	if s.c.gidx >= 0 {
		e, err := s.ctx.QueryGID(s.c.ibPort, s.c.gidx)
		if err == nil {
			gid = e.GID
		} else if !errors.Is(err, unix.ENODATA) {
			fmt.Fprintf(s.errOut, " Couldn't query GID %d: %v\n", s.c.gidx, err)
		}
	}
	s.mine = make([]dest, s.c.numQP)
	for i, qp := range s.qps {
		s.mine[i] = dest{lid: s.port.LID, outReads: uint16(s.outReads), qpn: qp.QPN(), psn: rand.Uint32() & 0xffffff,
			rkey: s.mr.RKey(), vaddr: s.recvAddr(i), gid: gid}
	}
	s.remote = make([]dest, s.c.numQP)
}

// connect is ctx_connect: each QP to RTR and RTS towards its peer.
func (s *session) connect() error {
	c := s.c
	for i, qp := range s.qps {
		r := s.remote[i]
		av := uverbs.AHAttr{DLID: r.lid, SL: uint8(c.sl), PortNum: uint8(c.ibPort)}
		if c.gidx >= 0 {
			av.GRH = &uverbs.GlobalRoute{DGID: r.gid, SGIDIndex: uint8(c.gidx), HopLimit: 0xff}
		}
		if c.conn == connUD {
			if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err != nil {
				return failf("Failed to modify QP %d to RTR: %v", qp.QPN(), err)
			}
			if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: s.mine[i].psn}, uverbs.QPAttrState|uverbs.QPAttrSQPSN); err != nil {
				return failf("Failed to modify QP to RTS: %v", err)
			}
			ah, err := s.pd.CreateAH(av)
			if err != nil {
				return failf("Failed to create AH for UD: %v", err)
			}
			s.ahs = append(s.ahs, ah)
			continue
		}
		rtr := &uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: s.mtu, DestQPN: r.qpn, RQPSN: r.psn, AH: av}
		mask := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
		if c.conn == connRC {
			rtr.MaxDestRDAtomic, rtr.MinRNRTimer = uint8(min(s.mine[i].outReads, 255)), 12
			mask |= uverbs.QPAttrMaxDestRDAtomic | uverbs.QPAttrMinRNRTimer
		}
		var err error
		if av.GRH != nil && rawconn.Resolved(s.comm.conn, s.mine[i].gid, r.gid) {
			// The exchange's own packets resolved the peer's MAC, or the
			// peer is this side's own GID (a loopback): the kernel's lookup
			// is quick, and a raw syscall leaves the runtime's monitor
			// asleep for the loop (uverbs.ModifyResolved).
			err = qp.ModifyResolved(rtr, mask)
		} else {
			err = qp.Modify(rtr, mask)
		}
		if err != nil {
			return failf("Failed to modify QP %d to RTR: %v", qp.QPN(), err)
		}
		rts := &uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: s.mine[i].psn}
		mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
		if c.conn == connRC {
			rts.Timeout, rts.RetryCnt, rts.RNRRetry, rts.MaxRDAtomic = 14, 7, 7, uint8(min(r.outReads, 255))
			mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRDAtomic
		}
		if err := qp.Modify(rts, mask); err != nil {
			return failf("Failed to modify QP to RTS: %v", err)
		}
	}
	return nil
}

// exchange runs n handshakes of the QP addresses; with into, the peer's
// addresses are kept (and printed when print is set).
func (s *session) exchange(keep, print bool) error {
	for i := range s.mine {
		r, err := s.comm.handshake(s.mine[i])
		if err != nil {
			return err
		}
		if keep {
			s.remote[i] = r
		}
	}
	if print {
		for i := range s.mine {
			s.printDest("local", s.mine[i])
		}
		for i := range s.remote {
			s.printDest("remote", s.remote[i])
		}
	}
	return nil
}

// sync is one handshake of QP 0's address, used to keep both sides in step.
func (s *session) sync() error {
	_, err := s.comm.handshake(s.mine[0])
	return err
}

// checkGIDs is ctx_check_gid_compatibility: both GIDs IPv4-mapped or
// neither.
func (s *session) checkGIDs() error {
	v4 := func(g [16]byte) bool {
		for _, b := range g[:10] {
			if b != 0 {
				return false
			}
		}
		return g[10] == 0xff && g[11] == 0xff
	}
	if v4(s.mine[0].gid) != v4(s.remote[0].gid) {
		return failure("\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.")
	}
	return nil
}

// runTest runs the test's sequence of exchanges around its measurements;
// each program has its own, and both sides must follow the same one.
func (s *session) runTest() error {
	c := s.c
	// Before connecting: write_lat, read_lat and atomic_lat shake hands once
	// more than the others.
	if c.kind == lat && c.verb != verbSend {
		if err := s.sync(); err != nil {
			return err
		}
	}
	if err := s.exchange(true, false); err != nil {
		return err
	}
	if !c.rdmaCM { // rdma_cm connected the QPs already
		if err := s.checkGIDs(); err != nil {
			return err
		}
		if err := s.connect(); err != nil {
			return failf("Unable to Connect the HCA's through the link: %v", err)
		}
	}
	if c.verb == verbSend {
		if err := s.sync(); err != nil {
			return err
		}
	}
	if err := s.exchange(true, true); err != nil {
		return err
	}
	if c.verb != verbSend {
		if err := s.sync(); err != nil {
			return err
		}
	}
	switch {
	case c.kind == lat && c.verb == verbSend:
		return s.sendLat()
	case c.kind == lat && c.verb == verbWrite:
		return s.writeLat()
	case c.kind == lat:
		return s.readLat()
	case c.verb == verbSend:
		return s.sendBW()
	default:
		return s.rdmaBW()
	}
}

// sizes are the message sizes to run: -s, or 2 .. 2^23 with -a (UD: up to
// the MTU).
func (s *session) sizes() []int {
	if !s.c.all {
		return []int{s.c.size}
	}
	top := 1 << 23
	if s.c.conn == connUD {
		top = s.mtu.Bytes()
	}
	var out []int
	for n := 2; n <= top; n *= 2 {
		out = append(out, n)
	}
	return out
}

// stamps makes room for n timestamps of each kind.
func (s *session) stamps(n int) {
	if cap(s.posted) < n {
		s.posted = make([]int64, n)
		s.completed = make([]int64, n)
	}
	s.posted, s.completed = s.posted[:n], s.completed[:n]
}

func (s *session) close() error {
	var first error
	note := func(err error, what string) {
		if err != nil && first == nil {
			first = failf("Couldn't %s: %v", what, err)
		}
	}
	for i := len(s.ahs) - 1; i >= 0; i-- {
		note(s.ahs[i].Close(), "destroy AH")
	}
	if s.credit != nil {
		note(s.credit.close(), "deregister the credit MR")
	}
	if s.cmConns != nil {
		for i := len(s.cmConns) - 1; i >= 0; i-- {
			note(s.cmConns[i].Close(), "destroy the rdma_cm connection")
		}
		s.qps = nil // closed with their connections
	}
	for i := len(s.qps) - 1; i >= 0; i-- {
		note(s.qps[i].Close(), "destroy QP")
	}
	if s.recvCQ != nil && s.recvCQ != s.sendCQ {
		note(s.recvCQ.Close(), "destroy CQ")
	}
	if s.sendCQ != nil {
		note(s.sendCQ.Close(), "destroy CQ")
	}
	if s.mr != nil {
		note(s.mr.Close(), "deregister MR")
	}
	if s.pd != nil {
		note(s.pd.Close(), "deallocate PD")
	}
	if s.ch != nil {
		note(s.ch.Close(), "destroy completion channel")
	}
	if s.ctx != nil {
		note(s.ctx.Close(), "close the device")
	}
	if s.mem != nil {
		note(s.mem.Close(), "unmap the buffer")
	}
	if s.comm != nil {
		s.comm.close()
	}
	return first
}
