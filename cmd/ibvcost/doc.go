// Command ibvcost measures what goverbs' verbs cost: every slow-path verb
// (a command to the kernel) and the fast-path operations (work requests
// and completions), per call, with the syscalls each makes, so that set-up
// can be weighed against data movement ("one RC connection costs as much as
// N 64-byte RDMA WRITEs"). test/cost/verbs_cost.c runs the same workload
// through rdma-core's libibverbs and writes the same JSON; -compare sets the
// two side by side. docs/COST.md has a run from the rig and how to read it.
//
// Usage:
//
//	ibvcost [-d dev] [-n calls] [-big-n calls] [-mr-max size] [-g gid-index]
//	        [-json] [-svg file] [-compare files] [-labels a,b] [-load files]
//	        [-overhead=false] [-paths slow,fast,cm] [-cpu n]
//	        [-perf[=false]] [-v]
//
//	-d        device (default rxe0)
//	-n        timed calls of every row (default 100)
//	-big-n    timed calls of MR registrations of 16 MiB and more (default 5)
//	-mr-max   largest MR registered (default 256MiB; the rig's guest has
//	          1 GiB of RAM, so 256 MiB fits; larger rows are listed as skipped)
//	-g        source GID index of the loopback address (default: the port's
//	          first RoCE v2 GID holding an IPv4 address, else its first GID)
//	-json     print the Report as JSON instead of a table
//	-svg      also draw the chart: one bar per row (the median, a whisker to
//	          the p99) on one logarithmic time axis, goverbs and rdma-core side
//	          by side when -compare is given
//	-compare  rdma-core's reports (verbs_cost's output; a comma-separated
//	          list of runs is merged) to print beside goverbs': a row's time
//	          is the median of the runs' medians, its ratio that of the two
//	          sides' figures, "best" the ratio of each side's fastest run
//	          (under emulation a whole run can turn slow: see Row.FastestRunNS),
//	          "paired" the median of the ratios of the i-th runs of each side
//	          (runs made next to each other: see Row.RunMediansNS)
//	-labels   the two sides' names in -compare's table and chart (default
//	          goverbs,rdma-core; test/cost/compare.sh's BASE uses new,base
//	          for goverbs beside an older goverbs)
//	-load     goverbs' reports (-json output) to use instead of measuring
//	-paths    the rows measured: slow, and any of fast and cm (default all
//	          three); the rows of a path left out are listed as not measured.
//	          verbs_cost's -p takes the same list
//	-cpu      pin the measuring thread to CPU n (sched_setaffinity of that
//	          thread alone: the runtime's other threads stay unpinned);
//	          verbs_cost's -c n pins its one thread the same way. Under
//	          emulation a thread woken from a sleep on the other vCPU meets
//	          cold translation caches there: the poll_cq row, 16 polls after
//	          a 2 ms sleep, is mostly its first poll, and a Go process's
//	          extra threads make that wake-up move more often (docs/COST.md,
//	          session 40). Default -1: not pinned
//	-perf     count syscalls with the kernel's perf counters (default on; off
//	          by default under QEMU TCG, where registering the tracepoint from a
//	          multi-threaded process can crash the guest: see the last section)
//	-v        print each row's name on stderr as it starts
//
// # The workload
//
// One context, one PD. Every row is a cycle of verbs repeated: first
// three counted calls (a perf counter group on the raw_syscalls:sys_enter
// tracepoint around each call, on this thread only, and a fresh
// uverbs.Recorder on the context), then -n timed calls (nothing but two
// monotonic clock reads around each call; the median cost of an empty pair,
// the timer floor, is subtracted). Rows, in order:
//
//	open_device, close_device     uverbs.Open and Context.Close of a context of their own
//	query_device, query_port      QueryDevice; QueryPort(1)
//	query_gid                     QueryGID(1, 0)
//	alloc_pd, dealloc_pd
//	reg_mr_<size>, dereg_mr_<size>  4KiB, 64KiB, 1MiB, 16MiB, 256MiB: prefixes of one
//	                              prefaulted anonymous mapping; local write, remote write and read
//	create_cq, destroy_cq         256 entries, no channel
//	create_qp, destroy_qp         RC, 64 send and receive WRs, 1 SGE each, 64 bytes inline
//	modify_qp_init … _reset       one RC QP connected to itself, round RESET → INIT → RTR →
//	                              RTS → ERR → RESET (path MTU 1024, PSN 0x100, GRH with -g)
//	create_ah, destroy_ah         the port's own GID -g, through a GRH
//
// The fast path runs on two RC QPs of the device connected to each other
// (loopback), each with a send CQ, a receive CQ and a registered 128 KiB
// buffer; A posts, B receives and is the RDMA target:
//
//	post_send_<op>_<size>         one signaled WR on an idle QP: send, write, read × 8B
//	                              (inline, but for read), 64B, 4KiB, 64KiB; the completion
//	                              (and the receive) reaped outside the timing
//	post_recv                     a batch of 32 PostRecv calls timed as one, per call
//	poll_cq_empty                 a batch of 100 polls of an empty CQ, per call
//	poll_cq                       a batch of 16 polls each returning one completion (of 16
//	                              WRITEs left 2 ms to complete), per call
//	pingpong_send_64B             round trip: A sends 64 B, B polls and answers, A polls
//	msg_rate_write_64B            chunks of 256 64-B WRITEs, one per PostSend, at most 32
//	                              outstanding, every 8th signaled; per message
//
// On iWARP (siw) the pair is connected through rdma_cm (package rdmacm, on
// the IPv4 address of the device's netdev, IRD and ORD 4), since its QPs
// reach RTS only so; the slow-path rows MODIFY_QP to RTR and RTS and the
// address-handle rows are skipped there. A device without a fast path
// lists the fast-path rows as skipped, with the reason in the report's
// fast_path. After the rows, the Recorder's own cost
// is measured on PollCQ and PostSend, recording off and on.
//
// Then the connection manager (package rdmacm; verbs_cost.c times
// librdmacm's calls), on the IPv4 address of the device's netdev, a dialer
// and a listener of the same program on event channels opened beforehand,
// RC QPs of one WR and SGE each way, from a goroutine not locked to an OS
// thread (as a Go program waits for CM events; ibvcost's main goroutine is
// locked for the syscall counters); timed only (no syscall counts: the
// work spans goroutines):
//
//	cm_create_id, cm_destroy_id   CreateID; Close of an id with its route resolved
//	cm_resolve_addr               ResolveAddr to ADDR_RESOLVED
//	cm_resolve_route              ResolveRoute to ROUTE_RESOLVED
//	cm_connect                    Dial from its QP in INIT to ESTABLISHED (QP in RTS)
//	cm_accept                     the listener's accept from its QP in INIT to ESTABLISHED
//	cm_disconnect                 Disconnect to the DISCONNECTED event
//
// From the medians, ibvcost derives ratios in units of a 64-byte RDMA WRITE
// (msg_rate's mean time per message) and of a ping-pong round trip: RC
// connection set-up (create CQ and QP, three transitions), reg MR 1 MiB and
// 4 KiB, open device, alloc PD.
//
// The JSON schema is the Report type (go doc -cmd ./cmd/ibvcost Report).
//
// Counting syscalls needs tracefs (mount -t tracefs nodev /sys/kernel/tracing)
// and root or CAP_PERFMON; without them the syscall columns are empty and the
// Recorder's account remains. Under QEMU's TCG, registering the
// raw_syscalls tracepoint patches kernel text while Go's other threads may be
// entering syscalls on another vCPU, which can leave one on a stale int3
// (soft lockup, oops): there ibvcost counts only with -perf, and
// test/cost/guest.sh first registers the tracepoint from a single-threaded
// holder (verbs_cost -H), after which no counter patches anything.
//
// GOVERBS_CPUPROFILE=file writes a CPU profile of the run into file
// (runtime/pprof; test/perf/pgo.sh takes the compared commands' profiles
// in one boot).
//
// It imports uverbs and mmap (the public API, as any program) and nothing
// internal to the library but internal/cpuprofile, which reads
// GOVERBS_CPUPROFILE.
package main
