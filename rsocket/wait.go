package rsocket

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// fail puts the connection in the error state. mu held.
func (c *Conn) fail(err error) {
	if c.state&stError == 0 {
		c.err = err
	}
	c.state = stError
	c.broadcast()
}

// broadcast wakes the goroutines waiting for the state to move. mu held.
func (c *Conn) broadcast() {
	// The goroutine waiting on the CQ is not counted: a lone waiter parks
	// in CQ.Wait and wakes without a channel made per wake-up.
	if c.progWait > 0 {
		close(c.prog)
		c.prog = make(chan struct{})
	}
}

// process applies completions (rs_poll_cq). mu held.
func (c *Conn) process(wcs []uverbs.WorkCompletion) {
	reposts := 0
	for i := range wcs {
		wc := &wcs[i]
		if wc.ID&wrRecv != 0 {
			if wc.Status != uverbs.WCSuccess {
				// A receive fails only when the QP went to the error
				// state (flushed): the connection broke, though the CM
				// may not have said so yet (siw moves the QP to ERR and
				// flushes before its DISCONNECTED event comes). What
				// completed before it is applied already; a DISCONNECT
				// or SHUTDOWN message among that is an orderly end.
				if c.state&stConnected != 0 {
					c.fail(wcError{wc.Status})
				}
				continue
			}
			reposts++
			c.quiet = false // the initiator has sent: we may too
			var msg uint32
			if wc.Flags&uverbs.WCWithImm != 0 {
				msg = wc.Imm
			} else {
				idx := int(uint32(wc.ID))
				msg = c.peerOrder().Uint32(c.mem.Bytes()[c.msgInOff+idx*msgSize:])
			}
			switch msgOp(msg) {
			case opSGL:
				c.sseqComp = uint16(msgData(msg))
			case opIOMapSGL, opWrite:
			case opCtrl:
				switch msgData(msg) {
				case ctrlDisconnect:
					c.state = stDisconnected
					c.peerClosed = true
				case ctrlShutdown:
					if c.state&stWritable != 0 {
						c.state &^= stReadable
					} else {
						c.state = stDisconnected
						c.peerClosed = true
					}
				}
			case opData:
				c.nudge = false // the acceptor took our data (or needs none)
				c.rmsg[c.rmsgTail] = msgData(msg)
				if c.rmsgTail++; c.rmsgTail == len(c.rmsg) {
					c.rmsgTail = 0
				}
			}
			continue
		}
		if wc.ID&wrNudge != 0 {
			c.sqeAvail++
			if wc.Status != uverbs.WCSuccess && c.state&stConnected != 0 {
				c.fail(wcError{wc.Status})
			}
			continue
		}
		msg := uint32(wc.ID)
		switch msgOp(msg) {
		case opSGL:
			c.ctrlMax++
		case opCtrl:
			c.ctrlMax++
			if msgData(msg) == ctrlDisconnect {
				c.state = stDisconnected
			}
		case opIOMapSGL:
			c.sqeAvail++
		default:
			c.sqeAvail++
			c.sbufAvail += int(msgData(msg))
		}
		if wc.Status != uverbs.WCSuccess && c.state&stConnected != 0 {
			c.fail(wcError{wc.Status})
		}
	}
	if c.state&stConnected != 0 {
		for ; reposts > 0; reposts-- {
			if err := c.postRecv(); err != nil {
				c.fail(err)
				break
			}
		}
	}
	if len(wcs) > 0 {
		c.broadcast()
	}
}

// wcError is a failed send completion: the connection broke. A flushed
// request means the QP went to the error state under it (the CM saw the
// peer disconnect, or the peer died): ECONNRESET; exhausted retries mean
// the peer stopped answering: ETIMEDOUT; anything else is EIO.
type wcError struct{ status uverbs.WCStatus }

func (e wcError) Error() string {
	return e.Unwrap().Error() + " (work completion: " + e.status.String() + ")"
}

func (e wcError) Unwrap() error {
	switch e.status {
	case uverbs.WCWRFlushErr:
		return syscall.ECONNRESET
	case uverbs.WCRetryExcErr, uverbs.WCRNRRetryExcErr:
		return syscall.ETIMEDOUT
	}
	return syscall.EIO
}

func (e wcError) Timeout() bool   { return false }
func (e wcError) Temporary() bool { return false }

// pollLocked polls the CQ if no goroutine is waiting on it. mu held.
func (c *Conn) pollLocked() {
	if !c.polling {
		c.pollHeld()
	}
}

// pollHeld polls the CQ empty and then looks at the CM: completions
// already there (data, a DISCONNECT) come before a CM disconnect. mu held,
// and no other goroutine polling.
func (c *Conn) pollHeld() {
	c.drain()
	if testHookBeforeCM != nil {
		testHookBeforeCM(c)
	}
	c.checkCM()
}

// drain polls the CQ empty and applies what it found. mu held, and no
// other goroutine polling.
func (c *Conn) drain() {
	for {
		n, err := c.cq.Poll(c.wc[:])
		if n > 0 {
			c.process(c.wc[:n])
		}
		if err != nil {
			c.brokenLocked(err)
		}
		if n < len(c.wc) || err != nil {
			break
		}
	}
}

// testHookBeforeCM, if set (tests only), runs between pollHeld's drain and
// its look at the CM: it widens the window in which the peer's data and
// its DISCONNECTED event both arrive.
var testHookBeforeCM func(*Conn)

// checkCM notices a CM disconnect without a DISCONNECT message: the peer
// died or destroyed its ID. mu held, and no other goroutine polling.
//
// The CM's DISCONNECTED event may come after the last poll found the CQ
// empty but before this look: the peer wrote its last bytes and its
// DISCONNECT message, saw them acknowledged and disconnected, all in
// between. Those completions are in the CQ by now (the responder
// completes a receive before it acknowledges, and rdmacm moves the QP to
// ERR before it closes Done, so nothing completes successfully after
// Done), and they come first, as in rsocket.c, which learns of a
// disconnect from its completions only: the CQ is drained again before
// the disconnect is taken as a reset. Then bytes received are still read,
// a DISCONNECT or SHUTDOWN message among them is an orderly end of
// stream (io.EOF), and flushed receives are skipped (process).
func (c *Conn) checkCM() {
	if c.state&stConnected == 0 || !c.cmDown() {
		return
	}
	c.drain()
	c.brokenLocked(syscall.ECONNRESET)
}

// cmDown reports whether the CM has seen the connection end: rdmacm's
// Done is closed, and interrupt, run by AfterDone then, has marked it. A
// look between the two finds the connection up; the waiters interrupt
// wakes look again.
func (c *Conn) cmDown() bool { return c.cmGone.Load() }

func (c *Conn) brokenLocked(err error) {
	if c.state&stConnected != 0 {
		c.fail(err)
	}
}

// errTimeout is the error of a call whose deadline passed.
var errTimeout = os.ErrDeadlineExceeded

// wait waits until cond holds, the deadline passes or the connection
// closes. mu is held on entry and on return. While no other goroutine
// waits on the CQ this one parks in CQ.Wait (on the runtime poller);
// otherwise it waits for that one to report progress (prog).
//
// The right to wait on the CQ is a flag under mu, not a token passed
// through a channel: a ping-pong message waits once a side, and under the
// rig's TCG a channel's send and receive cost about 0.7 µs and a select
// over four channels about 2 µs (0.04 and 0.2 natively), against 0.03 µs
// for mu's lock and unlock.
func (c *Conn) wait(dl *deadline, cond func(*Conn) bool) error {
	for {
		if !c.polling {
			if done, err := c.waitHeld(dl, cond); done {
				return err
			}
			continue
		}
		// Another goroutine waits on the CQ: it polls for both, and
		// broadcasts what it applied and when it stops.
		if cond(c) {
			return nil
		}
		if c.closing {
			return net.ErrClosed
		}
		if dl.expired() {
			return errTimeout
		}
		c.progWait++
		prog := c.prog
		c.mu.Unlock()
		select {
		case <-prog:
		case <-dl.done():
		case <-c.cmEnd:
		}
		c.mu.Lock()
		c.progWait--
	}
}

// waitHeld polls the CQ and, if cond does not hold yet, waits on it once
// (spin, then CQ.Wait) and applies what came. mu is held on entry and on
// return, and no other goroutine polls. done reports that wait is over:
// cond holds (err nil), the connection is closing or the deadline passed.
func (c *Conn) waitHeld(dl *deadline, cond func(*Conn) bool) (done bool, err error) {
	c.pollHeld()
	switch {
	case cond(c):
		return true, nil
	case c.closing:
		return true, net.ErrClosed
	case dl.expired():
		return true, errTimeout
	}
	bounded := c.nudge || c.quiet // a nudge or the quiet's end is due
	c.polling = true
	c.mu.Unlock()
	n, werr := c.spin()
	timedOut := false
	ctx := dl.context() // this channel's: its Err stays set once it closed
	if n == 0 && werr == nil {
		if bounded {
			n, timedOut, werr = c.waitNudging(ctx)
		} else {
			n, werr = c.cq.Wait(ctx, c.wc[:])
		}
	}
	c.mu.Lock()
	c.polling = false
	c.process(c.wc[:n])
	if n == 0 {
		c.broadcast() // a waiter on prog may take over the CQ
	}
	// A deadline that passed is no break, even if SetDeadline moved it on
	// since (nettest's ConcurrentMethods saw the connection fail so,
	// "context deadline exceeded"); nor is a wait ended by the
	// connection's break or close.
	if werr != nil && ctx.Err() == nil && !errors.Is(werr, context.DeadlineExceeded) {
		c.brokenLocked(werr)
	}
	if timedOut {
		c.postNudge()
	}
	c.updateCredits()
	return cond(c), nil
}

// spinTime is how long a waiter polls the CQ before it parks (rsocket.c
// polls about 10 µs). Zero: it parks at once.
var spinTime atomic.Int64 // nanoseconds

// spin polls the CQ for up to spinTime. polling set, mu not held.
func (c *Conn) spin() (int, error) {
	spin := time.Duration(spinTime.Load())
	if spin <= 0 {
		return 0, nil
	}
	start := time.Now()
	for {
		if n, err := c.cq.Poll(c.wc[:]); n > 0 || err != nil {
			return n, err
		}
		if time.Since(start) >= spin {
			return 0, nil
		}
	}
}

// nudgeEvery is how long a dialed connection on iWARP waits for the
// peer's first message before it nudges.
//
// siw's accept (siw_accept in Linux's siw_cm.c, 6.1 to 7.x) sends the MPA
// reply before it hands the socket's receive callback to the QP: what we
// send the moment our connect returns (our credits, then the caller's
// first bytes) can arrive in between and stay unread in the acceptor's
// socket until more data comes; the acceptor then waits for our bytes
// and we for its answer, forever (rdmacm's TestRigSIWFirstMessage: 13
// first messages in 300 on Linux 7.3). A zero-length RDMA WRITE is that
// more data: siw places nothing and completes nothing for it at the
// acceptor (siw_proc_write; MPA's RTR message is one), so the rsocket
// peer (rsocket.c or this package) never sees it, and its arrival makes
// the acceptor's QP read the socket, the stuck messages first. The
// dialer may send it: it has sent its first FPDU already.
//
// A waiter nudges until the acceptor's first data comes, nudgeMax times
// at most (the first cures; the race is at the connection's start). Not
// until the acceptor's first message: rsocket.c sends its credits on its
// first poll, unasked, while its socket may hold ours unread (the rig saw
// 9 hangs in 60 connects on Linux 7.3 with that rule).
//
// An acceptor has no such cure against rsocket.c's rconnect: that grants
// no RDMA READ (responder_resources 0, so siw's accept lowers our ORD to
// 0 and a READ, whose response would wake our socket, is refused), and
// rsocket.c sends nothing unasked but credits (on its first poll, then
// after half its receive queue or buffer was consumed) and keepalives
// (SO_KEEPALIVE only): the rig saw 1 connect in 60 of rdma-core's rstream
// client stuck so on Linux 7.3. What the application can do: an accepted
// connection may send once nudgeEvery passed (stillQuiet), so a server
// whose answer does not depend on the dialer's message answers early, and
// the dialer's next message wakes the socket (cmd/rstream's sync does).
//
// GOVERBS_SIW_NUDGE=0 turns the nudge off (the rig's tests show the hang
// it cures with it).
const nudgeEvery = time.Second

const nudgeMax = 5

var nudgeOff = os.Getenv("GOVERBS_SIW_NUDGE") == "0"

// waitNudging is CQ.Wait bounded by nudgeEvery as well as dl (a
// deadline's context); timedOut reports that nudgeEvery passed with
// nothing completed. polling set, mu not held.
func (c *Conn) waitNudging(dl context.Context) (n int, timedOut bool, err error) {
	ctx, cancel := context.WithTimeout(dl, nudgeEvery)
	n, err = c.cq.Wait(ctx, c.wc[:])
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && dl.Err() == nil {
		return n, true, nil
	}
	return n, false, err
}

// postNudge posts the nudge (see nudgeEvery) while the connection needs
// one and a send queue entry is free; a refused post waits for the next
// turn (a connection that broke is the CM's to report). mu held.
func (c *Conn) postNudge() {
	if !c.nudge || c.sqeAvail < 1 || c.state&stConnected == 0 {
		return
	}
	c.swr[0] = uverbs.SendWR{ID: wrNudge, Opcode: uverbs.WRRDMAWrite}
	if _, err := c.qp.PostSend(c.swr[:1]); err == nil {
		c.sqeAvail--
		if c.nudged++; c.nudged == nudgeMax {
			c.nudge = false
		}
	}
}
