// Package siw is the fast path for the kernel's software iWARP driver
// (siw): it maps the send, receive, shared-receive and completion rings the
// kernel allocates, writes work requests into them and polls completions
// from them. Programs do not import it: package uverbs picks it for every
// device whose driver id is RDMA_DRIVER_SIW. siw QPs reach RTS only through
// the iWARP connection manager (package rdmacm).
//
// # Rings
//
// Every siw ring is kernel memory (vmalloc_user) mapped from the uverbs
// command file at the key the create command returned (struct
// siw_uresp_create_qp, _cq, _srq; SIW_INVAL_UOBJ_KEY means none): num_sqe
// struct siw_sqe (120 bytes), num_rqe struct siw_rqe (112 bytes), or
// num_cqe struct siw_cqe (32 bytes) followed by struct siw_cq_ctrl. The
// kernel rounds every count up to a power of two and keeps its own
// indices; there is no shared index. Ownership travels in each entry's
// flags: SIW_WQE_VALID set hands a send or receive entry to the kernel
// (which clears the flags when it takes the entry: siw_activate_tx for the
// send queue, siw_rqe_get for receives, siw_sq_flush and siw_rq_flush when
// the QP enters ERR), and hands a completion to user space (which clears
// it to give the slot back; the kernel fills a slot only while its flags
// are 0, and drops completions when the CQ is full).
//
// A post writes the entry, then stores the 32-bit word that holds flags,
// num_sge and opcode with one atomic store (a send's is sequentially
// consistent: the doorbell rule below reads the previous entry after it;
// a receive's is a release store, doorbell.Publish32); an entry whose flags
// are still valid is a full queue (ENOMEM, nothing posted). A poll loads a
// CQE's flags word atomically, copies the entry if it is valid, and stores
// 0 (a release store). What each atomic of PostRecv is for is in
// recvQueue.post: per entry an acquire load and a release store, per call
// the queue's lock.
//
// # The doorbell rule
//
// siw_post_send refuses work requests for a QP whose send queue is mapped
// (EINVAL): the doorbell is a 32-byte write() of POST_SEND with no work
// requests (wqe_size sizeof(struct ib_uverbs_send_wr)). In RTS it starts
// the send queue's processing if it is idle (tx wqe SIW_WR_IDLE), inside the
// write() itself, until the queue is empty or the socket is full (the
// kernel's tx thread goes on from there); if processing is running it does
// nothing, since the kernel takes the next valid entry after each one it
// finishes. In ERR it does nothing and returns 0; in any other state it
// fails with ENOTCONN. PostSend rings it after storing its entries, and
// only if the entry before the first one it wrote is no longer valid (the
// kernel may have stopped there) or it rewrote the whole ring, as libsiw
// does: one syscall per PostSend on an idle queue, none on a busy one. A
// refused doorbell (ENOTCONN: the connection is not established) takes the
// entries back (a compare-and-swap on each flags word) and returns a
// *WRError: nothing is posted.
//
// A list that would send more than 64 KiB (writedoorbell.RawMax; an RDMA
// READ sends nothing) is written and kicked in parts of at most 64 KiB, each
// by the same rule, so that each doorbell is a raw syscall: a long regular
// one inside which siw sends lets the Go runtime hand the thread's P off
// (rxe does the same; docs/COST.md, session 45). Only a single request of
// more than 64 KiB rings a regular write. A refused part comes back as
// above; the parts before it stay posted (PostSend returns their count).
//
// PostRecv and SRQ PostRecv make no syscall; Poll makes none; Arm makes
// none: it stores SIW_NOTIFY_SOLICITED|SIW_NOTIFY_NEXT_COMPLETION (or
// SIW_NOTIFY_SOLICITED) in the mapped siw_cq_ctrl word, which the kernel
// reads when it writes a completion (siw_cq_notify_now: an event for the
// next completion, or a solicited one) and clears when it raises the
// event. None of them allocates, unless it fails.
//
// # Cost
//
// The common calls have fast paths written in the method itself, with no
// further call and nothing spilled (issue 16: the aim is libsiw's cost):
// PostRecv of one request of one SGE, PostSend of one SEND or RDMA WRITE
// that is not inline (the doorbell, when the rule asks for it, is a tail
// call), and Poll. They refuse nothing themselves: anything unusual or
// wrong (a list, another shape, a held lock, a closed queue, a lost
// device, ERR, a full ring) goes to the general path, which checks
// everything again under the lock and answers. test/icount/icount.sh
// counts them.
//
// # What siw carries
//
// RC only (no UD, no UC), no address handles. Send opcodes: SEND,
// SEND_WITH_INV (SIW_OP_SEND_REMOTE_INV, the key in rkey), RDMA_WRITE and
// RDMA_READ. SEND_WITH_IMM and RDMA_WRITE_WITH_IMM (iWARP has no immediate
// data), atomics, LOCAL_INV, BIND_MW and REG_MR (siw takes the last three
// from kernel clients only; libsiw refuses them too) are refused with
// provider.ErrNotSupported. Inline data (at most SIW_MAX_INLINE = 80 bytes)
// on SEND and RDMA_WRITE only, stored after sge[0], whose length is the
// byte count. An RDMA READ writes into at most one local SGE and cannot
// carry the fence flag; it needs a nonzero ORD, negotiated at connection
// (rdma_cm's initiator depth / responder resources). siw_activate_tx leaves
// an entry it refuses in the ring for ever, which stops the queue: the
// checks here run before anything is written. Completions carry the siw
// opcode and status (mapped to libibverbs' values), the byte count and the
// QP number; user-space CQEs never carry an invalidated key.
//
// # Checks
//
// PostSend runs provider.CheckSend, then the rules above, then checks
// room for the whole list; PostRecv checks provider.CheckRecv's rules in
// the pass that writes the entries. A refused list returns a
// *provider.WRError (WRError here) naming the request and wrapping the
// cause (EINVAL, ENOMEM for a full queue, ErrNotSupported, ErrClosed), and
// hands nothing to the kernel: no flags word changes (PostSend leaves the
// ring's bytes as they were; PostRecv may have written entries that stay
// ours, which the kernel reads only once their flags say valid).
//
// siw flushes a QP's mapped send and receive rings only when the QP enters
// ERR (siw_qp_modify); entries written afterwards would never complete, and
// a QP in ERR cannot be reset and reused (siw_qp_modify ignores every
// transition out of ERR). So PostSend and PostRecv refuse a QP that
// MODIFY_QP moved to ERR, and PostSend one still in RESET. A QP that the
// kernel moves to ERR on its own (connection loss) is not seen by the
// provider: requests posted after that are never completed, as with libsiw.
//
// # A removed device
//
// `rdma link delete` raises DEVICE_FATAL on every open context. Whether
// the kernel then disassociates the context (rings revoked, every command
// answered with EIO) or keeps it working until it is closed (the removal
// waits) is the kernel's choice; Context.DeviceLost asks it (see there)
// and, when the context is gone, makes every fast-path call fail with an
// EIO. TestRigDeviceGone checks both outcomes on the rig's kernels.
//
// # Concurrency
//
// PostSend and PostRecv of one QP, and PostRecv of one SRQ, are safe for
// concurrent use (a lock per ring: a mutex for the send queue, held across
// PostSend's doorbell as libsiw holds its lock; a spin lock for a receive
// queue, whose critical section is a few dozen instructions, as libsiw's
// is). One goroutine polls a CQ at a time; Poll takes no lock and may run
// concurrently with Close, which replaces the CQ's state, waits for a Poll
// inside the old one's gate (an exchange to enter and a release store to
// leave, one locked instruction) and for the Arms that counted themselves
// on it (two atomic adds each), and then unmaps the ring, so no reader
// touches unmapped memory. A single-threaded QP
// (provider.QPAttr.SingleThreaded) has both its rings' locks off, and a
// single-threaded CQ's Poll does not enter the gate (the program orders
// those calls, Close included); an SRQ keeps its lock. Every fast-path
// method of a closed object returns an error wrapping provider.ErrClosed.
// siw CQs cannot be resized.
//
// It owns siw's driver data, its kernel-mapped rings and its write()
// doorbell, and imports provider and abi; never uverbs.
package siw
