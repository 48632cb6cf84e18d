package rsocket

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Connection states (rsocket.c's rs_state bits that a connected stream
// uses).
const (
	stConnected = 1 << iota
	stReadable
	stWritable
	stDisconnected // the peer said DISCONNECT, or both directions shut
	stError        // a send failed, or the connection broke without a DISCONNECT
)

// Work request IDs: receives have bit 63, the iWARP message sends bit 62;
// the low 32 bits of a send's ID are its message (op and data).
const (
	wrRecv    = 1 << 63
	wrMsgSend = 1 << 62
	wrNudge   = 1 << 61 // a zero-length RDMA WRITE (see nudgeEvery)
)

// hostBigEndian: rsocket peers exchange SGEs in the receiver's host order
// (rs_conn_data.flags says which).
var hostBigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// Conn is an rsocket stream connection: a net.Conn over an RC queue pair.
//
// Bytes written are copied into a registered send buffer and RDMA-written
// into the peer's receive buffer; Read copies out of the local receive
// buffer. A blocked Read or Write parks on the CQ's completion channel
// through Go's runtime poller. Read, Write, the deadline setters,
// CloseWrite and Close may be called from any goroutine; concurrent Reads
// (or Writes) are serialized.
type Conn struct {
	rc    *rdmacm.Conn
	cmEnd <-chan struct{} // rc's Done, kept: Done takes the ID's lock, and every wait looks
	// cmGone is set once rc's Done is closed (by interrupt, which AfterDone
	// runs then): every poll looks, and a select on cmEnd costs ~60
	// instructions where a load costs one.
	cmGone atomic.Bool
	qp     *uverbs.QP
	cq     *uverbs.CQ
	mem    *mmap.Region
	smr    *uverbs.MR // send buffer and control area
	rmr    *uverbs.MR // target SGL and receive buffer (remote write)
	// The MRs' addresses and keys, kept: their getters take the MR's lock,
	// and every send and receive names them.
	sAddr, rAddr uint64
	sKey         uint32 // smr's lkey
	rKey, rRKey  uint32 // rmr's lkey and rkey
	laddr        net.Addr
	raddr        net.Addr

	// Layout of mem.
	sbufSize, rbufSize int
	ctrlOff, msgOutOff int // SGEs of control messages; the outgoing iWARP word
	tgtOff, rbufOff    int // the target SGL the peer writes; the receive buffer
	msgInOff           int // incoming iWARP words, one per receive
	// tgt views the target SGL's entries in mem (newConn): every send
	// reads and moves the current one, and mmap's checked views cost a
	// call each (~75 instructions: a tenth of a 64 B message's user code).
	// Valid until release unmaps mem, after which no Read or Write gets
	// past its closing check.
	tgt [sglSize]targetView
	// sbuf and rbuf view the send and receive buffers in mem, kept for
	// the same reason and as long: slicing mem.Bytes() on every write and
	// read cost a 64 B transfer 6-17 user instructions a side
	// (test/perf/rstreamcg.sh).
	sbuf, rbuf []byte

	sqSize, rqSize int
	inline         int
	msgSend        bool // iWARP: messages are SENDs, not immediate data
	firstXfer      int  // a Write's first transfer at most (firstTransfer)
	peerBig        bool // the peer's host order is big-endian

	rmu, wmu sync.Mutex // one Read, one Write at a time
	rdl, wdl deadline

	wc [32]uverbs.WorkCompletion // used by the goroutine polling the CQ (mu held, or polling set)

	mu sync.Mutex // everything below
	// polling is set while a goroutine waits on the CQ with mu released
	// (waitHeld): only it may Poll or Wait then. With mu held and polling
	// clear, the holder of mu may poll.
	polling    bool
	state      int
	err        error // why the connection is in stError
	closing    bool
	quiet      bool // accepted on iWARP: send nothing before the peer's first message (stillQuiet)
	acceptedAt time.Time
	peerClosed bool          // the peer's DISCONNECT came (or its SHUTDOWN ended both directions)
	peerRQ     uint16        // the peer's receive queue: its credits before it read anything
	lingered   string        // how Close's iWARP linger ended (tests)
	nudge      bool          // dialed on iWARP, no data received yet: waiters nudge (see nudgeEvery)
	nudged     int           // nudges posted
	prog       chan struct{} // closed when the state moved on (waiters)
	progWait   int           // goroutines that may be waiting on prog
	sseqNo     uint16
	sseqComp   uint16
	rseqNo     uint16
	rseqComp   uint16
	ctrlSeq    uint32
	ctrlMax    uint32
	sqeAvail   int
	sbufAvail  int
	sbufHead   int // where the next send's bytes go in the send buffer
	remoteSGL  sge // the peer's target SGL
	remoteSGE  int // the entry of it the next credit update fills
	targetSGE  int // the entry of our target SGL the next write goes to
	rmsg       []uint32
	rmsgHead   int
	rmsgTail   int
	rbufOff2   int // read offset in the receive buffer
	rbufFree   int // offset of the half the next credit update offers
	rbufAvail  int // bytes read, not yet offered back
	msgIndex   int // the next iWARP receive slot
	swr        [2]uverbs.SendWR
	// dwr is postWriteMsg's RDMA WRITE with immediate (all but iWARP):
	// its own, so that a message sets the seven fields it uses and the
	// rest stay zero (writing the whole 150-byte request cost a message
	// ~50 instructions).
	dwr  [1]uverbs.SendWR
	ssge [2]uverbs.SGE
	rwr  [1]uverbs.RecvWR
	rsge [1]uverbs.SGE

	kaTimer  *time.Timer // keepalive (guarded by mu)
	kaPeriod time.Duration

	closeOnce sync.Once
	closeErr  error
	gone      atomic.Bool
}

// settings are what a connection fixes before it connects: its buffer and
// queue sizes and its CQ's wait spin cap.
type settings struct {
	sbuf, rbuf, sq, rq, inline int
	spinMax                    time.Duration // the CQ's WaitSpinMax
}

// newConn allocates and lays out a connection's memory (not registered yet).
func newConn(s settings) (*Conn, error) {
	c := &Conn{sbufSize: s.sbuf, rbufSize: s.rbuf, sqSize: s.sq, rqSize: s.rq, inline: s.inline}
	c.ctrlOff = c.sbufSize
	c.msgOutOff = c.ctrlOff + qpCtrlSize*sgeSize
	c.tgtOff = alignUp(c.msgOutOff+8, 64)
	c.rbufOff = alignUp(c.tgtOff+sglSize*sgeSize, 64)
	c.msgInOff = c.rbufOff + c.rbufSize
	mem, err := mmap.Anonymous(c.msgInOff + c.rqSize*msgSize)
	if err != nil {
		return nil, err
	}
	c.mem = mem
	c.sbuf = mem.Bytes()[:c.sbufSize:c.sbufSize]
	c.rbuf = mem.Bytes()[c.rbufOff : c.rbufOff+c.rbufSize : c.rbufOff+c.rbufSize]
	for i := range c.tgt {
		off := c.tgtOff + i*sgeSize
		c.tgt[i] = targetView{addr: mem.Uint64(off), key: mem.Uint32(off + 8), length: mem.Uint32(off + 12)}
	}
	c.rmsg = make([]uint32, c.rqSize+1)
	c.prog = make(chan struct{})
	c.rdl.init()
	c.wdl.init()
	return c, nil
}

func alignUp(n, a int) int { return (n + a - 1) &^ (a - 1) }

// prepare runs with the QP in INIT (rdmacm's Prepare hook): it registers
// the buffers, posts the receives and writes our rs_conn_data into priv,
// which rdmacm sends with the connect request or the accept.
func (c *Conn) prepare(rc *rdmacm.Conn, priv []byte) error {
	c.rc, c.qp, c.cq = rc, rc.QP, rc.CQ
	c.msgSend = rc.ID.Device().Transport == uverbs.TransportIWARP
	c.firstXfer = firstTransfer(rc.ID.Device().Driver)
	if err := c.register(rc.PD()); err != nil {
		return err
	}
	c.cmEnd = rc.Done()
	c.rbufFree = c.rbufSize / 2
	c.rbufAvail = c.rbufSize / 2
	c.ctrlMax = qpCtrlSize
	c.sqeAvail = c.sqSize - qpCtrlSize
	c.sbufAvail = c.sbufSize
	c.rseqComp = uint16(c.rqSize / 2)
	for i := 0; i < c.rqSize; i++ {
		if err := c.postRecv(); err != nil {
			return err
		}
	}
	d := connData{
		Version:    1,
		Credits:    uint16(c.rqSize),
		TargetSGL:  sge{Addr: c.rAddr, Key: c.rRKey, Length: sglSize},
		DataBuffer: sge{Addr: c.rAddr + uint64(c.rbufOff-c.tgtOff), Key: c.rRKey, Length: uint32(c.rbufSize / 2)},
	}
	if hostBigEndian {
		d.Flags |= connFlagNet
	}
	d.marshal(priv)
	return nil
}

// register registers the connection's memory on pd: the send buffer and
// control area, and (for the peer's RDMA writes) the target SGL and the
// receive buffer. Memory a listener registered before its wait
// (Listener.ready) on the same PD is kept; on another PD it is registered
// again.
func (c *Conn) register(pd *uverbs.PD) error {
	if c.smr != nil && c.rmr != nil && c.smr.PD() == pd {
		return nil
	}
	if err := c.deregister(); err != nil {
		return err
	}
	b := c.mem.Bytes()
	var err error
	c.smr, err = pd.RegMR(b[:c.tgtOff], uverbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	c.rmr, err = pd.RegMR(b[c.tgtOff:], uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		return err
	}
	c.sAddr, c.sKey = c.smr.Addr(), c.smr.LKey()
	c.rAddr, c.rKey, c.rRKey = c.rmr.Addr(), c.rmr.LKey(), c.rmr.RKey()
	return nil
}

// deregister deregisters the connection's memory.
func (c *Conn) deregister() error {
	var errs []error
	if c.smr != nil {
		errs = append(errs, c.smr.Close())
		c.smr = nil
	}
	if c.rmr != nil {
		errs = append(errs, c.rmr.Close())
		c.rmr = nil
	}
	return errors.Join(errs...)
}

// start takes the peer's rs_conn_data (rs_save_conn_data): its target SGL,
// its first buffer as our target entry 0, and its credits.
func (c *Conn) start(peer []byte, accepted bool) error {
	d, err := parseConnData(peer)
	if err != nil {
		return err
	}
	c.remoteSGL = d.TargetSGL
	c.remoteSGE = 1
	c.peerBig = d.Flags&connFlagNet != 0
	c.storeTarget(0, d.DataBuffer)
	c.sseqComp = d.Credits
	c.peerRQ = d.Credits
	c.state = stConnected | stReadable | stWritable
	// MPA (RFC 5044; RFC 6581's RTR exchange is what lifts it) has the
	// initiator send the first FPDU. siw's initiator reads the MPA reply's
	// private data with 4 bytes to spare and fails the connect
	// (CONNECT_ERROR, EINVAL) if an FPDU is already behind it (Linux's
	// siw_recv_mpa_rr, siw_proc_mpareply): our first credit update,
	// sent the moment ESTABLISHED came, did that about once in 40 connects
	// under TCG. rsocket peers send first (goverbs' Dial its credits at
	// once, rsocket.c its credits or data on its first call).
	c.quiet = c.msgSend && accepted
	c.acceptedAt = time.Now()
	c.nudge = c.msgSend && !accepted && !nudgeOff
	if a, err := c.rc.ID.LocalAddr(); err == nil {
		c.laddr = &Addr{a}
	}
	if a, err := c.rc.ID.RemoteAddr(); err == nil {
		c.raddr = &Addr{a}
	}
	// A waiter parked in CQ.Wait wakes when the CM reports the connection
	// down, even if nothing is left to complete.
	c.rc.AfterDone(c.interrupt)
	// For a connection already down AfterDone runs interrupt in a goroutine
	// that may not have run yet: mark it here, so that Accept's look right
	// after start sees it (an abandoned connection is not handed out).
	select {
	case <-c.cmEnd:
		c.cmGone.Store(true)
	default:
	}
	c.mu.Lock()
	c.updateCredits()
	c.mu.Unlock()
	return nil
}

// interrupt wakes the calls blocked on the connection once the CM reported
// it down: they look at the CM and fail the connection.
func (c *Conn) interrupt() {
	c.cmGone.Store(true) // before the wake-ups: a woken waiter sees it
	c.rdl.interrupt()
	c.wdl.interrupt()
	c.mu.Lock()
	c.broadcast()
	c.mu.Unlock()
}

func haveData(c *Conn) bool { return c.rmsgHead != c.rmsgTail || c.state&stReadable == 0 }

func canSend(c *Conn) bool {
	if c.state&stWritable == 0 {
		return true
	}
	if c.stillQuiet() {
		return false
	}
	sqe := c.sqeAvail > 0
	if c.msgSend {
		sqe = c.sqeAvail >= 2
	}
	return sqe && c.sbufAvail >= sndLowat && c.sseqNo != c.sseqComp && c.targetLen(c.targetSGE) != 0
}

func ctrlReady(c *Conn) bool { return c.ctrlAvail() && !c.stillQuiet() || c.state&stConnected == 0 }

// stillQuiet reports whether an accepted connection must still send
// nothing: not once the peer's first message came (process), nor once
// nudgeEvery passed since the accept. By then the dialer's kernel has
// long taken the MPA reply, which went out before the accept returned,
// and an answer sent before the dialer's message came is how a program
// gets that message out of siw_accept's race (see nudgeEvery). mu held.
func (c *Conn) stillQuiet() bool {
	if c.quiet && time.Since(c.acceptedAt) >= nudgeEvery {
		c.quiet = false
	}
	return c.quiet
}

func allSent(c *Conn) bool {
	return int(c.ctrlMax-c.ctrlSeq)+c.sqeAvail == c.sqSize || c.state&stConnected == 0
}

// Read reads data the peer wrote. It returns io.EOF after the peer closed
// or shut down its write side and everything it sent was read.
func (c *Conn) Read(b []byte) (int, error) {
	// Unlocked without defers, here and in Write: two deferred unlocks
	// cost a 64 B round trip ~60 instructions a side (callgrind in the
	// rig), and read returns on every path.
	c.rmu.Lock()
	c.mu.Lock()
	n, err := c.read(b)
	c.mu.Unlock()
	c.rmu.Unlock()
	return n, err
}

// read is Read with rmu and mu held.
func (c *Conn) read(b []byte) (int, error) {
	if c.closing {
		return 0, c.opError("read", net.ErrClosed)
	}
	if c.rdl.expired() {
		return 0, c.opError("read", errTimeout)
	}
	if len(b) == 0 {
		return 0, nil
	}
	if c.rmsgHead == c.rmsgTail {
		if err := c.wait(&c.rdl, haveData); err != nil {
			return 0, c.opError("read", err)
		}
	}
	n := 0
	rbuf := c.rbuf
	for n < len(b) && c.rmsgHead != c.rmsgTail {
		size := int(c.rmsg[c.rmsgHead])
		if len(b)-n < size {
			size = len(b) - n
			c.rmsg[c.rmsgHead] -= uint32(size)
		} else {
			c.rseqNo++
			if c.rmsgHead++; c.rmsgHead == len(c.rmsg) {
				c.rmsgHead = 0
			}
		}
		for size > 0 {
			k := copy(b[n:n+size], rbuf[c.rbufOff2:])
			n += k
			size -= k
			c.rbufAvail += k
			if c.rbufOff2 += k; c.rbufOff2 == c.rbufSize {
				c.rbufOff2 = 0
			}
		}
	}
	c.updateCredits()
	if n > 0 {
		return n, nil
	}
	if c.state&stError != 0 {
		return 0, c.opError("read", c.err)
	}
	return 0, io.EOF
}

// Write writes b to the peer: it returns when every byte is in the send
// buffer or on its way (RDMA-written into the peer's receive buffer).
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	c.mu.Lock()
	n, err := c.write(b)
	c.mu.Unlock()
	c.wmu.Unlock()
	return n, err
}

// write is Write with wmu and mu held.
func (c *Conn) write(b []byte) (int, error) {
	if c.closing {
		return 0, c.opError("write", net.ErrClosed)
	}
	if c.wdl.expired() {
		return 0, c.opError("write", errTimeout)
	}
	n := 0
	olen := c.firstXfer
	for n < len(b) {
		if !canSend(c) {
			if err := c.wait(&c.wdl, canSend); err != nil {
				return n, c.opError("write", err)
			}
		}
		if c.state&stWritable == 0 {
			if c.state&stError != 0 {
				return n, c.opError("write", c.err)
			}
			return n, c.opError("write", syscall.ECONNRESET)
		}
		xfer := len(b) - n
		if olen < xfer {
			xfer = olen
			if olen < maxTransfer {
				olen <<= 1
			}
		}
		xfer = min(xfer, c.sbufAvail, int(c.targetLen(c.targetSGE)))
		if err := c.writeData(b[n : n+xfer]); err != nil {
			c.fail(err)
			return n, c.opError("write", err)
		}
		n += xfer
	}
	return n, nil
}

// firstTransfer is the largest first transfer of a Write on a device of
// driver d. rsocket.c starts every send at 2 KiB and doubles the transfers
// up to 64 KiB, so that a NIC puts the first bytes on the wire while the
// CPU copies the next ones. The software devices have no such overlap to
// offer: rxe and siw do a transfer's protocol work in the kernel, on the
// CPU, at a fixed cost per transfer far above the copy's, and the peer
// pays a completion, a repost and a wake-up per transfer too. There a
// Write sends transfers as large as the buffers allow, up to 64 KiB, from
// the first: a 4 KiB round trip took 0.78 of the time on rxe0 and 0.49 on
// siw0 (docs/COST.md, session 50). The peer cannot tell: a transfer's
// length is bounded only by its target buffer.
func firstTransfer(d uverbs.DriverID) int {
	if d == uverbs.DriverRXE || d == uverbs.DriverSIW {
		return maxTransfer
	}
	return olapStart
}

// writeData copies p into the send buffer and RDMA-writes it into the
// current target entry (rs_write_data). mu held.
func (c *Conn) writeData(p []byte) error {
	sbuf := c.sbuf
	k := copy(sbuf[c.sbufHead:], p)
	nsge := 1
	c.ssge[0] = uverbs.SGE{Addr: c.sAddr + uint64(c.sbufHead), Length: uint32(k), LKey: c.sKey}
	if k < len(p) {
		copy(sbuf, p[k:])
		c.ssge[1] = uverbs.SGE{Addr: c.sAddr, Length: uint32(len(p) - k), LKey: c.sKey}
		nsge = 2
	}
	if c.sbufHead += len(p); c.sbufHead >= c.sbufSize {
		c.sbufHead -= c.sbufSize
	}
	var flags uverbs.SendFlags
	if len(p) <= c.inline {
		flags = uverbs.SendInline
	}
	c.sseqNo++
	c.sqeAvail--
	if c.msgSend {
		c.sqeAvail--
	}
	c.sbufAvail -= len(p)
	t := &c.tgt[c.targetSGE]
	addr, key, left := t.addr.Load(), t.key.Load(), t.length.Load()
	t.addr.Store(addr + uint64(len(p)))
	t.length.Store(left - uint32(len(p)))
	if left == uint32(len(p)) {
		if c.targetSGE++; c.targetSGE == sglSize {
			c.targetSGE = 0
		}
	}
	return c.postWriteMsg(c.ssge[:nsge], msgSet(opData, uint32(len(p))), flags, addr, key)
}

// sendCtrl sends a control message once a control slot is free. mu held.
func (c *Conn) sendCtrl(ctrl uint32, dl *deadline) error {
	if !ctrlReady(c) {
		if err := c.wait(dl, ctrlReady); err != nil {
			return err
		}
	}
	if c.state&stConnected == 0 || !c.ctrlAvail() || c.quiet {
		return nil
	}
	c.ctrlSeq++
	if err := c.postMsg(msgSet(opCtrl, ctrl)); err != nil {
		c.fail(err)
		return err
	}
	return nil
}

// CloseWrite shuts down the write side: the peer reads io.EOF after the
// bytes already written (SHUT_WR: a SHUTDOWN control message, or a
// DISCONNECT if the read side is shut too).
func (c *Conn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return c.opError("close", net.ErrClosed)
	}
	if c.state&stConnected == 0 || c.state&stWritable == 0 {
		return nil
	}
	c.state &^= stWritable
	ctrl := uint32(ctrlDisconnect)
	if c.state&stReadable != 0 {
		ctrl = ctrlShutdown
	}
	if err := c.sendCtrl(ctrl, &c.wdl); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// CloseRead shuts down the read side (SHUT_RD): Read returns io.EOF. The
// peer learns of it only when the write side is shut too.
func (c *Conn) CloseRead() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return c.opError("close", net.ErrClosed)
	}
	if c.state&stConnected == 0 || c.state&stReadable == 0 {
		return nil
	}
	c.state &^= stReadable
	c.broadcast()
	if c.state&stWritable != 0 {
		return nil
	}
	if err := c.sendCtrl(ctrlDisconnect, &c.wdl); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// closeLinger bounds how long Close waits for the bytes written to reach
// the peer.
const closeLinger = 30 * time.Second

// iwarpLinger bounds how long Close on iWARP waits, after its last send
// completed, for the peer to have read every byte or to close, before it
// disconnects.
//
// On iWARP a send completes once siw has handed it to TCP, not once the
// peer has it, and disconnecting releases the socket at once
// (siw_qp_cm_drop). If bytes of the peer's (its credit updates) arrived
// after our QP stopped reading, the release finds them unread and resets
// the TCP connection (tcp_close), dropping what of ours was still queued:
// the peer's QP then flushes before the end of the stream. Close waits
// until the peer's credits say its application read every message we sent
// (rsocket's credits count messages read), or until its DISCONNECT came
// (a peer sends it only once it stopped reading, and nothing after it).
// rsocket.c's peers send DISCONNECT as they close (rshutdown), and so does
// this package; a peer that neither reads all nor closes holds Close this
// long. rsocket.c itself does not wait (rclose destroys its ID once its
// sends completed).
//
// How the stream breaks, read in Linux's tcp_input.c and siw: a close
// while our last bytes still wait in our TCP send queue puts the FIN on
// their segment; the peer's TCP handles the FIN (siw schedules its QP's
// close) before it calls data_ready for those bytes, and siw's close can
// take the QP's state lock first: siw_qp_llp_data_ready's trylock fails
// or finds rx_suspend, the bytes are never placed and the receives
// flush. Once our bytes left the send queue the FIN travels alone, behind
// them; on a live peer that takes microseconds, so half a second bounds
// the wait with a wide margin (the rig's TCG guests included).
const iwarpLinger = 500 * time.Millisecond

// peerDone reports that the peer will send nothing more: its DISCONNECT
// came, the connection broke, or the CM saw it end. mu held.
func peerDone(c *Conn) bool { return c.peerClosed || c.state&stError != 0 || c.cmDown() }

// peerReadAll reports that the peer's last credits counted every data
// message we sent as read by its application. mu held.
func peerReadAll(c *Conn) bool { return c.sseqComp-c.peerRQ == c.sseqNo }

// lingerOver: Close's iWARP linger may end. mu held.
func lingerOver(c *Conn) bool { return peerReadAll(c) || peerDone(c) }

// Close closes the connection: blocked Reads and Writes return
// net.ErrClosed, the peer gets DISCONNECT after every byte written, and
// the QP, buffers and CM ID are released. On iWARP it may wait (half a
// second at most) for the peer to read or close first: see iwarpLinger.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Conn) close() error {
	c.mu.Lock()
	c.closing = true
	if c.kaTimer != nil {
		c.kaTimer.Stop()
		c.kaTimer = nil
	}
	c.broadcast()
	c.mu.Unlock()
	c.rdl.shutdown()
	c.wdl.shutdown()
	c.rmu.Lock() // wait for Read and Write to leave
	c.wmu.Lock()
	defer c.rmu.Unlock()
	defer c.wmu.Unlock()
	var drain deadline
	drain.init()
	end := time.Now().Add(closeLinger)
	drain.set(end)
	c.mu.Lock()
	c.closing = false // the drain below waits like a Write
	if c.state&stConnected != 0 && c.quiet {
		c.pollLocked() // the peer's first message may be in
	}
	// Still quiet: nothing was exchanged, and the DISCONNECT message
	// could not go before the peer sends; the CM's disconnect says it.
	if c.state&stConnected != 0 && !c.quiet {
		c.state &^= stReadable | stWritable
		c.sendCtrl(ctrlDisconnect, &drain) //nolint:errcheck // best effort: the CM disconnects anyway
		c.wait(&drain, allSent)            //nolint:errcheck
		if c.msgSend {
			c.linger(&drain, end)
		}
	}
	c.closing = true
	c.state = 0
	c.mu.Unlock()
	drain.shutdown()
	c.gone.Store(true)
	return c.release()
}

// linger is Close's wait on iWARP (see iwarpLinger); dl is Close's drain
// deadline, which ends at end. mu held.
func (c *Conn) linger(dl *deadline, end time.Time) {
	if lingerOver(c) {
		c.lingered = "not needed"
		return
	}
	if d := time.Now().Add(iwarpLinger); d.Before(end) {
		dl.set(d)
	}
	c.wait(dl, lingerOver) //nolint:errcheck // at the linger's end the CM disconnects anyway
	switch {
	case peerReadAll(c):
		c.lingered = "peer read all"
	case peerDone(c):
		c.lingered = "peer closed"
	default:
		c.lingered = "timed out"
	}
}

// release destroys the connection's QP, CQ and ID, deregisters its buffers
// and unmaps them.
func (c *Conn) release() error {
	// Disconnect first: the QP goes to the error state, so the peer can
	// no longer RDMA-write (credits) into the receive MR. Then the MRs, then
	// the QP and ID: closing an accepted connection may close its channel
	// and the PD, which the kernel refuses while MRs are on it.
	var errs []error
	if c.rc != nil && c.rc.ID.Err() == nil {
		c.rc.Disconnect() //nolint:errcheck // may be down already; Close reports
	}
	errs = append(errs, c.deregister())
	if c.rc != nil {
		errs = append(errs, c.rc.Close())
	}
	errs = append(errs, c.mem.Close())
	return errors.Join(errs...)
}

// SetKeepAlive turns keepalives on or off: while on, every period
// (SetKeepAlivePeriod; default 15 s, Go's TCP default) the connection sends
// rsocket's keepalive, a zero-length RDMA WRITE the peer's RC transport
// acknowledges without waking its application. A peer that is gone fails
// the write after the transport's retries: the connection breaks and
// blocked calls return an error.
func (c *Conn) SetKeepAlive(on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.gone.Load() {
		return c.opError("set", net.ErrClosed)
	}
	if !on {
		if c.kaTimer != nil {
			c.kaTimer.Stop()
			c.kaTimer = nil
		}
		return nil
	}
	if c.kaTimer == nil {
		if c.kaPeriod == 0 {
			c.kaPeriod = 15 * time.Second
		}
		c.kaTimer = time.AfterFunc(c.kaPeriod, c.keepalive)
	}
	return nil
}

// SetKeepAlivePeriod sets the time between keepalives (rsocket's
// TCP_KEEPIDLE).
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	if d <= 0 {
		return c.opError("set", syscall.EINVAL)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kaPeriod = d
	if c.kaTimer != nil {
		c.kaTimer.Reset(d)
	}
	return nil
}

// keepalive sends one keepalive (tcp_svc_send_keepalive) and re-arms.
func (c *Conn) keepalive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kaTimer == nil || c.closing {
		return
	}
	if c.state&stConnected != 0 && c.ctrlAvail() && !c.quiet {
		c.ctrlSeq++
		c.swr[0] = uverbs.SendWR{ID: uint64(msgSet(opCtrl, ctrlKeepalive)), Opcode: uverbs.WRRDMAWrite,
			RemoteAddr: c.remoteSGL.Addr, RKey: c.remoteSGL.Key}
		if _, err := c.qp.PostSend(c.swr[:1]); err != nil {
			c.fail(c.postErr(err))
		}
	}
	c.kaTimer.Reset(c.kaPeriod)
}

// LocalAddr is the local address of the connection.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline of Read: after it, a blocked or
// future Read returns an error wrapping os.ErrDeadlineExceeded.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.gone.Load() {
		return c.opError("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the deadline of Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.gone.Load() {
		return c.opError("set", net.ErrClosed)
	}
	c.wdl.set(t)
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "rsocket", Source: c.laddr, Addr: c.raddr, Err: err}
}
