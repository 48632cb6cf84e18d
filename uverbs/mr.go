package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// Access is a set of memory access rights (enum ib_uverbs_access_flags).
type Access uint32

// Access rights.
const (
	AccessLocalWrite      Access = 1 << 0
	AccessRemoteWrite     Access = 1 << 1
	AccessRemoteRead      Access = 1 << 2
	AccessRemoteAtomic    Access = 1 << 3
	AccessMWBind          Access = 1 << 4
	AccessZeroBased       Access = 1 << 5
	AccessOnDemand        Access = 1 << 6
	AccessHugeTLB         Access = 1 << 7
	AccessRelaxedOrdering Access = 1 << 20
)

var accessNames = []struct {
	a    Access
	name string
}{
	{AccessLocalWrite, "LOCAL_WRITE"}, {AccessRemoteWrite, "REMOTE_WRITE"}, {AccessRemoteRead, "REMOTE_READ"},
	{AccessRemoteAtomic, "REMOTE_ATOMIC"}, {AccessMWBind, "MW_BIND"}, {AccessZeroBased, "ZERO_BASED"},
	{AccessOnDemand, "ON_DEMAND"}, {AccessHugeTLB, "HUGETLB"}, {AccessRelaxedOrdering, "RELAXED_ORDERING"},
}

// String is the rights by their libibverbs names without the IBV_ACCESS_
// prefix, joined by "|" ("LOCAL_WRITE|REMOTE_READ"); unnamed bits come last
// in hexadecimal, and no right is "0x0".
func (a Access) String() string {
	var parts []string
	for _, n := range accessNames {
		if a&n.a != 0 {
			parts = append(parts, n.name)
			a &^= n.a
		}
	}
	if a != 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(a)))
	}
	return strings.Join(parts, "|")
}

// validate applies the rule the kernel also applies (ib_check_mr_access):
// remote write or atomic access needs local write.
func (a Access) validate() bool {
	return a&(AccessRemoteWrite|AccessRemoteAtomic) == 0 || a&AccessLocalWrite != 0
}

// MR is a registered memory region.
//
// An MR is safe for concurrent use: its getters may run while Rereg
// changes what they report (they see the state before or after it, never a
// mix). Close waits for a Rereg in flight; after it, Rereg returns ErrClosed
// and the MR's handle never reaches the kernel again. Close is idempotent
// and returns nil after the Context closed.
type MR struct {
	handle uint32
	reg    uint64   // its tag in the context's mrs, if RegMR pinned Go memory
	c      *Context // its PD's context: a Rereg may change the PD, never the context

	mu     sync.RWMutex // guards the fields Rereg changes
	pd     *PD
	lkey   uint32
	rkey   uint32
	addr   uint64
	length int
	iova   uint64
	access Access
	pin    *runtime.Pinner // RegMR's pin of Go memory (guarded by mu), or nil
	// pinner is pin's memory, part of the MR's own allocation (RegMR made
	// a Pinner of its own, ~160 user instructions a registration).
	pinner runtime.Pinner
	lifetime
}

// RegMR registers buf with the given access rights. The I/O virtual
// address is buf's address, or 0 with AccessZeroBased.
//
// The documented way is memory from package mmap (mmap.Anonymous, an
// mmap.Region): it is outside the Go heap and stays where it is until
// unmapped, which must not happen while the MR is open. A slice from the
// Go heap (make) works too: RegMR pins it (runtime.Pinner), so it is
// neither freed nor moved until the MR is closed (or its Context is), and
// the compiler puts a slice passed here on the heap, never on a goroutine
// stack. Prefer mmap memory for large or long-lived buffers: it is
// page-aligned, and pinned heap memory cannot be reused by the Go heap.
// Memory of an open mmap.Region (mmap.Owns) is neither pinned nor tracked,
// the cheaper registration; Context.Close leaves its deregistration to the
// kernel, as for RegMRAddr.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, argError("RegMR", pd.ctx.dev.Name, "empty buffer")
	}
	// A Pinner is a pointer to the runtime's pin set: pinned here and
	// then moved into the MR, which did not exist yet. An open
	// mmap.Region's memory (the documented kind) is off the Go heap: no
	// pin and no entry in the context's table, ~300 user instructions a
	// registration and deregistration. Other memory is pinned (Pin on
	// memory outside the Go heap pins nothing, so any other mapping is
	// safe too).
	heap := !mmap.Owns(buf)
	var pin runtime.Pinner
	if heap {
		pinSlice(&pin, buf)
	}
	addr := sliceAddr(buf)
	iova := addr
	if access&AccessZeroBased != 0 {
		iova = 0
	}
	mr, err := pd.RegMRAddr(addr, len(buf), iova, access&^AccessZeroBased)
	if err != nil {
		pin.Unpin()
		return nil, err
	}
	if !heap {
		return mr, nil
	}
	mr.pinner = pin
	mr.pin = &mr.pinner
	c := pd.ctx
	// The tag is the MR's before the table shows it: Context.Close may
	// drain the table, and forget read it, at once.
	c.mrs.insert(mr, &mr.reg)
	if c.closed.Load() { // Context.Close ran meanwhile and may have missed mr
		mr.releaseProvider()
	}
	return mr, nil
}

// odpTries is how many times a command that may make the process's first
// on-demand-paging mapping (REG_MR with AccessOnDemand; ADVISE_MR, whose
// prefetch may make an implicit MR's first child) is sent while the kernel
// answers EINTR. The first ODP mapping of a process registers its mm with
// the MMU notifiers (mmu_interval_notifier_insert, mmu_notifier_register),
// which takes every lock of the mm (mm_take_all_locks, mm/vma.c) and gives
// up with -EINTR when any signal is pending while it walks the mappings,
// not only a fatal one: read in Linux 7.3.4's source after TestODPRig's
// RegMR failed so on rxe0 under it (session 51; rxe's ODP came after 6.12,
// whose rxe has none; mlx5 has ODP on every kernel of the matrix). The Go
// runtime signals its own threads (SIGURG preempts a goroutine) and a Go
// process has many mappings, so a program cannot keep this away. -EINTR,
// unlike -ERESTARTSYS, is not restarted for a handler with SA_RESTART. The
// failed command left nothing behind (the umem and the half-made
// registration are freed), so it is sent again, as package os retries its
// EINTRs; a signal storm still ends in the error.
const odpTries = 8

// retryEINTR runs send, again while it answers EINTR, odpTries times at
// most (RegMR's and AdviseMR's rule, see odpTries).
func retryEINTR(send func() error) error {
	err := send()
	for try := 1; try < odpTries && errors.Is(err, unix.EINTR); try++ {
		err = send()
	}
	return err
}

// RegMRAddr registers length bytes at user address addr, seen by the
// device at I/O virtual address iova (REG_MR: one syscall; again if the
// kernel answers EINTR, see odpTries).
func (pd *PD) RegMRAddr(addr uint64, length int, iova uint64, access Access) (_ *MR, err error) {
	if sp := pd.ctx.begin("RegMR"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := pd.ctx.dev.Name
	switch {
	case length <= 0:
		return nil, argError("RegMR", dev, "length %d", length)
	case !access.validate():
		return nil, argError("RegMR", dev, "access %v: remote write and remote atomic need local write", access)
	}
	if err := pd.use("RegMR", dev); err != nil {
		return nil, err
	}
	defer pd.done()
	if access&AccessOnDemand != 0 {
		if err := pd.ctx.odpSupported("RegMR", ODPSupport); err != nil {
			return nil, err
		}
	}
	req := abi.IbUverbsRegMr{Start: addr, Length: uint64(length), HcaVa: iova, PdHandle: pd.handle, AccessFlags: uint32(access)}
	var resp abi.IbUverbsRegMrResp
	in, out := pd.ctx.prov.Udata(provider.VerbRegMR)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_REG_MR, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out, Quick: pd.ctx.quickPin(length)}
	if err = retryEINTR(func() error { return pd.ctx.invoke("RegMR", &cmd) }); err != nil {
		return nil, err
	}
	return &MR{pd: pd, c: pd.ctx, handle: resp.MrHandle, lkey: resp.Lkey, rkey: resp.Rkey, addr: addr, length: length, iova: iova, access: access}, nil
}

// LKey is the key local work requests name the region by.
func (mr *MR) LKey() uint32 {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.lkey
}

// RKey is the key remote peers name the region by.
func (mr *MR) RKey() uint32 {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.rkey
}

// Addr is the region's user address.
func (mr *MR) Addr() uint64 {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.addr
}

// IOVA is the address the device (and remote peers) use for the region.
func (mr *MR) IOVA() uint64 {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.iova
}

// Len is the region's length in bytes.
func (mr *MR) Len() int {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.length
}

// Access is the region's access rights.
func (mr *MR) Access() Access {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.access
}

// PD is the protection domain the region is registered in.
func (mr *MR) PD() *PD {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.pd
}

// Handle is the kernel's handle for the MR.
func (mr *MR) Handle() uint32 { return mr.handle }

// Rereg flags say what ReregMR changes (enum ib_uverbs_rereg_mr flags).
type Rereg uint32

// What a re-registration changes.
const (
	ReregTranslation Rereg = 1 << 0 // new address range
	ReregPD          Rereg = 1 << 1 // new protection domain
	ReregAccess      Rereg = 1 << 2 // new access rights
)

// rereg is Rereg (mr_options.go).
func (mr *MR) rereg(flags Rereg, pd *PD, addr uint64, length int, access Access) (err error) {
	ctx := mr.ctx()
	if sp := ctx.begin("ReregMR"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if flags == 0 || flags&^(ReregTranslation|ReregPD|ReregAccess) != 0 {
		return argError("ReregMR", ctx.dev.Name, "flags %#x", uint32(flags))
	}
	if flags&ReregAccess != 0 && !access.validate() {
		return argError("ReregMR", ctx.dev.Name, "access %v: remote write and remote atomic need local write", access)
	}
	req := abi.IbUverbsReregMr{MrHandle: mr.handle, Flags: uint32(flags), Start: addr, Length: uint64(length), HcaVa: addr, AccessFlags: uint32(access)}
	if flags&ReregPD != 0 {
		if pd == nil {
			return argError("ReregMR", ctx.dev.Name, "ReregPD without a PD")
		}
		if pd.ctx != ctx {
			return argError("ReregMR", ctx.dev.Name, "the new PD belongs to another context")
		}
		if err := pd.use("ReregMR", ctx.dev.Name); err != nil {
			return err
		}
		defer pd.done()
		req.PdHandle = pd.handle
	}
	if err := mr.use("ReregMR", ctx.dev.Name); err != nil {
		return err
	}
	defer mr.done()
	mr.mu.Lock()
	defer mr.mu.Unlock()
	var resp abi.IbUverbsReregMrResp
	in, out := ctx.prov.Udata(provider.VerbReregMR)
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_REREG_MR, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
	if err := ctx.invoke("ReregMR", &cmd); err != nil {
		return err
	}
	mr.lkey, mr.rkey = resp.Lkey, resp.Rkey
	if flags&ReregTranslation != 0 {
		mr.addr, mr.length, mr.iova = addr, length, addr
		mr.unpin() // the old range is no longer registered
	}
	if flags&ReregPD != 0 {
		mr.pd = pd
	}
	if flags&ReregAccess != 0 {
		mr.access = access
	}
	return nil
}

// quickPinMax is the largest registration that goes as a quick (raw)
// syscall on a software device (Context.cpuOnly). Pinning 16 pages of
// memory the program has touched is the kernel's CPU work, a few
// microseconds with every first-touch fault included (a fault that must
// read a file holds the P through the read, as the same fault in Go code
// would); a larger one can hold the goroutine's P long enough to matter,
// so it stays an ordinary syscall. Measured under
// TCG on siw0 (test/perf/slowloop.sh mr: 4 KiB registered and
// deregistered): as ordinary syscalls, the loop spent most of its time
// inside them, so every 10 ms the runtime's monitor found the goroutine
// unscheduled, took its P in the syscall and went back to waking every
// 20 µs; as quick ones the kernel ran 25,139 instructions a pair instead of
// 37,545 (rdma-core's 25,608).
const quickPinMax = 64 << 10

// quickPin reports whether registering length bytes may be a quick syscall.
func (c *Context) quickPin(length int) bool { return c.cpuOnly && length <= quickPinMax }

// ctx is the context the MR belongs to (a Rereg may change its PD, never
// its context): a field set once, read without mu.
func (mr *MR) ctx() *Context { return mr.c }

// Close deregisters the region (DEREG_MR). Idempotent.
func (mr *MR) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return mr.close(func() (err error) {
		ctx := mr.ctx()
		if sp := ctx.begin("DeregMR"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		if err := mr.destroyKernel(); err != nil {
			return err
		}
		mr.forget()
		return nil
	})
}

func (mr *MR) destroyKernel() error {
	req := abi.IbUverbsDeregMr{MrHandle: mr.handle}
	return mr.ctx().destroyObject("DeregMR", abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY, mr.handle, 0, nil,
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DEREG_MR, In: abi.Bytes(&req), Quick: mr.ctx().cpuOnly})
}

// forget unpins the deregistered MR's memory and drops it from its
// context's table.
func (mr *MR) forget() {
	if mr.reg == 0 { // never in the table, never pinned (RegMRAddr, or an mmap.Region's memory)
		return
	}
	mr.mu.Lock()
	mr.unpin()
	mr.mu.Unlock()
	mr.ctx().mrs.remove(mr.reg)
}

// unpin releases RegMR's pin (mr.mu held).
func (mr *MR) unpin() {
	if mr.pin != nil {
		mr.pin.Unpin()
		mr.pin = nil
	}
}

// leakedPins keeps the pins of MRs whose deregistration failed at
// Context.Close: the device may still write their memory, so it must stay
// pinned (and a collected Pinner with pins would crash the program).
var leakedPins struct {
	sync.Mutex
	pins []*runtime.Pinner
}

// releaseProvider deregisters a pinned MR left open at Context.Close and
// unpins its memory.
func (mr *MR) releaseProvider() error {
	return mr.close(func() error {
		if mr.destroyKernel() != nil {
			mr.mu.Lock()
			if mr.pin != nil {
				leakedPins.Lock()
				leakedPins.pins = append(leakedPins.pins, mr.pin)
				leakedPins.Unlock()
				mr.pin = nil
			}
			mr.mu.Unlock()
		}
		mr.forget()
		return nil
	})
}
