package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// CompChannel is a completion channel: the file on which the kernel
// reports completion events of the CQs bound to it. It is non-blocking and
// registered with Go's runtime poller, so a goroutine waiting for an event
// parks without holding an OS thread (the epoll pattern of rdma-core's
// users, done by the Go runtime).
//
// No goroutine of goverbs' reads the channel: the waiters do. One waiter
// at a time (CQ.Wait or CompChannel.Wait, whichever found the channel
// unread) reads it, parked on the runtime poller, and hands each event to
// its consumer; when it leaves, another waiter takes over. So the event of
// a lone waiter costs one wake-up, the poller's, as a blocked read() does
// in C, and no goroutine runs while nobody waits.
//
// Each event goes to exactly one consumer: to CQ.Wait if a goroutine is in
// CQ.Wait on the event's CQ, else to CompChannel.Wait, which returns each
// CQ with pending events once (a CQ already queued is not queued twice).
// A CQ.Wait that starts takes over its CQ's queued event, so
// CompChannel.Wait never returns a CQ whose event CQ.Wait consumed. A
// CQ.Wait that armed its CQ and then found its completion by polling
// leaves that arm's event in the channel; it goes to the next waiter like
// any other, so CompChannel.Wait may return a CQ that has nothing new to
// poll. Both Waits may be used from any number of goroutines.
//
// Close (of the channel or of its Context) wakes every goroutine parked
// in CompChannel.Wait and in CQ.Wait on the channel's CQs: they return an
// error for which errors.Is(err, ErrClosed) holds, as does every Wait
// after it. Closed CQs are never returned.
type CompChannel struct {
	ctx  *Context
	file *os.File
	fd   int    // the descriptor number, read once through SyscallConn
	reg  uint64 // its tag in ctx.channels

	mu      sync.Mutex
	ready   []*CQ         // CQs with an event not yet returned by Wait
	reading bool          // a waiter holds the reader's token
	sig     chan struct{} // capacity 1: ready gained a CQ
	free    chan struct{} // capacity 1: the reader's token was given back

	// ev is the reader's buffer: only the token's holder touches it, as
	// it does rn and rerr, what readEvent (readFn, made once) last read.
	ev     abi.IbUverbsCompEventDesc
	rc     syscall.RawConn
	readFn func(fd uintptr) bool
	rn     int
	rerr   error

	stopOnce sync.Once
	err      error         // why reading stopped
	stopped  chan struct{} // closed when reading stopped for good

	// The reader parks in read(2) on the poller; its ctx's end reaches it
	// as a read deadline in the past (a kick). The registration with ctx
	// is kept for the next wait on the same ctx: context.AfterFunc
	// allocates, and a goroutine usually waits in a loop on one ctx.
	watchMu   sync.Mutex
	watchDone <-chan struct{} // the Done of the watched ctx
	watchStop func() bool     // undoes the registration
	kickFn    func()          // ch.kick, made once

	lifetime
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL, a
// write-only command: one syscall). The context's first channel also
// starts its device watch (see Context.DeviceRemoved): a few more
// syscalls here, so that no Wait pays for them on its way to a completion.
func (c *Context) CreateCompChannel() (_ *CompChannel, err error) {
	if sp := c.begin("CreateCompChannel"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	var req abi.IbUverbsCreateCompChannel
	var resp abi.IbUverbsCreateCompChannelResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, In: abi.Bytes(&req), Out: abi.Bytes(&resp)}
	if err := c.invoke("CreateCompChannel", &cmd); err != nil {
		return nil, err
	}
	ch := &CompChannel{ctx: c, file: asyncFile(int(resp.Fd)), fd: int(resp.Fd),
		sig: make(chan struct{}, 1), free: make(chan struct{}, 1), stopped: make(chan struct{})}
	ch.kickFn = ch.kick
	ch.readFn = ch.readEvent
	if ch.rc, err = ch.file.SyscallConn(); err != nil {
		ch.file.Close()
		return nil, &OpError{Verb: "CreateCompChannel", Device: c.dev.Name, Err: err}
	}
	// The tag is the channel's before Context.Close can list it.
	c.channels.insert(ch, &ch.reg)
	if c.closed.Load() { // Context.Close ran meanwhile: it may have missed ch
		ch.Close()
		return nil, &OpError{Verb: "CreateCompChannel", Device: c.dev.Name, Err: ErrClosed}
	}
	c.watchDevice()
	return ch, nil
}

// Fd is the channel's file descriptor, for programs that poll it
// themselves; do not read or close it while using Wait, and do not use it
// after Close (the number may then name another file).
func (ch *CompChannel) Fd() int { return ch.fd }

// Wait returns the next CQ that had a completion event, waiting until one
// comes or ctx is done. The event is acknowledged; arm the CQ again
// (ReqNotify) before polling it empty, or use CQ.Wait, which does it all.
//
// If the device is removed, Wait returns an error wrapping ENODEV.
func (ch *CompChannel) Wait(ctx context.Context) (_ *CQ, err error) {
	var holding, woken bool
	defer func() {
		if holding || woken {
			ch.leave(holding, woken)
		}
	}()
	for {
		if err := ch.waitClosed(); err != nil {
			return nil, err
		}
		if cq := ch.next(); cq != nil {
			return cq, nil
		}
		if !holding && ch.acquire() {
			holding = true
		}
		if holding {
			if err := ch.readFor(ctx, "CompChannel.Wait"); err != nil {
				return nil, err
			}
			continue
		}
		select {
		case <-ch.sig:
			woken = true
		case <-ch.free:
			woken = true
		case <-ch.closed():
		case <-ch.ctx.dead:
		case <-ch.ctx.lostCh:
			return nil, ch.ctx.lostError("CompChannel.Wait")
		case <-ch.stopped:
			return nil, ch.stopError("CompChannel.Wait")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// next takes the first open CQ off the queue of CompChannel.Wait.
func (ch *CompChannel) next() *CQ {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for len(ch.ready) > 0 {
		cq := ch.ready[0]
		ch.ready = ch.ready[1:]
		cq.queued = false
		if !cq.isClosed() {
			return cq
		}
	}
	return nil
}

// waitClosed is Wait's error once the channel or its context is closed.
func (ch *CompChannel) waitClosed() error {
	switch {
	case ch.isClosed():
		return &OpError{Verb: "CompChannel.Wait", Device: ch.ctx.dev.Name, Err: ErrClosed}
	case ch.ctx.closed.Load():
		return &OpError{Verb: "CompChannel.Wait", Device: ch.ctx.dev.Name, Err: fmt.Errorf("the context: %w", ErrClosed)}
	}
	return nil
}

// stopError is a waiter's error once reading stopped for good: the
// device-lost error if the read failed with EIO (the kernel revoked the
// context: see lostOr), whichever of stopped and the context's lostCh the
// waiter's select took.
func (ch *CompChannel) stopError(verb string) error { return ch.readError(verb, ch.err) }

// readError is verb's error for a read that failed with err: the
// device-lost error for EIO (lostOr), else err itself.
func (ch *CompChannel) readError(verb string, err error) error {
	if lost := ch.ctx.lostOr(verb, err); lost != err {
		return lost
	}
	return opError(verb, ch.ctx.dev.Name, abi.TransportNone, err)
}

// unqueue removes cq from the queue of CompChannel.Wait and reports
// whether it was there.
func (ch *CompChannel) unqueue(cq *CQ) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !cq.queued {
		return false
	}
	cq.queued = false
	for i, q := range ch.ready {
		if q == cq {
			ch.ready = append(ch.ready[:i], ch.ready[i+1:]...)
			break
		}
	}
	return true
}

// acquire takes the reader's token if no waiter holds it.
func (ch *CompChannel) acquire() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.reading {
		return false
	}
	ch.reading = true
	return true
}

// leave is a waiter's way out. The holder gives the token back and wakes
// a waiter to take it over; a waiter that was woken (by free or sig) and
// leaves without acting on it passes the wake-up on, so that no wake-up
// is lost with it.
func (ch *CompChannel) leave(holding, woken bool) {
	ch.mu.Lock()
	if holding {
		ch.reading = false
	}
	free, ready := !ch.reading, len(ch.ready) > 0
	ch.mu.Unlock()
	if free {
		notify(ch.free)
	}
	if woken && ready {
		notify(ch.sig)
	}
}

// notify sends a wake-up on a channel of capacity 1; a wake-up already
// pending covers it.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// readFor is the token holder's turn: it reads one event and hands it to
// its consumer, parked on the runtime poller until an event comes, ctx
// ends or something kicks the reader (Close, the device's removal). A nil
// error means something happened: the caller looks again at what it waits
// for.
func (ch *CompChannel) readFor(ctx context.Context, verb string) error {
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		ch.watch(ctx)
	}
	select {
	case <-ch.stopped:
		return ch.stopError(verb)
	case <-ch.ctx.lostCh:
		return ch.ctx.lostError(verb)
	default:
	}
	if err := ch.read(); err != nil {
		if e := ch.waitClosed(); e != nil {
			return e
		}
		return ch.readError(verb, err) // EIO: the kernel revoked the context, maybe before the watch saw the node go
	}
	return nil
}

// read reads one completion event and delivers it. A kick ends the read
// with nothing read and a nil error; an error stops reading for good.
func (ch *CompChannel) read() error {
	ch.rn, ch.rerr = 0, nil
	err := ch.rc.Read(ch.readFn)
	if err == nil {
		err = ch.rerr
	}
	n := ch.rn
	switch {
	case err == nil && n == len(abi.Bytes(&ch.ev)):
		ch.deliver(ch.ev.CqHandle)
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		// A kick: the deadline is cleared before the caller looks at
		// what changed, so a kick after that look still ends the next
		// read.
		ch.file.SetReadDeadline(time.Time{})
		return nil
	case err == nil:
		err = fmt.Errorf("a completion event of %d bytes: %w", n, io.ErrUnexpectedEOF)
	}
	// A Close during the wait ends it with the poller's "use of closed
	// file", which is not os.ErrClosed: the channel's state says it.
	if errors.Is(err, os.ErrClosed) || ch.closing() || (errors.Is(err, unix.EIO) && ch.ctx.closed.Load()) {
		err = ErrClosed
	}
	if errors.Is(err, unix.EIO) {
		ch.ctx.deviceLost(lostRevoked) // every waiter hears of it, not only this reader's
	}
	ch.stopOnce.Do(func() {
		ch.err = err
		close(ch.stopped)
	})
	return err
}

// readEvent is the read RawConn.Read retries each time the poller says
// the file is readable: one event into ev, or EAGAIN (false: park).
func (ch *CompChannel) readEvent(fd uintptr) bool {
	for {
		ch.rn, ch.rerr = readQuick(fd, abi.Bytes(&ch.ev))
		if ch.rerr != unix.EINTR {
			return ch.rerr != unix.EAGAIN
		}
	}
}

// deliver hands a CQ's event to CQ.Wait, or queues the CQ for
// CompChannel.Wait.
func (ch *CompChannel) deliver(handle uint64) {
	cq := ch.ctx.cqs.load(handle)
	if cq == nil {
		return // a CQ destroyed with an event in flight
	}
	if !cq.acquire() {
		return // closing: its provider state may be gone
	}
	cq.events.Add(1)
	cq.prov.Event()
	ch.mu.Lock()
	queued := false
	if cq.waiters.Load() > 0 {
		notify(cq.wake) // a CQ.Wait owns the CQ's events
	} else {
		// The event used up the CQ's arm, whoever armed it: a CQ.Wait
		// that armed it and then found its completion by polling left
		// the event here. The next CQ.Wait must arm again.
		cq.armed.Store(false)
		if !cq.queued {
			cq.queued = true
			ch.ready = append(ch.ready, cq)
			queued = true
		}
	}
	ch.mu.Unlock()
	cq.done()
	if queued {
		notify(ch.sig)
	}
}

// watch makes the end of ctx kick the reader.
func (ch *CompChannel) watch(ctx context.Context) {
	done := ctx.Done()
	ch.watchMu.Lock()
	defer ch.watchMu.Unlock()
	if done == ch.watchDone {
		return
	}
	if ch.watchStop != nil {
		ch.watchStop()
	}
	ch.watchDone, ch.watchStop = done, context.AfterFunc(ctx, ch.kickFn)
}

// unwatch drops the registration with the last watched ctx.
func (ch *CompChannel) unwatch() {
	ch.watchMu.Lock()
	defer ch.watchMu.Unlock()
	if ch.watchStop != nil {
		ch.watchStop()
	}
	ch.watchDone, ch.watchStop = nil, nil
}

// kick ends the reader's read at once (a read deadline in the past), so
// that it looks again at what it waits for. A kick that finds no reader
// ends the next read, which is harmless: the reader looks and reads again.
func (ch *CompChannel) kick() { ch.file.SetReadDeadline(time.Unix(1, 0)) }

// Close closes the channel and wakes its waiters. It is idempotent; close
// the CQs bound to it first (the kernel keeps the channel alive while they
// exist).
func (ch *CompChannel) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return ch.close(func() (err error) {
		if sp := ch.ctx.begin("DestroyCompChannel"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		ch.ctx.channels.remove(ch.reg)
		ch.unwatch()
		return ch.file.Close()
	})
}
