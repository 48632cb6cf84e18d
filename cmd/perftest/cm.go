package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// perftest's rdma_cm modes. With -z the exchange runs over an RC
// connection made with rdma_cm instead of TCP; -R implies -z and also
// connects the test's QPs through rdma_cm (create_rdma_cm_connection).
// Both connections use the same port: the server accepts the exchange's
// connection and stops listening, and later listens again for the test's
// QPs, which the client connects once both sides shook hands (retrying
// while nobody listens). The CM picks the device from the addresses, so
// the test runs on whatever transport it picked (rxe, siw, mlx5).
//
// Over rdma_cm each exchange message is one SEND of exactly its size into
// a posted receive of sizeof(struct pingpong_dest) (56 bytes), and a QP
// address is that struct in binary, big-endian (rdma_write_keys), not
// the TCP exchange's text.

// cmMsg is sizeof(struct pingpong_dest): perftest's receive length, and
// the size of a QP address message over rdma_cm.
const cmMsg = 56

// cmLink is the exchange's RC connection.
type cmLink struct {
	conn   *rdmacm.Conn
	mem    *mmap.Region
	mr     *uverbs.MR
	sends  int  // send completions not yet waited for
	recvs  int  // receive completions not yet waited for
	client bool // the dialing side
	dead   bool // the peer left, no receive is posted
	heard  bool // a message from the peer came
	// early is the server's answer to the message it waits for, sent
	// before that message came if it is late on iWARP (see nudgeEvery);
	// earlySent says it went.
	early     []byte
	earlySent bool
	// rposted and rtaken count the receives posted and the messages
	// taken: the next receive's slot and the next message's.
	rposted, rtaken int
	wc              [4]uverbs.WorkCompletion
}

const cmSendOff = 2048 // the send area of the link's buffer; receives land in 64-byte slots from 0

// cmConfig is the exchange connection's Config: one message each way at a
// time, its receive posted before the connection is up (Prepare).
func (l *cmLink) config() *rdmacm.Config {
	return &rdmacm.Config{Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: cmRecvSlots, MaxSendSGE: 1, MaxRecvSGE: 1}, SignalAll: true,
		Prepare: func(c *rdmacm.Conn) error {
			// A dial the server rejected (not listening yet: dialRetry
			// dials again) prepared a connection that is gone: its
			// buffer and count of receives must not carry over, or the
			// next connection's first receive lands in slot 1 while
			// recv reads slot 0 (seen between two guests: the client
			// read the server's version as "").
			l.release()
			var err error
			if l.mem, err = mmap.Anonymous(4096); err != nil {
				return err
			}
			if l.mr, err = c.PD().RegMR(l.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
				return err
			}
			l.conn = c
			slots := cmRecvSlots
			if l.client {
				slots = 1 // as before: the early answer is the server's (6.12: send_bw -R goverbs-both failed with 2)
			}
			for range slots {
				if err := l.postRecv(); err != nil {
					return err
				}
			}
			return nil
		}}
}

// cmRecvSlots receives are posted at a time, each into its own slot of
// the buffer: a server that answered early (see nudgeEvery) gets the
// client's stuck message and its next one back to back, and iWARP has no
// receiver-not-ready retry (a message finding no receive breaks the
// connection). Receives complete in the order they were posted.
const cmRecvSlots = 2

// cmRecvID tells the exchange's receives from its sends in an error
// completion (whose opcode is not valid); cmNudgeID marks a nudge.
const (
	cmRecvID  = 1
	cmNudgeID = 2
)

// nudgeEvery is how long the client waits for the server's first message
// on iWARP before it nudges.
//
// siw's accept (siw_accept in Linux's siw_cm.c, 6.1 to 7.x) sends the MPA
// reply before it hands the socket's receive callback to the QP: an FPDU
// that arrives in between (the client, told ESTABLISHED by the reply, sent
// its first message at once) wakes the CM's callback, which ignores data in
// RDMA mode, and it stays unread in the server's socket until more data
// comes. The server then waits for the message forever and the client for
// its answer (the 180 s hang of read_lat -R on siw0, once in ~60 under
// TCG). A zero-length RDMA WRITE is that more data: siw places nothing and
// completes nothing for it (siw_proc_write; MPA's RTR message is one), and
// its arrival makes the QP read the socket, the stuck message first. The
// client may send it: it has already sent its first FPDU.
//
// The server faces clients that do not nudge (rdma-core's perftest). A
// zero-length RDMA READ would wake its socket the same way (the client's
// siw answers with a zero-length READ RESPONSE), but perftest's client
// grants no READ on the exchange connection (create_comm_struct makes its
// verb SEND, so rdma_client_connect leaves responder_resources 0, and
// siw's accept lowers the server's ORD to 0). The server answers early
// instead: each exchange step's server message is its own (a version, a
// size, its QP address), known before the client's comes, and the client
// has a receive posted from before its connect on. When the first message
// is nudgeEvery late the server SENDs its answer; the client takes it and
// goes on to its next step, whose message is more data on the server's
// socket: the QP then reads the stuck message and that one, in order. The
// answer may only go out once the client's kernel has taken the MPA reply
// (an FPDU right behind the reply fails siw's connect, siw_recv_mpa_rr):
// a second after the accept returned, the reply, sent before it returned,
// has long been read there. GOVERBS_SIW_NUDGE=0 turns both nudges off
// (the rig's tests show the hang they cure with it).
const nudgeEvery = time.Second

var nudgeOff = os.Getenv("GOVERBS_SIW_NUDGE") == "0"

// nudgeLog (GOVERBS_SIW_NUDGE=log) has the server say on stderr when it
// answered early (the rig's tests count the rounds that needed it).
var nudgeLog = os.Getenv("GOVERBS_SIW_NUDGE") == "log"

func (l *cmLink) postRecv() error {
	off := uint64(l.rposted%cmRecvSlots) * 64
	_, err := l.conn.QP.PostRecv([]uverbs.RecvWR{{ID: cmRecvID, SGL: []uverbs.SGE{{Addr: l.mr.Addr() + off, Length: cmMsg, LKey: l.mr.LKey()}}}})
	if err == nil {
		l.rposted++
	}
	return err
}

// resolve4 is the IPv4 address of host (perftest resolves AF_INET only).
func resolve4(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	as, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip4", host)
	if err != nil || len(as) == 0 {
		return netip.Addr{}, failf("Problem in resolving basic address and port: %v", err)
	}
	return as[0].Unmap(), nil
}

// dialRetry dials until the server listens: a REJECTED with reason 8
// (invalid service ID) means nobody listens on the port yet, and so does
// ECONNREFUSED on iWARP (the connection's TCP SYN was reset). perftest's
// client retries the test's connection 10 times, 100 ms apart; this one
// allows a slow peer 30 s.
func dialRetry(dst netip.AddrPort, cfg *rdmacm.Config) (*rdmacm.Conn, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := rdmacm.Dial(ctx, dst, cfg)
		cancel()
		if err == nil {
			return c, nil
		}
		ev, ok := rdmacm.Rejected(err)
		notListening := ok && ev.Reason() == 8 || errors.Is(err, unix.ECONNREFUSED)
		if !notListening || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cmDial is rdma_client_connect for the exchange, from source when it is
// not empty (--source_ip).
func cmDial(host string, port int, source string) (*comm, error) {
	a, err := resolve4(host)
	if err != nil {
		return nil, err
	}
	l := &cmLink{client: true}
	cfg := l.config()
	if source != "" {
		src, err := resolve4(source)
		if err != nil {
			return nil, err
		}
		cfg.Source = netip.AddrPortFrom(src, 0)
	}
	c, err := dialRetry(netip.AddrPortFrom(a, uint16(port)), cfg)
	if err != nil {
		l.close()
		return nil, failf("Unable to perform rdma_client function: %v", err)
	}
	l.conn, l.client = c, true
	return &comm{cm: l, client: true}, nil
}

// listenAddr is the server's rdma_cm address: --source_ip or any.
func listenAddr(source string, port int) (netip.AddrPort, error) {
	a := netip.IPv4Unspecified()
	if source != "" {
		var err error
		if a, err = resolve4(source); err != nil {
			return netip.AddrPort{}, err
		}
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// cmAccept is rdma_server_connect for the exchange: listen on port (of
// source, when not empty), accept one client, stop listening.
func cmAccept(port int, source string) (*comm, error) {
	l := &cmLink{}
	addr, err := listenAddr(source, port)
	if err != nil {
		return nil, err
	}
	ln, err := rdmacm.Listen(addr, &rdmacm.Config{Backlog: 1})
	if err != nil {
		return nil, failf(" rdma_bind_addr failed: %v", err)
	}
	defer ln.Close()
	r, err := ln.Accept(context.Background())
	if err != nil {
		return nil, failf("rdma_get_cm_events failed: %v", err)
	}
	c, err := r.AcceptConfig(context.Background(), nil, l.config())
	if err != nil {
		l.close()
		return nil, failf("Function rdma_accept failed: %v", err)
	}
	l.conn = c
	return &comm{cm: l}, nil
}

// await waits for one send (recv false) or receive completion; the other
// kind that comes first is counted for later (the peer's next message can
// arrive before the acknowledgement of ours).
//
// A send flushed because the peer disconnected counts as sent: the peer
// disconnects once its side of the exchange is over, which needed this
// message, and its DREQ can overtake the ACK of our last SEND (they travel
// on different QPs); our QP then flushes a SEND the peer already has. So
// does a SEND that siw failed with LOC_QP_OP_ERR as the peer left: siw's
// transmit (siw_qp_sq_proc_tx in siw_qp_tx.c, 6.1 to 7.x) fails the work
// request with ECONNABORTED when it finds the connection going down after
// a whole DDP segment went out, the last one included, so a peer that
// took our message and closed at once fails it (seen on 7.3.4 at the last
// exchange of read_lat -R, under load: the client had its answer and
// exited 0).
func (l *cmLink) await(recv bool) error {
	for {
		if recv && l.recvs > 0 {
			l.recvs--
			return nil
		}
		if !recv && l.sends > 0 {
			l.sends--
			return nil
		}
		n, err := l.wait(recv)
		if err != nil {
			return err
		}
		for _, w := range l.wc[:n] {
			if w.ID == cmNudgeID && (w.Status == uverbs.WCSuccess || w.Status == uverbs.WCWRFlushErr) {
				continue
			}
			isRecv := w.Opcode&uverbs.WCRecv != 0
			if w.Status != uverbs.WCSuccess {
				isRecv = w.ID == cmRecvID
				gone := w.Status == uverbs.WCWRFlushErr || (w.Status == uverbs.WCLocQPOpErr && !isRecv && l.iWARP())
				if !gone || !l.peerLeft() {
					return failf("Bad wc status -- %d -- %d (%v)", w.Status, w.ID, w.Status)
				}
				if isRecv {
					// The receive posted for a message the peer, gone
					// after its last one, will not send (siw flushed it
					// before completing our last SEND).
					if recv {
						return failf("Bad wc status -- %d -- %d (%v): the peer disconnected", w.Status, w.ID, w.Status)
					}
					continue
				}
			}
			if isRecv {
				l.recvs++
				l.heard = true
			} else {
				l.sends++
			}
		}
	}
}

// wait waits for completions. On iWARP, waiting for the peer's first
// message, the client nudges every nudgeEvery and the server sends its
// answer early (see nudgeEvery).
func (l *cmLink) wait(recv bool) (int, error) {
	if !recv || l.heard || !l.iWARP() || !l.client && l.early == nil || nudgeOff {
		return l.conn.CQ.Wait(context.Background(), l.wc[:])
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), nudgeEvery)
		n, err := l.conn.CQ.Wait(ctx, l.wc[:])
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return n, err
		}
		if l.client {
			// The send queue holds our message's completed SEND at
			// most; a nudge that does not fit (the last one still in
			// flight) waits for the next turn.
			_, _ = l.conn.QP.PostSend([]uverbs.SendWR{{ID: cmNudgeID, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled}})
			continue
		}
		// The server has sent nothing yet: its send queue is empty. Its
		// answer goes once; its completion is counted as a send's.
		if !l.earlySent {
			if err := l.postSend(l.early); err != nil {
				return 0, err
			}
			l.earlySent = true
			if nudgeLog {
				fmt.Fprintln(os.Stderr, "goverbs: the client's first message is late: answered early")
			}
		}
	}
}

// iWARP reports whether the exchange runs over iWARP (siw).
func (l *cmLink) iWARP() bool { return l.conn.ID.Device().Transport == uverbs.TransportIWARP }

// peerLeft reports whether the connection went down because the peer
// disconnected (waiting a little: the QP flushes before the event is seen).
func (l *cmLink) peerLeft() bool {
	select {
	case <-l.conn.Done():
	case <-time.After(5 * time.Second):
		return false
	}
	return errors.Is(l.conn.ID.Err(), rdmacm.ErrDisconnected)
}

// send is rdma_write_data: one signaled SEND of b, waited for.
func (l *cmLink) send(b []byte) error {
	if err := l.postSend(b); err != nil {
		return err
	}
	return l.await(false)
}

func (l *cmLink) postSend(b []byte) error {
	copy(l.mem.Bytes()[cmSendOff:], b)
	wr := uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: l.mr.Addr() + cmSendOff, Length: uint32(len(b)), LKey: l.mr.LKey()}}}
	if _, err := l.conn.QP.PostSend([]uverbs.SendWR{wr}); err != nil {
		return failf("Function ibv_post_send failed: %v", err)
	}
	return nil
}

// recv is rdma_read_data: the next message's first n bytes, then the
// receive posted again.
func (l *cmLink) recv(n int) ([]byte, error) {
	if l.dead {
		return nil, failf("the peer disconnected")
	}
	if err := l.await(true); err != nil {
		return nil, err
	}
	out := make([]byte, n)
	off := (l.rtaken % cmRecvSlots) * 64
	l.rtaken++
	copy(out, l.mem.Bytes()[off:off+n])
	if err := l.postRecv(); err != nil {
		if l.conn.QP.State() == uverbs.QPStateErr && l.peerLeft() {
			// The peer disconnected after its last message, and our
			// QP is in ERR: a receive for a next message is moot (a
			// later recv finds no message and fails).
			l.dead = true
			return out, nil
		}
		return nil, failf("Couldn't post send: %v", err)
	}
	return out, nil
}

// close deregisters the MR before closing the connection (which may close
// the channel and the device context the MR's PD is on).
func (l *cmLink) close() error {
	var errs []error
	if l.mr != nil {
		errs = append(errs, l.mr.Close())
	}
	if l.conn != nil {
		errs = append(errs, l.conn.Close())
	}
	if l.mem != nil {
		errs = append(errs, l.mem.Close())
	}
	return errors.Join(errs...)
}

// release drops what an earlier Prepare set up for a connection that
// failed (the Dial closed the connection itself): the MR (its PD may
// outlive the connection), the buffer and the counts of receives.
func (l *cmLink) release() {
	if l.mr != nil {
		l.mr.Close() // an error means it went with its PD: nothing left
	}
	if l.mem != nil {
		l.mem.Close()
	}
	l.mr, l.mem, l.conn = nil, nil, nil
	l.rposted, l.rtaken, l.recvs, l.sends = 0, 0, 0, 0
}

// encodeBinary is rdma_write_keys' message: struct pingpong_dest with
// every field big-endian (the 4 bytes before vaddr are padding).
func (d dest) encodeBinary(gidIndex int) []byte {
	b := make([]byte, cmMsg)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.lid))
	be.PutUint32(b[4:], uint32(d.outReads))
	be.PutUint32(b[8:], d.qpn)
	be.PutUint32(b[12:], d.psn)
	be.PutUint32(b[16:], d.rkey)
	be.PutUint64(b[24:], d.vaddr)
	copy(b[32:48], d.gid[:])
	be.PutUint32(b[48:], d.srqn)
	be.PutUint32(b[52:], uint32(int32(gidIndex)))
	return b
}

// decodeBinary is rdma_read_keys: it reads the fields perftest reads
// (not srqn).
func decodeBinary(b []byte) (dest, error) {
	if len(b) < cmMsg {
		return dest{}, failf("address message of %d bytes, want %d", len(b), cmMsg)
	}
	be := binary.BigEndian
	d := dest{lid: uint16(be.Uint32(b[0:])), outReads: uint16(be.Uint32(b[4:])), qpn: be.Uint32(b[8:]), psn: be.Uint32(b[12:]),
		rkey: be.Uint32(b[16:]), vaddr: be.Uint64(b[24:])}
	copy(d.gid[:], b[32:48])
	return d, nil
}

// cmConnect is create_rdma_cm_connection: a handshake, the test's QPs
// connected through rdma_cm on the exchange's port (the server listens
// for -q connections, the client dials them), another handshake. The QPs
// use the session's PD and CQs, on the device the CM picked for the
// exchange (the same addresses).
func (s *session) cmConnect() error {
	c := s.c
	// The server listens before the first handshake, not after it as
	// perftest does: the client dials once that handshake is over, and
	// perftest's client gives up after 10 tries 100 ms apart (on iWARP a
	// port nobody listens on refuses at once); under TCG goverbs' server
	// took longer than that to listen again (read_lat -R on siw0, 6.1).
	var ln *rdmacm.Listener
	if c.server == "" {
		addr, err := listenAddr(c.sourceIP, c.port)
		if err != nil {
			return err
		}
		if ln, err = rdmacm.Listen(addr, &rdmacm.Config{Backlog: c.numQP}); err != nil {
			return failf("Failed to bind RDMA CM address on the server: %v", err)
		}
		defer ln.Close()
	}
	if _, err := s.comm.handshake(dest{}); err != nil {
		return failf("Failed to sync between client and server before creating RDMA CM connection: %v", err)
	}
	cfg := &rdmacm.Config{PD: s.pd, SendCQ: s.sendCQ, RecvCQ: s.recvCQ, Cap: s.qpCap(), RetryCount: 7, RNRRetryCount: 7}
	if c.verb == verbRead || c.verb == verbAtomic {
		cfg.ResponderResources, cfg.InitiatorDepth = uint8(min(s.outReads, 255)), uint8(min(s.outReads, 255))
	}
	if c.server != "" {
		a, err := resolve4(c.server)
		if err != nil {
			return err
		}
		if c.sourceIP != "" {
			// perftest resolves the test's connections without a source;
			// goverbs uses --source_ip for them too, so they take the
			// same path as the exchange's.
			src, err := resolve4(c.sourceIP)
			if err != nil {
				return err
			}
			cfg.Source = netip.AddrPortFrom(src, 0)
		}
		for range c.numQP {
			conn, err := dialRetry(netip.AddrPortFrom(a, uint16(c.port)), cfg)
			if err != nil {
				return failf("Failed to connect RDMA CM client: %v", err)
			}
			s.cmConns = append(s.cmConns, conn)
			s.qps = append(s.qps, conn.QP)
		}
	} else {
		for range c.numQP {
			r, err := ln.Accept(context.Background())
			if err == nil {
				var conn *rdmacm.Conn
				if conn, err = r.AcceptConfig(context.Background(), nil, cfg); err == nil {
					s.cmConns = append(s.cmConns, conn)
					s.qps = append(s.qps, conn.QP)
					if c.conn == connRC {
						// As perftest: the RNR timer it would have set in RTR.
						_ = conn.QP.Modify(&uverbs.QPAttr{MinRNRTimer: 12}, uverbs.QPAttrMinRNRTimer)
					}
				}
			}
			if err != nil {
				ln.Close()
				return failf("Failed to accept RDMA CM connection: %v", err)
			}
		}
		if err := ln.Close(); err != nil {
			return failf("Failed to destroy RDMA CM server listen ID: %v", err)
		}
	}
	if _, err := s.comm.handshake(dest{}); err != nil {
		return failf("Failed to sync between client and server after creating RDMA CM connection: %v", err)
	}
	return nil
}
