package rdmacm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

var debug = os.Getenv("RDMACM_DEBUG") != ""

// DevicePath is the rdma_cm character device.
const DevicePath = "/dev/infiniband/rdma_cm"

// EventChannel is an open rdma_cm file (librdmacm's struct
// rdma_event_channel): the IDs created on it and their events. The file is
// non-blocking and registered with Go's runtime poller; one reader
// goroutine per channel parks there between events and hands each event to
// the ID it is for, so no goroutine or OS thread is held per ID, listener or
// connection.
//
// The channel also holds, per RDMA device the CM picks, one uverbs context
// and one protection domain, shared by the connections made on it. Close
// the connections, listeners and IDs first, then the channel.
type EventChannel struct {
	file *os.File
	rc   syscall.RawConn

	mu    sync.Mutex
	sinks map[uint64]sink    // by uid
	devs  map[uint64]*device // by node GUID
	err   error              // why the reader stopped (ErrClosed after Close)
	done  chan struct{}      // closed when the reader stops

	refs      int // owners of a channel Dial or Listen opened
	closeOnce sync.Once
	closing   atomic.Bool // set by Close before the file closes
}

// acquire adds an owner to a channel Dial or Listen opened.
func (ch *EventChannel) acquire() {
	ch.mu.Lock()
	ch.refs++
	ch.mu.Unlock()
}

// release drops an owner and closes the channel after the last.
func (ch *EventChannel) release() error {
	ch.mu.Lock()
	ch.refs--
	last := ch.refs == 0
	ch.mu.Unlock()
	if last {
		return ch.Close()
	}
	return nil
}

// sink is what an event's uid names: an ID or a multicast group.
type sink interface {
	deliver(ev Event)
	udEvents() bool // the id's events carry rdma_ucm_ud_param
	stop(err error) // the channel stopped
}

// Open opens the rdma_cm device and starts the channel's reader.
func Open() (*EventChannel, error) {
	fd, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			return nil, opError("Open", fmt.Errorf("%s: %w (is the rdma_ucm module loaded?)", DevicePath, err))
		}
		return nil, opError("Open", fmt.Errorf("%s: %w", DevicePath, err))
	}
	// The fd is non-blocking before NewFile, so the runtime poller takes it.
	f := os.NewFile(uintptr(fd), DevicePath)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, opError("Open", err)
	}
	ch := &EventChannel{file: f, rc: rc, sinks: map[uint64]sink{}, devs: map[uint64]*device{}, done: make(chan struct{})}
	go ch.reader()
	return ch, nil
}

// Fd is the channel's file descriptor. Do not read, write or close it.
func (ch *EventChannel) Fd() int { return int(ch.file.Fd()) }

// Close closes the channel: the kernel destroys every ID still on it, and
// every call blocked on one of them returns an error matching ErrClosed.
// It closes the uverbs contexts the channel opened (close the connections
// first: their QPs hold them). It is idempotent.
func (ch *EventChannel) Close() error {
	var err error
	ch.closeOnce.Do(func() {
		ch.closing.Store(true)
		err = ch.file.Close()
		<-ch.done
		ch.mu.Lock()
		devs := ch.devs
		ch.devs = nil
		ch.mu.Unlock()
		for _, d := range devs {
			if e := d.close(); e != nil && err == nil {
				err = e
			}
		}
	})
	return opError("Close", err)
}

// write sends one ucma command that has no response: the header, then
// in. keep, if the request points at memory (SET_OPTION's value), is that
// memory, kept alive across the write; its length is the header's out.
// ibCM says the ID's device runs the IB CM (see quickCommand).
func (ch *EventChannel) write(op string, cmd uint32, in, keep []byte, ibCM bool) error {
	f, err := getFrame(op, cmd, in, len(keep))
	if err != nil {
		return err
	}
	f.keep, f.ibCM = keep, ibCM
	err = ch.run(op, f)
	putFrame(f)
	return err
}

// call sends one ucma command whose response the kernel writes where the
// request's u64 at respAt points, and copies the response into out. The
// caller leaves that field zero: call points it at its frame's response
// area, heap memory that stays put across the write, so out (and in) may
// live on the caller's stack.
func (ch *EventChannel) call(op string, cmd uint32, in []byte, respAt int, out []byte) error {
	if respAt < 0 || respAt+8 > len(in) {
		return opError(op, fmt.Errorf("command %d: no response pointer at %d of a %d-byte request", cmd, respAt, len(in)))
	}
	f, err := getFrame(op, cmd, in, len(out))
	if err != nil {
		return err
	}
	clear(f.resp[:len(out)])
	binary.NativeEndian.PutUint64(f.buf[8+respAt:], addrOf(f.resp[:]))
	err = ch.run(op, f)
	if err == nil {
		copy(out, f.resp[:len(out)])
	}
	putFrame(f)
	return err
}

// cmdFrame is the memory of one command, pooled so that a command
// allocates nothing: the header and request as written, the response area
// the request's response pointer names, and the function RawConn.Control
// runs, made once per frame (a closure made per call would be allocated).
type cmdFrame struct {
	buf  [8 + 296]byte // the header and the largest request (ACCEPT)
	resp [280]byte     // the largest response read (QUERY's address)
	n    int           // bytes of buf to write
	keep []byte        // memory the request points at, other than resp
	ibCM bool          // the ID's device runs the IB CM (quickCommand)
	werr error
	do   func(fd uintptr)
}

var framePool = sync.Pool{New: func() any {
	f := new(cmdFrame)
	f.do = f.writeTo
	return f
}}

// getFrame takes a frame from the pool holding the command's header (out
// bytes of response) and request.
func getFrame(op string, cmd uint32, in []byte, out int) (*cmdFrame, error) {
	f := framePool.Get().(*cmdFrame)
	if 8+len(in) > len(f.buf) || out > len(f.resp) {
		framePool.Put(f)
		return nil, opError(op, fmt.Errorf("command %d: a %d-byte request or %d-byte response is larger than a frame", cmd, len(in), out))
	}
	binary.NativeEndian.PutUint32(f.buf[0:], cmd)
	binary.NativeEndian.PutUint16(f.buf[4:], uint16(len(in)))
	binary.NativeEndian.PutUint16(f.buf[6:], uint16(out))
	f.n = 8 + copy(f.buf[8:], in)
	return f, nil
}

// putFrame returns a frame to the pool, holding no caller memory.
func putFrame(f *cmdFrame) {
	f.keep, f.werr, f.ibCM = nil, nil, false
	framePool.Put(f)
}

// writeTo writes the frame's command to fd, again after EINTR.
func (f *cmdFrame) writeTo(fd uintptr) {
	quick := quickCommand(binary.NativeEndian.Uint32(f.buf[0:]), f.ibCM)
	for {
		// buf keeps the frame, and with it resp, alive.
		_, f.werr = rawWrite(fd, f.buf[:f.n], f.keep, quick)
		if f.werr != unix.EINTR {
			return
		}
	}
}

// quickCommand reports whether the kernel answers cmd without waiting on
// the network or a peer (rawWrite's quick): it reads or sets the id's state,
// or starts work it reports by an event (address and route resolution).
//
// DESTROY_ID is quick too: it waits only for the kernel's own handlers of
// the id (CM work items, MAD completions after it cancels them). The wait
// that is not bounded so, iWARP's destroy waiting for a CONNECT or ACCEPT
// downcall (siw connects a TCP socket, blocking), cannot happen here: an
// ID's commands hold its kmu shared and Close takes it exclusively, so
// DESTROY_ID never overlaps that ID's CONNECT or ACCEPT.
//
// CONNECT, ACCEPT, REJECT and DISCONNECT are quick on an ID whose device
// runs the IB CM (InfiniBand, RoCE: ibCM): they send a REQ, REP, RTU, REJ,
// DREQ or DREP MAD and return (ib_send_cm_* in Linux's cm.c post it and
// wait for nothing; the path was resolved before). On iWARP they connect,
// send on or shut a TCP socket (siw's connect is a blocking TCP connect):
// not quick there, nor on an ID whose device is not known yet.
//
// Why it matters: an ordinary syscall made while the runtime's monitor
// sleeps (it does while every P is idle, as in a wait for the CM's answer)
// wakes it into 20 µs naps and then 10 ms ones, with a preemption of a
// goroutine that ran 10 ms, for as long as the program spins without
// parking. A dialer's last commands come after its last wait (the RTU,
// after CONNECT_RESPONSE): made quick, with the RTR modify before it
// (uverbs' QP.ModifyResolved), they leave the monitor asleep into the
// connection's first messages (docs/COST.md, session 47).
//
// Not quick: LISTEN (a listening socket on iWARP), JOIN_*MCAST and
// LEAVE_MCAST (the subnet administrator; leaving waits for its callbacks),
// MIGRATE_ID (two files' locks), and any other.
//
// Measured on 6.1 under TCG with test/perf/slowloop's cm_resolve (create,
// resolve address and route, destroy): strace counted 3,280 nanosleep and
// 9,717 clock_gettime calls in 500 with every command through Syscall,
// 1,055 and 4,423 with these quick. Time: in one boot (8 alternating
// rounds of 2,000, medians) 883 µs through Syscall, 963 with all but
// DESTROY_ID quick, 771 with these quick, librdmacm 794; ibvcost's CM rows
// in three boots against the build before moved 0.8-1.4x either way, as
// much as the same binary moves between boots (docs/COST.md).
func quickCommand(cmd uint32, ibCM bool) bool {
	switch cmd {
	case abi.RDMA_USER_CM_CMD_CONNECT, abi.RDMA_USER_CM_CMD_ACCEPT,
		abi.RDMA_USER_CM_CMD_REJECT, abi.RDMA_USER_CM_CMD_DISCONNECT:
		return ibCM
	case abi.RDMA_USER_CM_CMD_DESTROY_ID,
		abi.RDMA_USER_CM_CMD_CREATE_ID, abi.RDMA_USER_CM_CMD_BIND, abi.RDMA_USER_CM_CMD_BIND_IP,
		abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, abi.RDMA_USER_CM_CMD_RESOLVE_IP, abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE,
		abi.RDMA_USER_CM_CMD_QUERY, abi.RDMA_USER_CM_CMD_QUERY_ROUTE, abi.RDMA_USER_CM_CMD_INIT_QP_ATTR,
		abi.RDMA_USER_CM_CMD_GET_OPTION, abi.RDMA_USER_CM_CMD_SET_OPTION, abi.RDMA_USER_CM_CMD_NOTIFY:
		return true
	}
	return false
}

// run writes the frame's command to the channel's file.
func (ch *EventChannel) run(op string, f *cmdFrame) error {
	if err := ch.rc.Control(f.do); err != nil {
		return opError(op, ch.fileErr(err))
	}
	return opError(op, f.werr)
}

// fileErr is ErrClosed for an error of the file's RawConn once Close has
// begun: a closed os.File's RawConn answers the poller's "use of closed
// file", which is not os.ErrClosed.
func (ch *EventChannel) fileErr(err error) error {
	if errors.Is(err, os.ErrClosed) || ch.closing.Load() {
		return ErrClosed
	}
	return err
}

// reader reads events until the channel is closed. Between events it is
// parked on the runtime poller: GET_EVENT is a write() and the file only
// ever reports EPOLLIN, so the write is made from RawConn.Read's callback,
// which retries it each time the poller says the file is readable.
func (ch *EventChannel) reader() {
	resp := make([]byte, 336)
	var req abi.RdmaUcmGetEvent
	req.Response = addrOf(resp)
	hdr := make([]byte, 8+8)
	binary.NativeEndian.PutUint32(hdr[0:], abi.RDMA_USER_CM_CMD_GET_EVENT)
	binary.NativeEndian.PutUint16(hdr[4:], 8)
	binary.NativeEndian.PutUint16(hdr[6:], uint16(len(resp)))
	copy(hdr[8:], abi.Bytes(&req))
	// One function for every event (a closure made per event would be
	// allocated per event). The file is non-blocking, so GET_EVENT never
	// waits: a quick command.
	var werr error
	get := func(fd uintptr) bool {
		_, werr = rawWrite(fd, hdr, resp, true)
		return werr != unix.EAGAIN
	}
	for {
		werr = nil
		err := ch.rc.Read(get)
		if err == nil && werr == unix.EINTR {
			continue
		}
		if err != nil || werr != nil {
			if err == nil {
				err = werr
			}
			ch.stop(ch.fileErr(err))
			return
		}
		ev, derr := decodeEvent(resp, ch.isUD)
		if derr != nil {
			continue // cannot happen: the kernel wrote a whole event
		}
		ch.dispatch(ev)
	}
}

func (ch *EventChannel) isUD(uid uint64, _ EventType) bool {
	ch.mu.Lock()
	s := ch.sinks[uid]
	ch.mu.Unlock()
	return s != nil && s.udEvents()
}

// dispatch hands ev to the sink its uid names.
func (ch *EventChannel) dispatch(ev Event) {
	ch.mu.Lock()
	s := ch.sinks[ev.uid]
	ch.mu.Unlock()
	if debug {
		fmt.Fprintf(os.Stderr, "rdmacm: event %v status %d uid %d id %d (sink %T)\n", ev.Type, ev.Status, ev.uid, ev.id, s)
	}
	if s == nil {
		if ev.Type == EventConnectRequest {
			// The listener is gone: nobody will accept the new id.
			ch.destroyKernelID(ev.id)
		}
		return
	}
	s.deliver(ev)
}

func (ch *EventChannel) stop(err error) {
	ch.mu.Lock()
	ch.err = err
	sinks := ch.sinks
	ch.sinks = map[uint64]sink{}
	ch.mu.Unlock()
	for _, s := range sinks {
		s.stop(err)
	}
	close(ch.done)
}

// lastUID numbers the sinks of every channel: a uid names one sink in
// the whole program, so that an ID migrated to another channel keeps it.
var lastUID atomic.Uint64

// register gives s a new uid.
func (ch *EventChannel) register(s sink) (uint64, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.err != nil {
		return 0, ch.err
	}
	uid := lastUID.Add(1)
	ch.sinks[uid] = s
	return uid, nil
}

// adopt makes s, registered on another channel under uid, reachable on ch
// too (Migrate).
func (ch *EventChannel) adopt(uid uint64, s sink) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.err != nil {
		return ch.err
	}
	ch.sinks[uid] = s
	return nil
}

func (ch *EventChannel) unregister(uid uint64) {
	ch.mu.Lock()
	delete(ch.sinks, uid)
	ch.mu.Unlock()
}

// destroyKernelID destroys a kernel id that has no Go ID.
func (ch *EventChannel) destroyKernelID(id uint32) {
	req := abi.RdmaUcmDestroyId{Id: id}
	var resp abi.RdmaUcmDestroyIdResp
	_ = ch.call("DestroyID", abi.RDMA_USER_CM_CMD_DESTROY_ID, abi.Bytes(&req), respAtDestroyID, abi.Bytes(&resp))
}

// device is an RDMA device the CM picked, opened once per channel.
type device struct {
	dev  uverbs.Device
	ctx  *uverbs.Context
	pd   *uverbs.PD
	once sync.Once
	err  error
	key  uint64

	// Guarded by the channel's mu: connections using the device, and
	// whether a DEVICE_REMOVAL came for it. A removed device's context is
	// closed with its last connection, so the kernel can finish removing it.
	refs    int
	removed bool
	closed  atomic.Bool

	compMu sync.Mutex
	comp   *uverbs.CompChannel // Config.SharedCompChannel's, made on first use
}

// sharedComp returns the device's shared completion channel, creating it
// on first use.
func (d *device) sharedComp() (*uverbs.CompChannel, error) {
	d.compMu.Lock()
	defer d.compMu.Unlock()
	if d.comp == nil {
		c, err := d.ctx.CreateCompChannel()
		if err != nil {
			return nil, err
		}
		d.comp = c
	}
	return d.comp, nil
}

// useDevice counts a connection on d.
func (ch *EventChannel) useDevice(d *device) {
	ch.mu.Lock()
	d.refs++
	ch.mu.Unlock()
}

// doneDevice drops a connection from d, closing d if it was removed and
// this was the last.
func (ch *EventChannel) doneDevice(d *device) error {
	ch.mu.Lock()
	d.refs--
	last := d.refs == 0 && d.removed
	if last && ch.devs[d.key] == d {
		delete(ch.devs, d.key)
	}
	ch.mu.Unlock()
	if last {
		return d.close()
	}
	return nil
}

// removeDevice marks d removed (a DEVICE_REMOVAL event): no new ID gets
// it, and it is closed when its last connection is.
func (ch *EventChannel) removeDevice(d *device) {
	ch.mu.Lock()
	d.removed = true
	if ch.devs[d.key] == d {
		delete(ch.devs, d.key)
	}
	last := d.refs == 0
	ch.mu.Unlock()
	if last {
		d.close()
	}
}

func (d *device) close() error {
	if d.ctx == nil || d.closed.Swap(true) {
		return nil
	}
	var err error
	if d.pd != nil {
		err = d.pd.Close()
	}
	d.compMu.Lock()
	if d.comp != nil {
		if e := d.comp.Close(); e != nil && err == nil {
			err = e
		}
	}
	d.compMu.Unlock()
	if e := d.ctx.Close(); e != nil && err == nil {
		err = e
	}
	return err
}

// deviceFor opens (once) the uverbs device with node GUID guid, or with
// the kernel device index idx when it is known (Linux 5.8+: several
// devices can share a GUID, rxe ones made on the same netdev do).
func (ch *EventChannel) deviceFor(guid uint64, idx uint32) (*device, error) {
	key := guid
	if idx != 0 {
		key = uint64(idx) | 1<<63
	}
	ch.mu.Lock()
	if ch.devs == nil {
		ch.mu.Unlock()
		return nil, ErrClosed
	}
	d := ch.devs[key]
	if d == nil {
		d = &device{key: key}
		ch.devs[key] = d
	}
	ch.mu.Unlock()
	d.once.Do(func() {
		devs, err := uverbs.Devices()
		if err != nil {
			d.err = err
			return
		}
		var found *uverbs.Device
		for i := range devs {
			if idx != 0 && devs[i].Index == idx {
				found = &devs[i]
				break
			}
		}
		if found == nil {
			for i := range devs {
				if devs[i].NodeGUID == guid {
					found = &devs[i]
					break
				}
			}
		}
		if found == nil {
			d.err = fmt.Errorf("no uverbs device with node GUID %016x (index %d)", guid, idx)
			return
		}
		d.dev = *found
		if d.ctx, d.err = uverbs.Open(*found); d.err != nil {
			return
		}
		if d.pd, d.err = d.ctx.AllocPD(); d.err != nil {
			d.ctx.Close()
			d.ctx = nil
		}
	})
	if d.err != nil {
		return nil, d.err
	}
	return d, nil
}
