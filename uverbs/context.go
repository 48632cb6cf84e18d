package uverbs

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var ne = binary.NativeEndian

// OpenOptions tune Open. The zero value is what programs want.
type OpenOptions struct {
	// Transport forces the command transport (tests force each path);
	// the default is rdma-core's rule: ioctl first, write() where the
	// kernel has no ioctl method.
	Transport CommandPolicy
	// Recorder, if set, records the cost of every verb from Open on.
	Recorder *Recorder
	// MLX5 tunes the mlx5 provider (ConnectX devices only).
	MLX5 MLX5Options
}

// Context is an open device: the uverbs command file, the kernel's user
// context, the provider's state and the async event file. Every object is
// created from a Context, and all of them die with it.
//
// A Context and every object made from it are safe for concurrent use,
// except where a type's documentation says otherwise (the fast path:
// one goroutine polls a CQ at a time; PostSend/PostRecv per the provider).
// Close waits for the commands in flight, destroys everything, and wakes
// every goroutine parked in NextAsyncEvent, CompChannel.Wait or CQ.Wait:
// they, and every verb on the Context or its objects after Close, return an
// error for which errors.Is(err, ErrClosed) holds. Objects' Close after it
// returns nil.
type Context struct {
	dev  Device
	file *abi.File
	prov provider.Context
	// The async event fd: asyncFd from GET_CONTEXT or ASYNC_EVENT_ALLOC
	// (-1 once closed), async the same put on the runtime poller, made
	// on first use (asyncEventFile), both guarded by asyncMu.
	asyncMu sync.Mutex
	asyncFd int
	async   *os.File

	numCompVectors int
	// skipCapChecks lets a test send a command its capability check would
	// refuse, to see the kernel's own answer.
	skipCapChecks bool
	// caps is the device's attributes as the context's first successful
	// QueryDevice read them, for the capability checks (capabilities).
	caps        atomic.Pointer[DeviceAttr]
	postNamesQP bool // the provider's send doorbell is a command naming the QP (rxe, siw)
	// cpuOnly: the device is software (rxe, siw), so the kernel answers
	// its queries, PD and context commands, the QP transitions that
	// resolve no address and the creation and destruction of CQs, QPs
	// and SRQs on the CPU, without waiting on hardware (their only waits
	// are for the driver's own packet tasks to let go of the object): those
	// go as quick (raw) syscalls (abi.Ioctl.Quick), and so do opening and
	// closing the context's files (abi.OpenCPU), deregistering memory
	// (unpinning is CPU work) and registering at most quickPinMax bytes.
	// mlx5's commands are firmware round trips and stay ordinary syscalls;
	// larger registrations (page pinning, which can wait for I/O) and AH
	// creation (which can wait for ARP) stay ordinary everywhere.
	cpuOnly     bool
	coreSupport uint64

	// transports is each verb's last transport, in first-call order,
	// guarded by transportsMu. transportSeen caches, by the address of a
	// verb name's bytes, that transports already says that verb's last
	// call went by a transport: (address<<2 | transport), 0 for an empty
	// slot. Verb names are constants, so a command's check is an atomic
	// load and a compare; a sync.Map's interface hash cost ~190
	// instructions a command, and a map per context a hash seed.
	transportsMu  sync.Mutex
	transports    []verbTransport
	transportSeen [transportSlots]atomic.Uint64
	// transportsBuf is transports' first array: Open's own note (the
	// first) allocates nothing. Two entries keep the Context in the
	// 1,536-byte size class (four took it to 1,792).
	transportsBuf [2]verbTransport
	// The live objects, released by Close; a CQ's, QP's or SRQ's tag
	// here is its user handle, which the kernel's events name it by.
	cqs      registry[CQ]
	qps      registry[QP]
	srqs     registry[SRQ]
	mrs      registry[MR] // MRs pinning Go memory, unpinned at Close
	channels registry[CompChannel]
	events   asyncEvents
	dead     chan struct{} // closed by Close: waiters select on it

	watchMu      sync.Mutex // guards watch
	watchStarted atomic.Bool
	watch        *os.File                 // inotify on the device node's directory
	lost         atomic.Bool              // the device is gone (lostWhy says how it was seen)
	lostWhy      atomic.Uint32            // a lossWhy, stored before lost
	lostOnce     sync.Once                // closes lostCh
	lostCh       chan struct{}            // closed when the device is lost
	fatalSent    atomic.Bool              // NextAsyncEvent handed out an EventDeviceFatal (the kernel's or one goverbs made)
	fw           atomic.Pointer[fwString] // QueryDevice's last FWVersion
	netdevMu     sync.Mutex
	netdevs      netdevNames // interface index → name, for GID entries
	// Repeated queries, built on first use (Context.prepared).
	gidQuery  atomic.Pointer[abi.Prepared]
	portQuery atomic.Pointer[abi.Prepared]
	// destroys[object]: the kept destroy call of that UVERBS_OBJECT_*
	// (destroyObject).
	destroys [24]atomic.Pointer[abi.Kept[destroyShape]]
	closed   atomic.Bool
	teardown atomic.Bool // Close is destroying the objects left open
	rec      atomic.Pointer[Recorder]
}

// Open opens d: GET_CONTEXT with its provider's driver data, then the
// async event file. It costs two syscalls plus the open (rdma-core's count).
func Open(d Device) (*Context, error) { return OpenWith(d, OpenOptions{}) }

// OpenWith is Open with options.
func OpenWith(d Device, o OpenOptions) (_ *Context, err error) {
	if d.CharDev == "" {
		return nil, &OpError{Verb: "Open", Device: d.Name, Err: fmt.Errorf("%w: device has no uverbs character device", ErrNoDevice)}
	}
	software := d.Driver == DriverRXE || d.Driver == DriverSIW
	open := abi.Open
	if software {
		open = abi.OpenCPU
	}
	f, err := open(d.CharDev, uint32(d.Driver))
	if err != nil {
		return nil, opError("Open", d.Name, abi.TransportNone, err)
	}
	f.SetPolicy(abi.Policy(o.Transport))
	c := &Context{dev: d, file: f, dead: make(chan struct{}), lostCh: make(chan struct{}), postNamesQP: software}
	c.cpuOnly = software
	c.asyncFd = -1
	c.transports = c.transportsBuf[:0]
	c.rec.Store(o.Recorder)
	if sp := c.begin("Open"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	drv := driverWith(d.Driver, o)
	prov, err := drv.NewContext(kernelOps{c})
	if err != nil {
		f.Close()
		return nil, err
	}
	c.prov = prov
	if c.asyncFd < 0 {
		if err := c.allocAsyncFD(); err != nil {
			c.prov.Close()
			f.Close()
			return nil, err
		}
	}
	return c, nil
}

// Device is the device this context was opened on.
func (c *Context) Device() Device { return c.dev }

// NumCompVectors is the number of completion vectors (interrupt queues) a
// CQ can be bound to.
func (c *Context) NumCompVectors() int { return c.numCompVectors }

// Transports reports, for every verb called on this context, whether its
// last call went by ioctl or write (or neither).
func (c *Context) Transports() map[string]CommandTransport {
	c.transportsMu.Lock()
	defer c.transportsMu.Unlock()
	m := make(map[string]CommandTransport, len(c.transports))
	for _, v := range c.transports {
		m[v.verb] = CommandTransport(v.tr)
	}
	return m
}

// verbTransport is one entry of Context.transports.
type verbTransport struct {
	verb string
	tr   abi.Transport
}

// noteTransport records that verb's last call went by tr (Transports).
func (c *Context) noteTransport(verb string, tr abi.Transport) {
	if !c.transportNoted(verb, tr) {
		c.noteTransportSlow(verb, tr)
	}
}

// transportNoted reports whether transports already says that verb's last
// call went by tr: an atomic load and a compare, inlined where commands
// check it themselves (a call costs ~15 ns under emulation, where every
// command's user time shows).
func (c *Context) transportNoted(verb string, tr abi.Transport) bool {
	a := stringAddr(verb)
	return c.transportSeen[a>>3&(transportSlots-1)].Load() == uint64(a)<<2|uint64(tr&3)
}

// transportSlots is the length of Context.transportSeen (a power of two).
const transportSlots = 64

// noteTransportSlow is noteTransport's record of a verb's first call or a
// change, out of line: the check every command makes (transportNoted)
// stays small enough to inline, without the lock and its deferred unlock.
func (c *Context) noteTransportSlow(verb string, tr abi.Transport) {
	a := stringAddr(verb)
	key := uint64(a)<<2 | uint64(tr&3)
	slot := &c.transportSeen[a>>3&(transportSlots-1)]
	// Slots are written only here, under the lock, once the list says
	// what they say: a hit never hides a change.
	c.transportsMu.Lock()
	defer c.transportsMu.Unlock()
	found := false
	for i := range c.transports {
		if c.transports[i].verb == verb {
			c.transports[i].tr, found = tr, true
			break
		}
	}
	if !found {
		c.transports = append(c.transports, verbTransport{verb, tr})
	}
	slot.Store(key)
}

// invoke runs a write-style command by ioctl or write, for verb.
func (c *Context) invoke(verb string, cmd *abi.Command) error {
	if c.closed.Load() {
		return &OpError{Verb: verb, Device: c.dev.Name, Err: ErrClosed}
	}
	tr, err := c.file.Invoke(cmd)
	if !c.transportNoted(verb, tr) {
		c.noteTransportSlow(verb, tr)
	}
	if c.rec.Load() != nil { // noteCommand is a call, even to find none
		c.noteCommand(verb, tr, len(cmd.In)+len(cmd.DriverIn), len(cmd.Out)+len(cmd.DriverOut))
	}
	return opError(verb, c.dev.Name, tr, err)
}

// fallback runs the write form of a verb whose ioctl method the kernel
// lacks (called from the write function given to ioctl).
func (c *Context) fallback(verb string, cmd *abi.Command) error {
	tr, err := c.file.Invoke(cmd)
	c.noteCommand(verb, tr, len(cmd.In)+len(cmd.DriverIn), len(cmd.Out)+len(cmd.DriverOut))
	return err
}

// ioctl runs b; if the kernel has no such ioctl method and write != nil,
// write runs the verb's write form instead. The transport tells the caller
// which form's outputs to read.
func (c *Context) ioctl(verb string, b *abi.Ioctl, write func() error) (abi.Transport, error) {
	return c.ioctlOr(verb, b, abi.TransportWrite, write)
}

// ioctlOr is ioctl with a fallback that goes by another way than write()
// (via: abi.TransportNone for sysfs, as the GID queries fall back).
func (c *Context) ioctlOr(verb string, b *abi.Ioctl, via abi.Transport, fallback func() error) (abi.Transport, error) {
	if c.closed.Load() {
		return abi.TransportNone, &OpError{Verb: verb, Device: c.dev.Name, Err: ErrClosed}
	}
	err := c.file.Ioctl(b)
	if err != nil && abi.IsNoIoctl(err) && fallback != nil {
		c.noteTransport(verb, via)
		return via, opError(verb, c.dev.Name, via, fallback())
	}
	c.noteTransport(verb, abi.TransportIoctl)
	if c.rec.Load() != nil {
		in, out := b.Sizes()
		c.noteCommand(verb, abi.TransportIoctl, in, out)
	}
	if err != nil {
		return abi.TransportIoctl, opError(verb, c.dev.Name, abi.TransportIoctl, err)
	}
	return abi.TransportIoctl, nil
}

// flatIoctl runs verb's command by the flat path (abi.File.FlatIoctl)
// where the context allows it (no recorder, not closed), noting its
// transport; err is then the kernel's answer as an *OpError. done false:
// nothing was decided, and the caller takes the builder's path.
func (c *Context) flatIoctl(verb string, object, method uint16, quick bool, attrs []abi.FlatAttr, outID uint16, out []byte) (done bool, err error) {
	if !c.flatAllowed() {
		return false, nil
	}
	if done, err = c.file.FlatIoctl(object, method, quick, attrs, outID, out); !done {
		return false, nil
	}
	// The note and the error, as flatMethod's: a shared helper would not
	// inline (transportNoted's check is most of the budget), and a call
	// costs ~15 ns under emulation on the cheapest commands.
	if !c.transportNoted(verb, abi.TransportIoctl) {
		c.noteTransportSlow(verb, abi.TransportIoctl)
	}
	return true, opError(verb, c.dev.Name, abi.TransportIoctl, err)
}

// flatMethod is flatIoctl for a method of more attributes
// (abi.File.FlatMethod): valid says which outputs the kernel wrote.
func (c *Context) flatMethod(verb string, object, method uint16, quick bool, inline []abi.FlatAttr, bufs []abi.FlatBuf) (done bool, valid uint32, err error) {
	if !c.flatAllowed() {
		return false, 0, nil
	}
	if done, valid, err = c.file.FlatMethod(object, method, quick, inline, bufs); !done {
		return false, 0, nil
	}
	if !c.transportNoted(verb, abi.TransportIoctl) {
		c.noteTransportSlow(verb, abi.TransportIoctl)
	}
	return true, valid, opError(verb, c.dev.Name, abi.TransportIoctl, err)
}

// flatAllowed reports whether a command may take the flat path: the
// recorder times the builder's, and a closed context's file refuses.
func (c *Context) flatAllowed() bool { return c.rec.Load() == nil && !c.closed.Load() }

// getContext runs GET_CONTEXT: by ioctl (then the async fd is allocated
// separately), or by write, which also returns the async fd.
func (c *Context) getContext(driverIn, driverOut []byte) error {
	var vectors [4]byte
	var sup [8]byte
	bufs := [4]abi.FlatBuf{
		{ID: abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, Out: true, B: vectors[:]},
		{ID: abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, Out: true, Optional: true, B: sup[:]},
	}
	nb := abi.FlatUHW(bufs[:], 2, driverIn, driverOut)
	done, valid, err := c.flatMethod("Open", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT, c.cpuOnly, nil, bufs[:nb])
	if !done {
		return c.getContextBuilt(driverIn, driverOut)
	}
	if err != nil {
		return err
	}
	if valid&1 != 0 {
		c.numCompVectors = int(ne.Uint32(vectors[:]))
	}
	if valid&2 != 0 { // optional: an older kernel may leave it
		c.coreSupport = ne.Uint64(sup[:])
	}
	return nil
}

// getContextBuilt is getContext by the builder, with GET_CONTEXT by write
// where the kernel has no method.
func (c *Context) getContextBuilt(driverIn, driverOut []byte) error {
	b := abi.NewIoctl(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT)
	defer b.Release()
	if c.cpuOnly {
		b.Quick()
	}
	// Outputs read from the builder (PtrOutLen): PtrOut's buffers would
	// escape to the heap, two allocations an Open.
	vectors := b.PtrOutLen(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 4)
	sup := b.PtrOutLen(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, 8)
	b.Optional(sup)
	b.UHW(driverIn, driverOut)
	tr, err := c.ioctl("Open", b, func() error {
		var req abi.IbUverbsGetContext
		var resp abi.IbUverbsGetContextResp
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_GET_CONTEXT, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: driverIn, DriverOut: driverOut, Quick: c.cpuOnly}
		if err := c.fallback("Open", &cmd); err != nil {
			return err
		}
		c.numCompVectors = int(resp.NumCompVectors)
		c.asyncFd = int(resp.AsyncFd)
		return nil
	})
	if err == nil && tr == abi.TransportIoctl {
		if v := b.Output(vectors); len(v) == 4 {
			c.numCompVectors = int(ne.Uint32(v))
		}
		if s := b.Output(sup); len(s) == 8 { // optional: an older kernel may leave it
			c.coreSupport = ne.Uint64(s)
		}
	}
	return err
}

// allocAsyncFD creates the async event file (ASYNC_EVENT_ALLOC), which the
// ioctl form of GET_CONTEXT does not.
func (c *Context) allocAsyncFD() error {
	inline := [1]abi.FlatAttr{{ID: abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE}} // UVERBS_ACCESS_NEW: the kernel writes the fd here
	done, _, err := c.flatMethod("Open", abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC, c.cpuOnly, inline[:], nil)
	if !done {
		return c.allocAsyncFDBuilt()
	}
	if err != nil {
		return err
	}
	c.asyncFd = int(int32(inline[0].Data))
	return nil
}

// allocAsyncFDBuilt is allocAsyncFD by the builder.
func (c *Context) allocAsyncFDBuilt() error {
	b := abi.NewIoctl(abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC)
	defer b.Release()
	if c.cpuOnly {
		b.Quick()
	}
	h := b.NewObject(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	if _, err := c.ioctl("Open", b, nil); err != nil {
		return err
	}
	c.asyncFd = int(b.Result(h))
	return nil
}

// asyncEventFile is the async event fd on the runtime poller, made on
// first use (NextAsyncEvent), or nil once the context is closed. Putting
// the fd on the poller takes three syscalls (asyncFile) and taking it off
// one more at Close: a context that never reads its events pays none of
// them, so opening and closing one makes the syscalls rdma-core's do.
func (c *Context) asyncEventFile() *os.File {
	c.asyncMu.Lock()
	defer c.asyncMu.Unlock()
	if c.async == nil && c.asyncFd >= 0 {
		c.async = asyncFile(c.asyncFd)
	}
	return c.async
}

// asyncFile puts an event fd on Go's runtime poller: non-blocking, so a
// goroutine waiting on it parks without holding an OS thread.
//
// The kernel creates event fds with no file status flags, so one F_SETFL
// sets O_NONBLOCK (SetNonblock would read the flags first). os.NewFile then
// reads them back (F_GETFL) and registers the fd with epoll: three syscalls
// in all, what an rdma-core program pays to put the same fd in its epoll set.
func asyncFile(fd int) *os.File {
	unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK)
	return os.NewFile(uintptr(fd), "uverbs-event")
}

// Close releases the context: the kernel destroys every object still open
// in it, and their queue memory is released; those objects' methods then
// fail. Close is idempotent.
func (c *Context) Close() (err error) {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.dead)
	if sp := c.begin("CloseContext"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	var first error
	// The kernel would destroy every object left open when the file
	// closes, but only once the provider's mappings of the file are gone
	// too, and the device must stop using the objects' memory before it
	// is freed: so destroy what is left, QPs before the SRQs and CQs they
	// use, then release each one's memory.
	c.teardown.Store(true)
	release := func(o interface{ releaseProvider() error }) {
		if err := o.releaseProvider(); err != nil && first == nil {
			first = err
		}
	}
	for _, qp := range c.qps.drain() {
		release(qp)
	}
	for _, srq := range c.srqs.drain() {
		release(srq)
	}
	for _, cq := range c.cqs.drain() {
		release(cq)
	}
	for _, mr := range c.mrs.drain() {
		release(mr)
	}
	c.teardown.Store(false)
	for _, ch := range c.channels.list() {
		if err := ch.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.asyncMu.Lock()
	switch {
	case c.async != nil:
		if err := c.async.Close(); err != nil && first == nil {
			first = err
		}
	case c.asyncFd >= 0:
		closeFd := unix.Close
		if c.cpuOnly {
			closeFd = abi.CloseCPU
		}
		if err := closeFd(c.asyncFd); err != nil && first == nil {
			first = err
		}
	}
	c.asyncFd = -1
	c.asyncMu.Unlock()
	if err := c.stopWatch(); err != nil && first == nil {
		first = err
	}
	if err := c.file.Close(); err != nil && first == nil {
		first = err
	}
	if err := c.prov.Close(); err != nil && first == nil {
		first = err
	}
	return opError("Close", c.dev.Name, abi.TransportNone, first)
}

// kernelOps is what a provider may ask of its context.
type kernelOps struct{ c *Context }

func (k kernelOps) File() *abi.File { return k.c.file }

func (k kernelOps) GetContext(in, out []byte) error { return k.c.getContext(in, out) }

func (k kernelOps) ReqNotifyCQ(cq uint32, solicited bool) error {
	req := abi.IbUverbsReqNotifyCq{CqHandle: cq}
	if solicited {
		req.SolicitedOnly = 1
	}
	// REQ_NOTIFY_CQ has no response and no ioctl method: a plain write,
	// as librxe does it.
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, In: abi.Bytes(&req), Quick: k.c.cpuOnly}
	return k.c.invoke("ReqNotifyCQ", &cmd)
}

func (k kernelOps) ModifyQPState(qp uint32, state provider.QPState) error {
	a := QPAttr{State: state}
	var req abi.IbUverbsModifyQp
	a.toModify(&req, qp, QPAttrState)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_MODIFY_QP, In: abi.Bytes(&req), Quick: k.c.cpuOnly} // a state alone resolves no address
	return k.c.invoke("ModifyQP", &cmd)
}

func (k kernelOps) CopyOnFork() bool { return copyOnFork() }

// QueryGID makes kernelOps a provider.GIDQuerier.
func (k kernelOps) QueryGID(port, index int) ([16]byte, error) {
	var e GIDEntry
	err := k.c.queryGID(&e, port, index)
	return e.GID, err
}

// prepared is the context's kept call in *slot, built on first use: a
// query a program repeats skips the builder's set-up (abi.Prepared). Two
// first uses at once may both build one; the first stored is kept.
func (c *Context) prepared(slot *atomic.Pointer[abi.Prepared], object, method uint16, build func(*abi.Ioctl)) *abi.Prepared {
	p := slot.Load()
	if p == nil {
		p = preparedFirst(slot, object, method, build)
	}
	return p
}

// preparedFirst is prepared's first use, out of line: a call after the
// first is a load and a compare (prepared itself stays above the inliner's
// budget by a little, 83 against 80).
func preparedFirst(slot *atomic.Pointer[abi.Prepared], object, method uint16, build func(*abi.Ioctl)) *abi.Prepared {
	slot.CompareAndSwap(nil, abi.NewPrepared(object, method, build))
	return slot.Load()
}
