// Package rdmacm is the RDMA connection manager (rdma_cm) in Go: the
// kernel's ucma ABI on /dev/infiniband/rdma_cm, spoken directly (no
// librdmacm), with goverbs' uverbs objects for the queue pairs.
//
// # Connections
//
// Dial resolves an IP address to an RDMA device and route, creates a QP on
// that device (a uverbs.QP, in a protection domain the channel keeps per
// device, or Config.PD), connects with private data and returns when the
// connection is established, its QP in RTS:
//
//	c, err := rdmacm.Dial(ctx, netip.MustParseAddrPort("10.0.2.15:7174"), &rdmacm.Config{
//		PrivateData: []byte("hello"),
//		Prepare:     func(c *rdmacm.Conn) error { /* register buffers, post receives */ return nil },
//	})
//
// Listen binds and listens; Listener.Accept returns a ConnRequest, which
// carries the peer's private data and is accepted (with private data of
// its own) or rejected (Rejected on the dialer's error returns the reason
// and private data). On InfiniBand and RoCE the QP goes INIT → RTR → RTS
// with the attributes INIT_QP_ATTR gives; on iWARP (siw) the QP is moved
// to INIT and the kernel's iw_cm takes it to RTS. UD (Config.PortSpace
// PSUDP) connects through SIDR and returns the peer's QPN, QKey and an
// address handle; ID.JoinMulticast joins a multicast group.
//
// The lower-level ID (rdma_cm_id) is there for programs that drive the
// steps themselves: CreateID, Bind, ResolveAddr, ResolveRoute, Listen,
// InitQPAttr/ModifyQP, options (SetTOS, SetReuseAddr, SetAFOnly,
// SetAckTimeout), Disconnect, Close; QueryPath (the path records the CM
// resolved) and QueryGID (the ends as AF_IB addresses); BindIB and
// ResolveAddrIB (AF_IB addressing: InfiniBand and RoCE ports); Migrate (move
// an ID, a connection request's before Accept too, to another channel).
//
// # iWARP: who sends first
//
// Two kernel facts (Linux's siw_cm.c, 6.1 to 7.x) bind programs that
// connect over iWARP (siw), and the rig has seen both under TCG:
//
//   - MPA (RFC 5044) has the initiator send the first FPDU. siw's
//     initiator reads the MPA reply with 4 bytes to spare and fails the
//     connect (CONNECT_ERROR, EINVAL) when an FPDU is already behind it: an
//     accepting side must send nothing until the dialer's first message has
//     arrived (about 1 connect in 40 failed otherwise).
//   - siw's accept sends the MPA reply before it gives the socket's
//     receive callback to the QP. A first FPDU that arrives in between
//     wakes the CM's callback, which ignores data in RDMA mode, and stays
//     unread in the accepting side's socket until more data comes: a
//     server waiting for that message and a client waiting for the answer
//     wait forever (1 first message in 200 on 6.12, TestRigSIWFirstMessage;
//     its bytes show in the server socket's Recv-Q). A dialer that waits
//     for an answer can post a zero-length RDMA WRITE, which siw neither
//     places nor completes at the peer (siw_proc_write; MPA's RTR message
//     is one): its arrival makes the QP read the socket, the stuck message
//     first. goverbs' perftest, rping and rsocket clients do so each
//     second until the server's first message comes. An accepting side's
//     socket reads only when data from the peer comes, which it can only
//     provoke: a second after its accept returned (the dialer's kernel has
//     long taken the MPA reply by then) rping's server posts a zero-length
//     RDMA READ, which the client's siw answers (rping's client grants an
//     IRD of 1), and perftest's server sends its answer early (its
//     exchange messages do not depend on the client's, and perftest's
//     client grants no READ there), whose receipt makes the client send
//     its next message (with a second receive posted for it: iWARP has
//     no receiver-not-ready retry). rsocket's listener has no lever of
//     its own against rsocket.c's client, which grants no READ and
//     answers nothing unasked; it lets an accepted connection send a
//     second after the accept, and cmd/rstream's server answers its
//     first sync early. This package posts nothing on a caller's QP.
//
// Dial returns once the MPA reply is processed, Accept once the socket is
// the QP's: a program that waits for both before either side posts (the
// conformance suite's pairing, internal/cmloop) meets neither.
//
// # Events and concurrency
//
// An EventChannel is one rdma_cm file descriptor. It is non-blocking and
// parked on Go's runtime poller: one reader goroutine per channel writes
// GET_EVENT whenever the fd is readable (ucma only ever reports EPOLLIN)
// and hands each event to the ID it names. No OS thread is held by a
// listener, a connection or a blocked call: thousands of connections on one
// channel cost a goroutine each only while their owner waits.
//
// Events that answer a request (ADDR_RESOLVED, ROUTE_RESOLVED,
// CONNECT_RESPONSE, ESTABLISHED, their errors) are consumed by the call
// that made it. The others — DISCONNECTED, DEVICE_REMOVAL, ADDR_CHANGE,
// TIMEWAIT_EXIT — are queued for ID.NextEvent (Conn.NextEvent). A
// DISCONNECTED or DEVICE_REMOVAL also closes ID.Done, makes every call
// blocked on the ID return ErrDisconnected or ErrDeviceRemoved, moves the
// connection's QP to the error state (its posted work requests complete
// with flush errors: nothing posted is lost) and, for a DISCONNECTED,
// answers the peer (librdmacm leaves that rdma_disconnect to the
// application). A removed device's uverbs context is closed with its last
// connection, which lets the kernel finish the removal.
//
// Conn.Close disconnects and destroys at once; Conn.Shutdown disconnects,
// waits (bounded by its ctx) until the CM reports the connection down —
// the peer's DREP, or the DREQ's retries exhausted — and then closes, so
// the kernel's DREQ retransmission is not cancelled by the destroy.
//
// An ID makes one request at a time: Dial, Accept, ResolveAddr,
// ResolveRoute and JoinMulticast must not run concurrently on the same ID.
// Close, Disconnect, NextEvent, Done and Err may be called from any
// goroutine at any time; Close is idempotent and wakes blocked calls with
// an error matching ErrClosed (which is uverbs.ErrClosed), and every
// method of a closed ID that would send a command fails with ErrClosed
// without sending it (the kernel gives a destroyed ID's number to the next
// ID at once). Different IDs and connections are independent. ctx bounds every wait; a ctx deadline is
// also the kernel's timeout for address and route resolution. After a ctx
// error the ID's request may still be running in the kernel: close it.
//
// Errors are *OpError values naming the operation and wrapping the cause:
// an errno (errors.Is(err, unix.ENETUNREACH)), an *EventError for an event
// that reports failure (REJECTED, UNREACHABLE, ADDR_ERROR, …; its errno
// status is reachable with errors.Is), ErrClosed, or the ctx's error.
//
// # Decisions where librdmacm and this package differ
//
//   - The QP, CQ and completion channel of a connection are created by
//     rdmacm (Config.Cap, CQEntries, PollOnly); programs post and poll on
//     Conn.QP and Conn.CQ with the uverbs API.
//   - Accept takes min(own, peer's) responder resources and initiator
//     depth, like rdma_accept; the defaults are 1 and 1 (rping's).
//   - A peer's disconnect is answered automatically (see above).
//   - Reject sends the IB CM's consumer-defined reason (28); the
//     application's own reason travels in the private data (the kernel
//     accepts no other reason from user space).
package rdmacm
