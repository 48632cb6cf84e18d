// Package provider is the seam between package uverbs and the device
// families' fast paths (provider/rxe, provider/mlx5, provider/siw).
//
// uverbs owns the kernel commands; a provider owns every device-specific
// byte: the driver's private data (udata) of each create command, the queue
// memory (mapped from the kernel for rxe, allocated in user space and pinned
// by the kernel for mlx5), the WQE and CQE formats, and the doorbells. Object
// creation is two-phase: the provider prepares the driver data (a Setup),
// uverbs runs the command, then the provider completes the object from the
// kernel's answer, or aborts and frees what it prepared.
//
// The work-request and completion types are defined here, below both, and
// re-exported by uverbs, which is what programs import.
//
// It owns the seam's interfaces and the work-request and completion types,
// and imports abi only; never uverbs, never a provider.
package provider

import (
	"errors"

	"github.com/goverbs/goverbs/abi"
)

// ErrNotSupported is returned for an operation the provider or the device
// cannot do (mlx5 on an architecture without doorbell assembly, a fast path
// not written yet).
var ErrNotSupported = errors.New("not supported")

// ErrClosed is returned by a fast-path operation on a queue, CQ or context
// that was closed. It is the same value as uverbs.ErrClosed and
// abi.ErrClosed (a doorbell on a closed command file), so
// errors.Is(err, uverbs.ErrClosed) holds for slow-path and fast-path errors
// alike.
var ErrClosed = abi.ErrClosed

// Driver opens provider contexts for one device family.
type Driver interface {
	// Name is the provider's name, as rdma-core names its providers.
	Name() string
	// NewContext runs the driver's part of opening a context: it must call
	// k.GetContext exactly once successfully (retrying with other driver
	// data if the kernel refuses, as mlx5 does).
	NewContext(k Kernel) (Context, error)
}

// Kernel is what uverbs lends a provider: the command file and the core
// verbs a fast path needs.
type Kernel interface {
	// File is the context's command file (mmap, raw doorbell writes).
	File() *abi.File
	// GetContext runs GET_CONTEXT with the driver's private data.
	GetContext(driverIn, driverOut []byte) error
	// ReqNotifyCQ runs REQ_NOTIFY_CQ (for devices that arm CQs in the
	// kernel, like rxe).
	ReqNotifyCQ(cqHandle uint32, solicitedOnly bool) error
	// ModifyQPState runs MODIFY_QP with only the state: rxe's way to make
	// the kernel flush receives posted while the QP is in ERR.
	ModifyQPState(qpHandle uint32, state QPState) error
	// CopyOnFork reports whether the kernel keeps pinned pages valid in a
	// forked child, so MADV_DONTFORK is not needed.
	CopyOnFork() bool
}

// GIDQuerier is implemented by a Kernel that can read its device's GID
// table (uverbs' does). rxe asks it for a source GID when the kernel leaves
// the address vector of UD sends to user space (a CREATE_AH answer without
// an AH number, Linux before 5.16).
type GIDQuerier interface {
	// QueryGID returns entry index of port's GID table, in network byte
	// order.
	QueryGID(port, index int) ([16]byte, error)
}

// DeviceLoser is implemented by a provider Context whose fast path must
// fail once its device is gone (disassociated: the kernel answers EIO to
// every command and revokes the mappings). uverbs calls DeviceLost when it
// learns of it (an IB_EVENT_DEVICE_FATAL async event); from then on every
// fast-path call returns an error for which errors.Is(err, unix.EIO) holds,
// as the slow path's commands do, and touches no device memory. Close
// still releases everything.
type DeviceLoser interface {
	DeviceLost()
}

// MWTracker is implemented by a provider Context that must know its memory
// windows to post their binds: a BIND_MW request names its window by rkey
// only, and mlx5 encodes a type 1 and a type 2 bind differently. uverbs
// calls MWAllocated after a successful ALLOC_MW and MWFreed after
// DEALLOC_MW.
type MWTracker interface {
	MWAllocated(rkey uint32, type2 bool)
	MWFreed(rkey uint32)
}

// NullMRKeyer is implemented by a provider Context whose device has a null
// memory region (ibv_alloc_null_mr): a local key that discards what is
// written through it and reads as zeroes. mlx5 has one per device when the
// kernel reports its dump-fill mkey. NullMRKey returns ErrNotSupported when
// the device has none.
type NullMRKeyer interface {
	NullMRKey() (uint32, error)
}

// Verb names a command whose driver data has no provider state.
type Verb uint8

// Verbs with stateless driver data.
const (
	VerbAllocPD Verb = iota
	VerbRegMR
	VerbReregMR
	VerbAllocMW
	VerbModifyQP
	VerbModifySRQ
)

// Setup is one object creation in progress: the driver data for the create
// command, then Complete with what the kernel returned, or Abort.
type Setup[Created, Obj any] interface {
	// Udata is the driver's private request and response buffers.
	Udata() (in, out []byte)
	// Complete builds the provider object once the kernel has created it.
	// If it fails, uverbs destroys the kernel object.
	Complete(c Created) (Obj, error)
	// Abort frees what Udata prepared; the kernel refused the command.
	Abort()
}

// SetupFunc is a Setup whose driver data needs no cleanup when the kernel
// refuses the command: In and Out are the request and response buffers,
// Done builds the object from the kernel's answer and the response bytes.
// The software providers (rxe, siw) create everything this way.
type SetupFunc[Created, Obj any] struct {
	In, Out []byte
	Done    func(c Created, out []byte) (Obj, error)
}

// Udata returns In and Out.
func (s *SetupFunc[C, O]) Udata() (in, out []byte) { return s.In, s.Out }

// Complete calls Done with the response buffer.
func (s *SetupFunc[C, O]) Complete(c C) (O, error) { return s.Done(c, s.Out) }

// Abort does nothing: there is nothing to free.
func (s *SetupFunc[C, O]) Abort() {}

// Context is a provider's per-context state.
type Context interface {
	// Udata returns the driver data for a verb without provider state
	// (nil, nil when the driver takes none).
	Udata(v Verb) (in, out []byte)
	CreateCQ(a CQAttr) (Setup[CQCreated, CQ], error)
	CreateQP(a QPAttr) (Setup[QPCreated, QP], error)
	CreateSRQ(a SRQAttr) (Setup[SRQCreated, SRQ], error)
	CreateAH(a AHAttr) (Setup[AHCreated, AH], error)
	// Close releases the context's mappings (after the kernel context).
	Close() error
}

// CQAttr is what a CQ is asked for.
type CQAttr struct {
	CQE int // at least this many completions
	// Timestamps asks for each completion's device timestamp
	// (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION, which uverbs sends to the
	// kernel): the provider CQ must then implement TimestampPoller.
	Timestamps bool
	// SingleThreaded: the program orders every call on the CQ (Poll, Arm,
	// Resize, Close), and Modified and Close of the QPs that complete to
	// it, as one goroutine's calls (uverbs.CQOptions.SingleThreaded); Poll
	// may then take no lock. Event and DeviceLost still come from any
	// goroutine, and so may a QP's posts unless the QP is SingleThreaded.
	SingleThreaded bool
}

// CQCreated is the kernel's answer to CREATE_CQ.
type CQCreated struct {
	Handle uint32
	CQE    uint32 // entries the kernel allocated (≥ asked)
}

// CQ is a provider's completion queue: polled without a syscall.
type CQ interface {
	// Poll fills wc with up to len(wc) completions and returns how many.
	// It allocates nothing and makes no syscall. It keeps no reference to
	// wc after it returns: uverbs passes the caller's slice, which may be
	// on the caller's stack, hidden from escape analysis (uverbs'
	// noescape_unsafe.go).
	Poll(wc []WorkCompletion) (int, error)
	// Arm requests one completion event for the next (solicited)
	// completion. rxe does this with a command, mlx5 with a doorbell.
	Arm(solicitedOnly bool) error
	// Event tells the CQ that one completion event for it was consumed
	// (mlx5 advances its arm sequence number). It is called by whichever
	// waiter reads the completion channel (not always the CQ's own),
	// concurrently with Poll and Arm on another goroutine: it must be safe
	// for that.
	Event()
	// Resize prepares a resize to cqe entries (driver data, then Complete
	// with the new size). Providers that cannot return ErrNotSupported.
	Resize(cqe int) (Setup[uint32, struct{}], error)
	// Close releases the CQ's memory, after the kernel CQ is destroyed.
	Close() error
}

// TimestampPoller is implemented by a provider CQ that reports completion
// timestamps (one created with CQAttr.Timestamps on a device whose
// completion_timestamp_mask is not 0).
type TimestampPoller interface {
	// PollTimestamps is Poll that also stores completion i's raw device
	// timestamp (free-running clock ticks) in ts[i]; len(ts) >= len(wc).
	// It allocates nothing and makes no syscall.
	PollTimestamps(wc []WorkCompletion, ts []uint64) (int, error)
}

// PassPoller is implemented by a provider CQ that tells the device its
// consumer index once per pass over the CQ rather than once per poll, as
// libibverbs' mlx5 does for the extended CQ (the doorbell record is written
// at ibv_end_poll). PollPass is Poll, and PollTimestamps when ts is not nil,
// without that write; EndPass writes it. A pass that never ends leaves the
// entries it read counted as used by the device.
type PassPoller interface {
	PollPass(wc []WorkCompletion, ts []uint64) (int, error)
	EndPass()
}

// QPAttr is what a QP is asked for.
type QPAttr struct {
	Type      QPType
	Cap       QPCap
	SendCQ    CQ
	RecvCQ    CQ  // nil for an XRC initiator (it has no receive queue)
	SRQ       SRQ // nil: the QP has its own receive queue
	SignalAll bool
	// SingleThreaded: the program orders every call on the QP and on its
	// CQs (which are SingleThreaded too) as one goroutine's calls
	// (uverbs.QPInit.SingleThreaded); PostSend and PostRecv may then take
	// no lock, and the QP and its CQs may share their counters with plain
	// stores. DeviceLost still comes from any goroutine.
	SingleThreaded bool
}

// QPCreated is the kernel's answer to CREATE_QP.
type QPCreated struct {
	Handle uint32
	QPN    uint32
	Cap    QPCap // as the kernel sized them
}

// QP is a provider's queue pair: posting allocates nothing; a provider
// makes at most its device's doorbell syscall (rxe: one write per PostSend
// call, whatever the list length; mlx5: none).
type QP interface {
	// PostSend validates every request, then posts them all and rings the
	// doorbell once. On a validation error nothing is posted, n is the
	// index of the bad request and the queue is exactly as it was. Like
	// every post and poll here, it keeps no reference to wrs or to
	// anything in them (SGLs) after it returns, not even in an error: the
	// requests may be on the caller's stack (see CQ.Poll).
	PostSend(wrs []SendWR) (n int, err error)
	// PostRecv is PostSend's receive-side twin (no doorbell syscall).
	PostRecv(wrs []RecvWR) (n int, err error)
	// Modified tells the provider the QP's new state after a successful
	// MODIFY_QP (mlx5 resets its queues on RESET).
	Modified(state QPState)
	// Close releases the QP's memory, after the kernel QP is destroyed.
	Close() error
}

// ECEQP is implemented by a provider QP whose device negotiates enhanced
// connection establishment options through its driver data (mlx5:
// ece_options in the create and modify commands). uverbs' QP.SetECE and
// QP.QueryECE use it; a QP without it has no ECE.
type ECEQP interface {
	// ECEVendorID is the vendor ID the device's options belong to, and
	// ECESupported whether the device takes options at all.
	ECEVendorID() uint32
	ECESupported() bool
	// ECE is the options the device answered last (at creation, or at the
	// last MODIFY_QP that carried options; 0 after SetECE).
	ECE() uint32
	// SetECE queues options for the next MODIFY_QP.
	SetECE(options uint32)
	// ModifyUdata is the driver data of the next MODIFY_QP (nil, nil when
	// no options are queued); ModifyDone takes the kernel's answer to it.
	ModifyUdata() (in, out []byte)
	ModifyDone(ok bool)
}

// TargetQPMaker is implemented by a provider Context that keeps state for
// XRC target QPs, which the kernel creates without driver data (mlx5: the
// ECE options, which a target takes through MODIFY_QP like any QP). uverbs
// asks it for the provider side of each target QP it creates or opens; a
// context without it gives target QPs none.
type TargetQPMaker interface {
	TargetQP(qpn uint32) QP
}

// DataInOrderQP is implemented by a provider QP whose device answers
// whether the data of the operations it receives lands in memory in
// order (mlx5: by DEVX firmware commands). uverbs' QP.QueryDataInOrder
// uses it; a QP without it has no such query.
type DataInOrderQP interface {
	// DataInOrder reports whether each whole message's data lands in
	// order on the QP, whose kernel handle is handle. It makes the
	// device's commands; false with an error when they fail.
	DataInOrder(handle uint32) (bool, error)
}

// SRQAttr is what an SRQ is asked for.
type SRQAttr struct {
	MaxWR, MaxSGE, Limit uint32
	// XRC asks for an XRC SRQ (created by CREATE_XSRQ with a domain and a
	// CQ): its receives complete on that CQ and its completions name it
	// rather than a QP of the provider's.
	XRC bool
}

// SRQCreated is the kernel's answer to CREATE_SRQ.
type SRQCreated struct {
	Handle        uint32
	MaxWR, MaxSGE uint32
	SRQN          uint32
}

// SRQ is a provider's shared receive queue.
type SRQ interface {
	// PostRecv posts receives to the SRQ, as QP.PostRecv does, and keeps
	// no reference to wrs after it returns.
	PostRecv(wrs []RecvWR) (n int, err error)
	Close() error
}

// AHAttr is an address handle's destination.
type AHAttr struct {
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	PortNum      uint8
	IsGlobal     bool
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHCreated is the kernel's answer to CREATE_AH.
type AHCreated struct {
	Handle uint32
}

// AH is a provider's address handle (its WQE-ready form of AHAttr).
type AH interface {
	Close() error
}

// AddressHandle is anything that carries a provider AH: uverbs.AH does.
type AddressHandle interface {
	ProviderAH() AH
}
