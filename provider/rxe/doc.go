// Package rxe is the fast path for the kernel's soft-RoCE driver (rdma_rxe):
// it maps the send, receive, shared-receive and completion queues the kernel
// allocates, writes work requests into them and polls completions from them.
// Programs do not import it: package uverbs picks it for every device whose
// driver id is RDMA_DRIVER_RXE.
//
// # Queues
//
// Every rxe queue is kernel memory mapped from the uverbs command file at the
// offset the create command returned (struct mminfo). A queue starts with
// struct rxe_queue_buf: the log2 of the slot size and the index mask, then
// the producer and consumer indices on cache lines of their own, then the
// slots. Indices are stored masked; a queue of 2^n slots holds 2^n−1
// entries. The provider reads the slot size from the header (completion
// slots are 128 bytes on Linux 6.1, for a 48-byte struct ib_uverbs_wc).
//
// User space produces the send and receive queues and consumes the
// completion queue: a post fills the slots at the producer index and
// publishes the new index with one store-release; a poll reads the producer
// index with a load-acquire, copies the completions and publishes the
// consumer index with a store-release. The store-releases are
// doorbell.Publish32: on amd64 a plain store after a compiler barrier (an
// x86 store is a release store; sync/atomic's Store would be a locked
// XCHG), on arm64 STLR.
//
// # Costs
//
// PostSend makes one syscall per call for a list that sends at most 64 KiB:
// the doorbell, a 32-byte write() of an empty POST_SEND command, on which
// the kernel runs the QP's requester (synchronously on 6.1, from a work
// queue on 6.12), as a raw syscall (no P hand-off: small-message latency,
// and rsocket's and perftest's 64 KiB messages). A longer list is rung in
// parts of at most 64 KiB, each a raw syscall, so that neither the GC's
// stop-the-world waits for the kernel to send more than a part nor does a
// long regular syscall hand the thread's P off (16 64 KiB SENDs a list: 16
// doorbells, ~5% faster than one regular write under TCG); only a single
// request of more than 64 KiB rings a regular syscall
// (provider/internal/writedoorbell, shared with siw: RawMax). PostRecv, SRQ
// PostRecv and Poll make none. None of them allocates, unless it fails.
// Arm (REQ_NOTIFY_CQ) is one syscall.
//
// # Checks
//
// PostSend checks every request of the list before it writes any: first
// provider.CheckSend, the rules every provider shares (opcode for the QP
// type: UD SEND and SEND_WITH_IMM, UC no READ, atomics, SEND_WITH_INV or
// LOCAL_INV; known flags; SGE count and the 2^31-byte limit; inline only
// on operations that send data and within max_inline; atomics with one
// 8-byte SGE and an aligned remote address; LOCAL_INV and BIND_MW without
// an SGL, a bind's access bits and new rkey; a UD address handle and a
// 24-bit remote QPN), then an rxe address handle on UD, room in the queue
// for the whole list, and a QP in RTS or later (the kernel refuses the
// doorbell below RTS with EINVAL; in SQD, SQE and ERR it accepts it, and
// flushes in ERR). PostRecv runs provider.CheckRecv. A refused list
// returns a *provider.WRError (WRError here) naming the request and
// wrapping the cause (EINVAL, or ENOMEM for a full queue, ErrClosed for a
// closed one), and leaves the queue exactly as it was. A list of one
// "plain" request (send_plain.go: RC or UC, one SGE, the common opcodes
// and flags) is checked by a few compares against masks the QP computed
// at creation, with the same outcome, and written without the list's
// loops.
//
// # Concurrency
//
// PostSend and PostRecv of one QP, and PostRecv of one SRQ, are safe for
// concurrent use: each queue has a mutex, held while the list is checked
// and copied into the queue (not across the doorbell write). One goroutine
// polls a CQ at a time; Poll takes no lock and may run concurrently with the
// CQ's Resize and Close: they replace the CQ's state atomically, wait for
// a Poll inside the old state's gate (an exchange to enter and a release
// store to leave: one locked instruction a Poll, as rdma-core's spin lock)
// and then unmap the old queue, so a Poll in flight reads real
// entries, never unmapped memory, and publishes nothing if its state was
// replaced. A single-threaded QP (provider.QPAttr.SingleThreaded) has its
// queues' mutexes off, and a single-threaded CQ's Poll does not enter
// the gate (the program orders those calls with each other and with Resize
// and Close): a post and a poll then make no locked instruction on amd64
// (the doorbell is a syscall either way). An SRQ keeps its mutex. Every fast-path method of a closed
// object returns an error wrapping provider.ErrClosed. A resize whose new
// queue cannot be mapped leaves Poll returning that error until another
// resize succeeds.
//
// # What the kernel reads, and differences from librxe
//
// The send WQE (struct rxe_send_wqe) is filled as librxe fills it; the
// kernel sends to iova (not wr.rdma.remote_addr), sends dma.resid bytes and
// reports dma.length in the sender's completion. Immediate data is written
// and read big-endian, so the value a receiver sees is the value the sender
// gave. The kernel writes wc_flags in its own encoding, enum ib_wc_flags
// (IB_WC_WITH_INVALIDATE is 1<<2 and IB_WC_IP_CSUM_OK 1<<3, the reverse of
// libibverbs' bits); Poll translates them to package provider's (libibverbs')
// values, which librxe, copying the bytes, does not. The rig exercises GRH
// WITH_IMM and WITH_INVALIDATE (SEND_WITH_INV of a window's rkey); the
// checksum bit is read from the kernel source (ib_verbs.h), not observed.
//
// # Memory windows
//
// BIND_MW fills wr.mw {addr, length, mr_lkey, mw_rkey, rkey, access} as
// rxe_bind_mw (rxe_mw.c) reads it, for type 1 and type 2 windows alike:
// the kernel checks the window's state (type 1 valid, type 2 free), a type
// 2 window's PD against the QP's, the MR's MW_BIND access (and local write
// for a writable window) and the range inside the MR; a bind it refuses
// completes with MW_BIND_ERR. A zero-length bind unbinds a type 1 window;
// a type 1 window cannot be invalidated (rxe_check_invalidate_mw). The
// rig shows rxe checking an access through a window against the MR's
// range, not the window's (rxe_resp.c check_rkey: mr_check_range(mw->mr,
// ...)), on 6.1 and 6.12.
//
// UD address handles: since Linux 5.16 the kernel keeps the address vector
// and a WQE names it by the AH number CREATE_AH returned; before, the
// kernel returns none and reads the whole vector from each WQE, which the
// provider then builds as the kernel would (see CreateAH).
//
// Limits: an SRQ cannot be resized
// (its limit can be changed); receives posted while a QP is already in the
// error state are flushed only when the kernel's responder runs again
// (another MODIFY_QP to ERR), since a receive makes no syscall — librxe
// behaves the same.
//
// It owns rxe's driver data, its kernel-mapped queues and its write()
// doorbells, and imports provider and abi; never uverbs.
package rxe
