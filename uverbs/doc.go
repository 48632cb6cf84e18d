// Package uverbs is the public RDMA verbs API of goverbs: devices, contexts,
// protection domains, memory regions and windows, completion queues and
// channels, queue pairs, shared receive queues, address handles and async
// events, spoken to the kernel's uverbs character device without libibverbs.
//
// Object graph:
//
//	Device ─Open→ Context ─┬→ PD ─┬→ MR, MW
//	                       │      ├→ QP ──send/recv CQ──→ CQ ←─ CompChannel
//	                       │      ├→ SRQ
//	                       │      └→ AH
//	                       └→ async events
//
// The main flows: Devices (discover), Open and PD.RegMR (register; memory
// from package mmap), QP.Endpoint, the peers' exchange and QP.Connect
// (connect: RESET → INIT → RTR → RTS in one call; ConnectPair on one host),
// QP.PostSend and PostRecv with MR.SGE naming a region's bytes (post), and
// CQ.Poll or CQ.Wait (wait). The examples show each, and docs/DESIGN.md
// walks a CreateQP and a PostSend through the layers. libibverbs' extended
// verbs have Go shapes of their own: QP.StartWR's WRBatch is the ibv_wr_*
// posting API (one doorbell per batch), CQ.StartPoll's CQPoll the extended
// CQ's start/next/end poll and ibv_wc_read_* (CQOptions.Timestamps for
// completion timestamps); docs/VERBS.md maps every libibverbs verb to
// goverbs' name.
//
// Waiting for completions: CQ.Wait spins before it sleeps. It polls the
// empty CQ for up to CQOptions.WaitSpin (DefaultWaitSpin, 1 ms, by
// default), and only then arms the CQ and parks on the completion channel
// through the runtime poller, holding no OS thread; the waiters read the
// channel themselves, one at a time, so no goverbs goroutine sits between
// the event and the waiter. A completion found while spinning costs no
// scheduler hand-off (rdma-core's way, a blocked read() of the channel,
// costs a syscall and a thread wake-up per event, and on rxe the re-arm
// is a second syscall) and no syscall but a raw sched_yield per 512
// polls, or per 64 while the yields find other tasks waiting for the CPU:
// a kernel worker that needs the spinning CPU (rxe's sends on Linux 6.12
// and 7.x) runs only once the spin lets it. The price is CPU, a thread
// kept busy while the goroutine spins (it yields to whatever else is
// runnable on its CPU). A CQ whose waits
// keep outlasting the cap stops spinning (it probes with a spin now and
// then); CQOptions.WaitSpinMax lets the cap grow to cover the waits seen
// (rsocket.Config passes it); CQOptions.WaitSpin < 0 turns spinning
// off, and the environment variables GOVERBS_WAIT_SPIN (WaitSpinEnv) and
// GOVERBS_WAIT_SPIN_MAX (WaitSpinMaxEnv) change the defaults.
//
// Busy polling and the Go runtime: the fast path's syscalls (rxe's and
// siw's doorbells for up to 64 KiB of data, the spin's sched_yield; mlx5 rings
// with stores) are raw, so they leave the runtime's monitor thread
// (sysmon) as it is. The monitor sleeps once it sees every P idle and
// wakes at the next ordinary syscall or timer; while awake it naps (20 µs,
// growing to 10 ms) and preempts a goroutine that ran 10 ms without
// yielding, and at GOMAXPROCS above 1 the preempted goroutine may resume
// on another thread. So a spinning loop meets those preemptions only if an
// ordinary syscall came after the program's last long wait, or if the
// program never waited long enough for the monitor to see it idle; on a
// machine whose every CPU runs a spinner each nap takes one of them
// (docs/COST.md, sessions 34 and 47-49). The move to another thread is
// dear under emulation: in the rig (QEMU's TCG) each virtual CPU refills
// its own translation caches, and a two-QP loop ran 8% behind
// libibverbs' unpinned, 2% behind with its process pinned to one CPU
// (docs/COST.md, session 56). A spinner that calls runtime.LockOSThread
// stays on its thread, and its thread mostly on its CPU: in eight boots
// the same loop ran a median 9.3% behind libibverbs' as it is, 2.6%
// behind with its goroutine locked to its thread, and 2.4% with the
// thread's affinity also set (unix.SchedSetaffinity) (session 57).
//
// Every object has Close, which is idempotent. Slow-path verbs cost one
// syscall each; the fast path (PostSend, PostRecv, PollCQ) is delegated to the
// device's provider and allocates nothing.
//
// It owns the verbs: every kernel command (the uverbs ABI, ioctl first and
// write() where needed), object lifetimes, device discovery (netlink and
// sysfs), async and completion events, errors and cost recording. It imports
// abi (commands), provider and the providers it registers (rxe, mlx5, siw);
// no package below it imports it, and its exported API names no abi type.
//
// Lifetimes and concurrency: every object is safe for concurrent use except
// the fast path's own rules (one goroutine polls a CQ at a time; PostSend
// and PostRecv as the provider documents). A verb on a closed object, or on
// any object of a closed Context, returns an error for which
// errors.Is(err, ErrClosed) holds (an *OpError naming the verb on the slow
// path), and never sends the object's handle to the kernel again: the
// kernel gives a freed handle to the next object created, so a stale handle
// would name a live object. Close waits for the slow verbs in flight on its
// object, and wakes every goroutine parked in a Wait on it; Close of an
// object after its Context closed returns nil. Memory handed to the device
// stays valid for the MR's life (see PD.RegMR). When a device is removed,
// waiters learn it (see Context.NextAsyncEvent); close the Context then.
package uverbs
