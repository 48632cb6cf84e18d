// Package rsocket is byte streams over RDMA as net.Conn and net.Listener,
// wire-compatible with librdmacm's rsocket (SOCK_STREAM): a peer can be
// rdma-core's rstream or riostream, or any program under librspreload.
//
//	l, _ := rsocket.Listen("tcp", "10.0.2.15:7471")
//	go http.Serve(l, handler)
//	c, _ := rsocket.Dial(ctx, "tcp", "10.0.2.15:7471")
//
// Connections are made with goverbs' rdma_cm (package rdmacm) in the TCP
// port space over RC queue pairs, on any provider: rxe (RoCE), and siw
// (iWARP), where messages travel as SENDs because iWARP has no immediate
// data.
//
// # Protocol (librdmacm rsocket.c, rdma-core 44)
//
// The connect request and the accept carry rs_conn_data (40 bytes): version
// 1, flags (1: the sender is big-endian; 2: it has an iomap), its receive
// credits (its receive queue size), the address and rkey of its target SGL
// (2 entries the peer RDMA-writes buffers into) and its first target
// buffer: half its receive buffer. Data is RDMA-written into the peer's
// current target buffer with immediate data op<<29|length (op 0); a
// receiver that has read half its buffer offers that half back by
// RDMA-writing a 16-byte SGE into the sender's target SGL with immediate op
// 4 (SGL) and its new credit limit; credits alone travel as a zero-length
// write with op 4. Op 7 carries control messages: DISCONNECT (0) and
// SHUTDOWN (2); rsocket's KEEPALIVE (1) is a zero-length RDMA WRITE
// without immediate data that only the peer's transport sees. On iWARP each
// message is an RDMA WRITE followed by a 4-byte inline SEND of the word. A
// sender has at most 4 control messages and (receive queue size) data
// messages in flight. The defaults are rsocket's: 128 KiB send and receive
// buffers, 384-entry queues, 64 bytes inline. A Write is cut into
// transfers as rsocket.c cuts a send (2 KiB, then doubling up to 64 KiB),
// except on rxe and siw: there every transfer costs the kernel's protocol
// work and the copy overlaps nothing, so each transfer is as large as the
// peer's buffers allow, up to 64 KiB. The iomap extension (riomap,
// riowrite) is not implemented: goverbs announces no iomap and ignores
// IOMAP_SGL messages.
//
// # net.Conn
//
// Read, Write, the deadlines (timeouts are *net.OpError wrapping
// os.ErrDeadlineExceeded), CloseWrite (SHUT_WR: the peer reads io.EOF),
// CloseRead, Close (wakes blocked Read and Write with net.ErrClosed, sends
// DISCONNECT after every byte written has landed, then releases the QP and
// buffers; on iWARP it first waits, half a second at most, until the peer
// has read every byte or closed too: siw completes a send once it is in
// TCP, and a disconnect right after can lose its last bytes), LocalAddr
// and RemoteAddr. A peer that disappears without a
// DISCONNECT (killed: its CM sends a disconnect) makes Read and Write fail
// with ECONNRESET once the buffered bytes are read. The CM's DISCONNECTED
// event is taken as a reset only after the CQ is drained once more: a peer
// that wrote, sent DISCONNECT and disconnected in the meantime is read to
// the end and then io.EOF, as rsocket.c's completions-first order gives.
// golang.org/x/net/nettest's TestConn passes over rxe (rsocket's rig
// tests); data moves on rxe and siw (iWARP) in both roles with rdma-core's
// rstream.
//
// Bytes are copied: Write copies into the registered send buffer and
// returns once they are posted; Read copies out of the receive buffer the
// peer wrote into. Neither keeps the caller's slice, even after a timeout.
// With data or room already there, neither allocates nor blocks; a blocked
// call polls the CQ for up to 1 ms and then parks on its completion
// channel through Go's runtime poller (uverbs.CQ.Wait); with
// Config.WaitSpinMax the spin follows the waits the connection has seen,
// up to that limit (a stream whose messages take milliseconds to arrive,
// large ones on an emulated device, spins through them). A spinning call
// keeps its OS thread busy (rdma-core's rstream, nonblocking, spins
// without end; rsocket.c's blocking calls poll 10 µs). Buffer and queue
// sizes are set with Config (like SO_SNDBUF/SO_RCVBUF, before the
// connection is made).
//
// Dials share one rdma_cm event channel per process, and the connections
// on a device share one completion channel (rdmacm's SharedCompChannel):
// an idle connection holds no goroutine and no OS thread; the event
// goroutines are one per channel. Each connection has its own CQ and QP.
package rsocket
