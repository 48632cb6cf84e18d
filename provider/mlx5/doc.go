// Package mlx5 is the fast path for NVIDIA ConnectX (mlx5) devices: queues and
// doorbell records in user memory, WQEs built in user space, doorbells rung by
// MMIO stores to mapped UAR pages, and CQEs polled without a syscall.
//
// It implements package provider's seam; programs reach it through package
// uverbs, which picks it for devices whose kernel driver id is
// RDMA_DRIVER_MLX5.
//
// # Opening a context
//
// GET_CONTEXT carries struct mlx5_ib_alloc_ucontext_req_v2 (16 bfregs, 4 of
// them low-latency, CQE version 1, 4 KiB and dynamic UARs, DEVX), retried as
// rdma-core does when the kernel refuses: without DEVX, then without lib_caps
// (kernels before 4.15), then without max_cqe_version (before 4.5). The
// doorbell pages (UARs) then come from the driver's UAR object
// (MLX5_IB_OBJECT_UAR / MLX5_IB_METHOD_UAR_OBJ_ALLOC, BlueFlame type first,
// non-cached if that fails): one at open, for the CQ arm doorbells and two
// send doorbells, and one more per two QPs. A kernel without that object
// (EPROTONOSUPPORT, or no ioctl at all) ignored the dynamic-UAR request and
// allocated static UARs with the context; those are mapped instead
// (write-combining if the kernel allows, else regular), and the kernel picks
// each QP's register. With the write-only transport policy the request asks
// for static UARs from the start. On architectures without the doorbell
// package's assembly (doorbell.Supported false) NewContext reports
// provider.ErrNotSupported before any command.
//
// # Queues
//
// A CQ is pow2(cqe+1) CQEs of 64 bytes (128 with Driver.CQESize or
// MLX5_CQE_SIZE=128; the CQE is then the slot's second half), every op_own
// initialised to INVALID, followed by its doorbell record; a QP is its
// receive ring, then its send ring of 64-byte WQEBBs, then its doorbell
// record; an SRQ is a ring of WQEs linked through their next segments, laid
// out as the kernel will size it from max_wr and max_sge. All of it is
// anonymous memory from package mmap (MADV_DONTFORK), whose addresses the
// create commands hand to the kernel to pin. With CQE version 1 each QP and
// SRQ has a user index that CQEs carry; with version 0 CQEs are matched to
// QPs by QP number.
//
// # Posting
//
// PostSend validates every WR (provider.CheckSend, the rules every provider
// shares, then what only mlx5 refuses: LOCAL_INV and BIND_MW, an address
// handle of another device, a WQE larger than the queue was sized for, and
// queue space) before it writes anything: a refused list leaves the queue
// as it was and returns a *provider.WRError that names the WR and wraps
// the cause (EINVAL, ENOMEM, ErrNotSupported or ErrClosed). It then writes the WQEs (control
// segment, UD address vector, remote address, atomic operands, data
// segments or inline data, wrapping at the ring's end), the send counter to
// the doorbell record, and rings the doorbell once: a lone WQE of up to 256
// bytes is copied to the BlueFlame register in 64-byte chunks (alternating
// halves), anything else is announced by an 8-byte store of the last WQE's
// first bytes (Driver.NoBlueFlame or MLX5_SHUT_UP_BF=1 force the latter).
// A lone "plain" WR (RC or UC; SEND, WRITE or READ of one SGE, or INLINE
// bytes that fit one WQEBB; see send_plain.go) is checked against masks
// the QP computed at creation and written at fixed offsets: the same bytes,
// about half the instructions.
// PostRecv writes data segments, ending a short list with the invalid lkey
// 0x100, then the receive counter; it needs no MMIO. Neither allocates or
// makes a syscall; each takes its queue's mutex, and Poll the CQ's, but on
// single-threaded queues (provider.QPAttr and CQAttr.SingleThreaded), where
// the program orders the calls: there no post or poll makes a locked
// instruction (sync.Mutex's CAS and XADD, sync/atomic's XCHG for the
// counters the post and the poll share), as rdma-core's mlx5 takes no lock
// in a thread domain or on a single-threaded CQ.
//
// # Completions
//
// Poll reads a CQE when its opcode is not INVALID and its owner bit matches
// the pass, then (after a from-device barrier) its fields; a requester CQE's
// WQE counter retires that WQE and every unsignaled one before it; error
// CQEs map their syndrome to a provider.WCStatus. The consumer index goes to
// the doorbell record once per call. Arm writes the arm word (sequence
// number, solicited or not, consumer index) to the doorbell record and, with
// the CQ number, to the UAR's CQ doorbell: no syscall. Event advances the
// sequence number after uverbs read a completion event. Resize hands the
// kernel a new ring; the device marks the switch with a RESIZE CQE in the
// old one, and the CQEs not yet polled move to the new ring.
//
// # ECE and data in order
//
// ECE options travel in CREATE_QP's and MODIFY_QP's driver data (ece.go),
// an XRC target's through MODIFY_QP only: the kernel creates a target
// without driver data, so its first answer is 0. Whether a QP's data lands
// in order (data_in_order.go) is asked of the firmware by DEVX commands,
// ioctls on the driver's DEVX objects: QUERY_HCA_CAP once per context,
// then QUERY_QP of a QP in RTS; their mailboxes' layouts are generated
// from rdma-core's mlx5_ifc.h (internal/ifc).
//
// # Not implemented
//
// DC, raw packet QPs, CQE compression, and every other DEVX command.
//
// # Reset, destroy and close
//
// A QP moved to RESET (Modified) or destroyed (Close) has its CQEs not yet
// polled removed from its send and receive CQs, as rdma-core's
// __mlx5_cq_clean does: the CQEs that stay keep their order, and a removed
// receive CQE of a QP fed by an SRQ gives its WQE back to the SRQ. With CQE
// version 1 a responder CQE names the QP's user index even for a receive
// through a (basic) SRQ, and the SRQ is the QP's. So a reset QP's old
// flushes never complete the receives of its next life, and a destroyed
// QP leaks no SRQ WQE. A CQE that still names no live QP is skipped.
//
// Close of a CQ, QP or SRQ, and the context's Close (which closes every
// one still open before it unmaps the doorbell pages), wait for a fast-path
// call in progress on that object (each holds the object's mutex) and make
// every later one return an error wrapping provider.ErrClosed, without
// touching the released memory. Once the device is lost (DeviceLost, which
// uverbs calls on a DEVICE_FATAL async event) every fast-path call fails
// with an error wrapping unix.EIO, as the kernel's commands then do, and
// no doorbell is written to the revoked UAR pages.
//
// # Tests
//
// internal/model is a device model that plays the kernel's and the
// hardware's side (see its documentation); the conformance suite in
// test/conformance passes on it in several kernel configurations, as do this
// package's end-to-end tests, benchmarks (0 allocations and 0 syscalls per
// PostSend, PostRecv and Poll) and the golden-byte, layout and fuzz tests of
// the WQE and CQE codecs against the layouts in <infiniband/mlx5dv.h>
// (internal/mlx5dv, generated by abi/internal/abigen). TestConnectX runs the
// suite on a real adapter when one is present and says it did not run when
// none is.
//
// It owns every mlx5-specific byte (driver data, WQEs, CQEs, UARs and
// doorbells) and imports provider, abi, mmap, doorbell and its own internal
// packages; never uverbs.
package mlx5
