package rsocket

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadline is one direction's deadline: a channel closed when it passes or
// when the connection closes. A timer (not a goroutine) closes the channel.
//
// As in net.Pipe, the channel stays the same while the deadline has not
// passed, so a call blocked on it sees a later SetDeadline: moving the
// deadline into the past closes it at once, moving it later re-arms the
// timer. A deadline that passed and is moved gets a new channel.
type deadline struct {
	mu     sync.Mutex
	when   time.Time
	timer  *time.Timer
	ch     chan struct{}
	ctx    *deadlineCtx // ch's context (see context)
	shut   bool         // the connection closed: ch stays closed
	broke  bool         // the connection broke: ch stays closed, the time still counts
	expire func()
	// armed is !shut && !when.IsZero(), written under mu: expired, called
	// by every Read and Write, answers without the lock when no deadline
	// is set (the lock, its defer and the test cost a 64 B round trip
	// ~120 instructions of ~3,500).
	armed atomic.Bool
}

func (d *deadline) init() {
	d.newChannel()
	d.expire = func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.when.IsZero() && !time.Now().Before(d.when) {
			closeOnce(d.ch)
		}
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// set moves the deadline (zero: none).
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shut {
		return
	}
	if d.broke {
		d.when = t // expired() still tells a timeout
		d.armed.Store(!t.IsZero())
		return
	}
	if d.timer != nil {
		// A timer that already fired runs expire after this (it takes
		// d.mu) and finds the new deadline.
		d.timer.Stop()
	}
	d.when = t
	d.armed.Store(!t.IsZero())
	select {
	case <-d.ch:
		d.newChannel() // expired: a fresh channel for the new deadline
	default:
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.ch)
		return
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(dur, d.expire)
	} else {
		d.timer.Reset(dur)
	}
}

// newChannel gives the deadline a new open channel, and its context.
// mu held (or the deadline not shared yet).
func (d *deadline) newChannel() {
	d.ch = make(chan struct{})
	d.ctx = &deadlineCtx{d: d, ch: d.ch}
}

// context is the context.Context a blocked call hands to CQ.Wait (waiting
// on it costs no allocation and no goroutine): done until the deadline's
// channel closes, that is, while the deadline has not passed, the
// connection has not broken and has not closed.
func (d *deadline) context() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx
}

// done is the channel closed when the deadline passes or the connection
// closes.
func (d *deadline) done() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

// expired reports whether the deadline has passed (not: closed).
func (d *deadline) expired() bool { return d.armed.Load() && d.passed() }

// passed is expired's look at an armed deadline (apart, so that expired
// inlines: every Read and Write asks).
func (d *deadline) passed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.shut && !d.when.IsZero() && !time.Now().Before(d.when)
}

// interrupt closes the channel for good without a deadline having passed:
// the CM reported the connection down, and a waiter parked in CQ.Wait must
// wake and look (it may have nothing left to complete: the flushes came
// before the event). expired still reports the deadline only.
func (d *deadline) interrupt() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.broke = true
	if d.timer != nil {
		d.timer.Stop()
	}
	closeOnce(d.ch)
}

// shutdown closes the channel for good: Close wakes every waiter.
func (d *deadline) shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shut = true
	d.armed.Store(false)
	if d.timer != nil {
		d.timer.Stop()
	}
	closeOnce(d.ch)
}

// deadlineCtx is one channel of a deadline as a context.Context. Its Err
// is non-nil exactly when its own channel is closed, as the Context
// contract asks, even once the deadline has a newer channel: context's own
// functions (WithTimeout, AfterFunc) panic on a Done closed while Err says
// nil ("missing cancel error"), which the deadline itself, answering for
// its current channel, could do after a SetDeadline.
type deadlineCtx struct {
	d  *deadline
	ch chan struct{}
}

var _ context.Context = (*deadlineCtx)(nil)

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.d.when, !c.d.when.IsZero()
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.ch }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.ch:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *deadlineCtx) Value(any) any { return nil }
