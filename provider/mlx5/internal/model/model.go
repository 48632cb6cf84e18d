// Package model is a device model of an mlx5 (ConnectX) adapter, for tests
// of the mlx5 provider where no such hardware is. It plays both sides the
// provider talks to:
//
//   - the kernel: at goverbs' syscall chokepoint (kernel.RegisterFake) it
//     answers the uverbs commands by write() and by ioctl (INVOKE_WRITE and
//     the native methods uverbs uses), with the mlx5 driver data: the
//     ucontext request and its retries, dynamic UARs (MLX5_IB_OBJECT_UAR) or
//     static ones, CQ/QP/SRQ creation from the buffers and doorbell records
//     the provider allocated, PD, MR, AH, modify and query QP, destroy,
//     completion channels and async events on real file descriptors;
//   - the hardware: a goroutine per device watches the doorbell records and
//     UAR pages it handed out, decodes WQEs with its own code (the layouts
//     of <infiniband/mlx5dv.h>), executes SEND, RDMA WRITE/READ and atomics
//     between modelled QPs (of one device or of several on one Fabric),
//     writes CQEs with the right owner bits, reports errors (bad keys,
//     RNR, ...) and flushes, and raises completion events when armed.
//
// Whatever the model sees that real hardware would choke on (a send counter
// between WQEs, a doorbell that never reached the UAR, a CQ overrun...) is
// recorded as a violation: tests check Violations is empty.
//
// It imports abi, mmap and internal/kernel (it stands in for the kernel's
// syscalls); tests only use it.
package model

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
)

// Options shape one modelled device and the kernel in front of it.
type Options struct {
	// Name is the device name (default mlx5_N).
	Name string
	// NoDynamicUAR models a kernel without MLX5_IB_OBJECT_UAR: the UAR
	// ioctl fails with EPROTONOSUPPORT and MLX5_LIB_CAP_DYN_UAR is ignored,
	// so contexts get static UARs.
	NoDynamicUAR bool
	// NoIoctl models a kernel without RDMA_VERBS_IOCTL (ENOTTY).
	NoIoctl bool
	// NoInvokeWrite answers DEVICE/INVOKE_WRITE with EPROTONOSUPPORT, so
	// write-style commands go by write().
	NoInvokeWrite bool
	// RejectDEVX models a device without DEVX (log_max_uctx 0): ucontext
	// requests with MLX5_IB_ALLOC_UCTX_DEVX are refused, and the DEVX
	// objects do not exist (their methods answer EPROTONOSUPPORT).
	RejectDEVX bool
	// DataInOrder gives the device the qp_data_in_order capability
	// (QUERY_HCA_CAP's general device capabilities) and makes its firmware
	// report data_in_order in the QP context (QUERY_QP) of the QP types
	// this mask names: bit 1<<t for type t of enum ib_uverbs_qp_type (2
	// RC, 3 UC, 4 UD, 9 XRC initiator, 10 XRC target). Which QPs ConnectX
	// firmware reports in order is not public: the model reports what it
	// is told (devx.go).
	DataInOrder uint32
	// KnownReqLen is how much of the ucontext request the kernel knows
	// (32, 24 or 16; default 32): longer requests must be zero past it.
	KnownReqLen int
	// MaxCQEVersion is the highest CQE version the device offers (default
	// 1; -1 means 0).
	MaxCQEVersion int
	// NoDumpFill models a device without the dump_fill_mkey capability:
	// the ucontext response carries no null MR key.
	NoDumpFill bool
	// NoXRC models a device without the xrc capability: no XRC device
	// flag, and OPEN_XRCD of a new domain answers EOPNOTSUPP.
	NoXRC bool
	// NoMemWindows models a device without the imaicl capability: no
	// MEM_WINDOW device flags, and ALLOC_MW answers EOPNOTSUPP.
	NoMemWindows bool
	// ODP gives the device on-demand paging (odp.go): ODP capabilities
	// in QUERY_DEVICE_EX (general ODP_SUPPORT; RC send, receive, write,
	// read, atomic, SRQ receive), REG_MR with ON_DEMAND access, and page
	// faults resolved at access time.
	ODP bool
	// ImplicitODP gives the device implicit on-demand paging too (it
	// implies ODP): IB_ODP_SUPPORT_IMPLICIT in the ODP capabilities, and
	// REG_MR of start 0 and length U64_MAX registers the implicit ODP MR,
	// whose keys reach every address the process maps (odp.go).
	ImplicitODP bool
	// ECE gives the device ece_support (the ucontext response's
	// MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE) with a firmware that takes
	// these ECE option bits: it answers a CREATE_QP's or MODIFY_QP's
	// ece_options with the bits asked for that are among them. (What
	// ConnectX firmware negotiates is not public; the model checks the
	// options' way through the ABI, not their meaning.) 0: no
	// ece_support, and the kernel passes no options and answers 0.
	ECE uint32
	// NoBlueFlame reports bf_reg_size 0.
	NoBlueFlame bool
	// NoWC refuses write-combining mappings of static UARs (EPERM).
	NoWC bool
	// DoorbellWait bounds how long the device waits for the UAR write that
	// must follow a doorbell record update before it records a violation
	// (default 2 s: the posting goroutine may be preempted between the two
	// stores, for long under the race detector).
	DoorbellWait time.Duration
}

// Stats count what the hardware side saw.
type Stats struct {
	WQEs            int // send WQEs executed or flushed
	RecvWQEs        int // receive WQEs consumed
	CQEs            int // CQEs written
	Doorbells       int // send doorbells found on a UAR register (8-byte or BlueFlame)
	BlueFlames      int // of which carried the whole WQE
	MissedDoorbells int // send counters that advanced without a UAR write naming the last WQE
	Arms            int // CQ arm requests (doorbell record + UAR write)
	StaleArms       int // arm requests with an old sequence number (ignored)
	MissedArms      int // arm requests without the matching UAR write
	Events          int // completion events raised
	AsyncEvents     int // async events raised
	RNRNaks         int // sends that found no receive WQE and were retried
	Flushed         int // WQEs completed with a flush error
	UARMappings     int // UAR pages mapped and not unmapped
	Contexts        int // open contexts
	ODPFaults       int // pages of ODP MRs an access found not mapped as it needed, and faulted in
	ODPPrefetches   int // ranges ADVISE_MR prefetched (with FLUSH at once, without it from the queue)
}

// Fabric connects modelled devices: packets between their QPs are routed by
// GID (with a GRH) or LID.
type Fabric struct {
	mu   sync.Mutex
	devs []*Device
}

// NewFabric returns an empty fabric.
func NewFabric() *Fabric { return &Fabric{} }

var fabricSeq atomic.Uint64

// Device is one modelled adapter with one port. Its character device path
// (CharDev) opens on the model through kernel.RegisterFake.
type Device struct {
	f     *Fabric
	o     Options
	index int
	path  string
	lid   uint16
	guid  uint64
	gids  [2][16]byte

	unregister func()
	stop       chan struct{}
	done       chan struct{}
	closeOnce  sync.Once

	// Everything below is guarded by f.mu.
	files      map[int]*ufile
	qps        map[uint32]*mqp          // by QPN
	mrs        map[uint32]*mmr          // by key
	mws        map[uint32]*mmw          // memory windows by key index (key>>8)
	xrcds      map[[2]uint64]*xrcdomain // XRC domains tied to a file, by inode
	cqs        map[uint32]*mcq          // by CQN
	srqs       map[uint32]*msrq
	channels   map[int]*channel // by the descriptor handed out
	orphans    []*uarPage       // UAR pages of closed files, still mapped
	nextFD     int
	nextQPN    uint32
	nextKey    uint32
	nextCQN    uint32
	nextSRQN   uint32
	nextPageID uint32
	stats      Stats
	methods    map[[2]uint16]int // ioctl calls by object and method (MethodCalls)
	prefetches []prefetch        // ADVISE_MR prefetches without FLUSH, not done yet
	violations []string
	paused     bool
	lost       bool // disassociated: every command fails with EIO
}

// Add models a new device on the fabric and registers its character
// device path; Close undoes both.
func (f *Fabric) Add(o Options) (*Device, error) {
	f.mu.Lock()
	n := len(f.devs)
	if o.Name == "" {
		o.Name = fmt.Sprintf("mlx5_%d", n)
	}
	if o.ImplicitODP {
		o.ODP = true
	}
	if o.NoIoctl {
		// A kernel without ioctl has no UAR object either.
		o.NoDynamicUAR = true
	}
	if o.DoorbellWait == 0 {
		o.DoorbellWait = 2 * time.Second
	}
	if o.KnownReqLen == 0 {
		o.KnownReqLen = 32
	}
	if o.MaxCQEVersion == 0 {
		o.MaxCQEVersion = 1
	}
	if o.MaxCQEVersion < 0 {
		o.MaxCQEVersion = 0
	}
	d := &Device{
		f: f, o: o, index: n,
		path:  fmt.Sprintf("/fake/goverbs-mlx5-model/%d/%s", fabricSeq.Add(1), o.Name),
		lid:   uint16(n + 1),
		guid:  0x0002c90300a0b000 + uint64(n+1),
		files: map[int]*ufile{}, qps: map[uint32]*mqp{}, mrs: map[uint32]*mmr{}, mws: map[uint32]*mmw{}, xrcds: map[[2]uint64]*xrcdomain{}, cqs: map[uint32]*mcq{},
		srqs: map[uint32]*msrq{}, channels: map[int]*channel{},
		nextFD: 1 << 20, nextQPN: 0x100 + uint32(n)<<16, nextKey: 1, nextCQN: 1, nextSRQN: 1, nextPageID: 1,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	// GID 0: the link-local GID of the port GUID; GID 1: a site-local one.
	d.gids[0] = [16]byte{0: 0xfe, 1: 0x80}
	d.gids[1] = [16]byte{0: 0xfe, 1: 0xc0, 7: byte(n + 1)}
	for i := 0; i < 2; i++ {
		for j := 0; j < 8; j++ {
			d.gids[i][8+j] = byte(d.guid >> (56 - 8*j))
		}
	}
	f.devs = append(f.devs, d)
	f.mu.Unlock()
	d.unregister = kernel.RegisterFake(d.path, d.open)
	go d.run()
	return d, nil
}

// Name is the device name.
func (d *Device) Name() string { return d.o.Name }

// CharDev is the path that opens this device's uverbs file on the model.
func (d *Device) CharDev() string { return d.path }

// LID is the port's LID.
func (d *Device) LID() uint16 { return d.lid }

// GUID is the node (and port) GUID.
func (d *Device) GUID() uint64 { return d.guid }

// GID returns the port's GID at index (0 or 1).
func (d *Device) GID(index int) [16]byte { return d.gids[index] }

// MethodCalls is the number of RDMA_VERBS_IOCTL calls of method on
// object the device has answered (successfully or not): it tells which
// transport a verb took where uverbs' own record cannot (a write command
// sent through the INVOKE_WRITE method counts as that method).
func (d *Device) MethodCalls(object, method uint16) int {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	return d.methods[[2]uint16{object, method}]
}

// Stats returns what the hardware side counted so far.
func (d *Device) Stats() Stats {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	s := d.stats
	s.Contexts = 0
	for _, u := range d.files {
		if u.ctx != nil {
			s.Contexts++
		}
	}
	return s
}

// Violations returns what the model saw that real hardware would not
// accept (sorted, deduplicated).
func (d *Device) Violations() []string {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	seen := map[string]bool{}
	var v []string
	for _, s := range d.violations {
		if !seen[s] {
			seen[s] = true
			v = append(v, s)
		}
	}
	sort.Strings(v)
	return v
}

// violation records a protocol error. Called with f.mu held.
func (d *Device) violation(format string, args ...any) {
	if len(d.violations) < 1000 {
		d.violations = append(d.violations, fmt.Sprintf(format, args...))
	}
}

// Pause stops the hardware side: doorbells are not looked at and nothing
// executes until Resume. Benchmarks use it to time the provider alone.
func (d *Device) Pause() {
	d.f.mu.Lock()
	d.paused = true
	d.f.mu.Unlock()
}

// Resume restarts the hardware side after Pause.
func (d *Device) Resume() {
	d.f.mu.Lock()
	d.paused = false
	d.f.mu.Unlock()
}

// Disassociate models the device going away under open contexts (a
// firmware fatal error, a PCI removal), as the kernel's
// ib_uverbs_disassociate_ucontext handles it: the hardware stops, every
// context gets an IB_EVENT_DEVICE_FATAL async event, every command (write
// or ioctl) and mmap fails with EIO from then on, and the UAR pages
// mapped into the process are revoked: their pages are replaced by zero
// pages that take stores and that the device no longer reads (the
// kernel's rdma_umap_fault gives such pages to a revoked mapping), so a
// provider's doorbell store after it does not fault. Closing the files
// still releases everything.
func (d *Device) Disassociate() {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	if d.lost {
		return
	}
	d.lost = true
	for _, u := range d.files {
		if u.ctx == nil {
			continue
		}
		d.asyncEvent(u.ctx, 0, evDeviceFatal)
		for _, p := range u.ctx.pages() {
			revoke(p.mem)
		}
	}
	for _, p := range d.orphans {
		revoke(p.mem)
	}
}

// ContextInfo is what one open context negotiated, as the kernel saw it.
type ContextInfo struct {
	RequestLen  int  // bytes of the ucontext request taken
	DEVX        bool // the context has a DEVX uid
	CQEVersion  int  // 0 or 1
	DynamicUAR  bool // UARs come from MLX5_IB_OBJECT_UAR (no static ones)
	StaticUARs  int  // static UAR pages allocated with the context
	DynamicUARs int  // UAR objects allocated
	QPs, CQs    int
}

// Contexts describes the device's open contexts.
func (d *Device) Contexts() []ContextInfo {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	var out []ContextInfo
	for _, u := range d.files {
		c := u.ctx
		if c == nil {
			continue
		}
		ci := ContextInfo{RequestLen: c.reqLen, DEVX: c.devx, CQEVersion: int(c.cqeVersion), DynamicUAR: c.dyn,
			StaticUARs: len(c.staticPages), DynamicUARs: len(c.dynPages)}
		for _, o := range c.objs {
			switch o.(type) {
			case *mqp:
				ci.QPs++
			case *mcq:
				ci.CQs++
			}
		}
		out = append(out, ci)
	}
	return out
}

// Close stops the hardware goroutine, unregisters the path and releases
// the memory the model owns (UAR pages, event sockets).
func (d *Device) Close() {
	d.closeOnce.Do(func() {
		d.unregister()
		close(d.stop)
		<-d.done
		d.f.mu.Lock()
		defer d.f.mu.Unlock()
		for _, u := range d.files {
			u.release()
		}
		for _, p := range d.orphans {
			p.mem.Close()
		}
		d.orphans = nil
		for _, ch := range d.channels {
			ch.close()
		}
		for i, x := range d.f.devs {
			if x == d {
				d.f.devs = append(d.f.devs[:i], d.f.devs[i+1:]...)
				break
			}
		}
	})
}

// run is the hardware: it polls doorbell records and UAR pages and executes
// what they announce, spinning while there is work and backing off to short
// sleeps when idle.
func (d *Device) run() {
	defer close(d.done)
	idle := 0
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		d.f.mu.Lock()
		busy := !d.paused && !d.lost && d.step()
		d.f.mu.Unlock()
		if busy {
			idle = 0
			continue
		}
		idle++
		if idle < 200 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// newUARPage allocates one UAR page of model memory.
func newUARPage() (*mmap.Region, error) {
	return mmap.Anonymous(mmap.PageSize())
}
