package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// CompChannel is a completion channel: the file on which the kernel
// reports completion events of the CQs bound to it. It is non-blocking and
// registered with Go's runtime poller, so a goroutine waiting for an event
// parks without holding an OS thread (the epoll pattern of rdma-core's
// users, done by the Go runtime).
//
// Events are read by one dispatcher goroutine per channel, started by the
// first waiter. Each event goes to exactly one consumer: to CQ.Wait if a
// goroutine is in CQ.Wait on the event's CQ, else to CompChannel.Wait,
// which returns each CQ with pending events once (a CQ already queued is
// not queued twice). A CQ.Wait that starts takes over its CQ's queued
// event, so CompChannel.Wait never returns a CQ whose event CQ.Wait
// consumed. Both Waits may be used from any number of goroutines.
//
// Close (of the channel or of its Context) wakes every goroutine parked
// in CompChannel.Wait and in CQ.Wait on the channel's CQs: they return an
// error for which errors.Is(err, ErrClosed) holds, as does every Wait
// after it. Closed CQs are never returned.
type CompChannel struct {
	ctx  *Context
	file *os.File
	fd   int // the descriptor number, read once through SyscallConn

	start   sync.Once
	mu      sync.Mutex
	ready   []*CQ         // CQs with an event not yet returned by Wait
	sig     chan struct{} // capacity 1: "ready changed"
	err     error         // why the dispatcher stopped
	stopped chan struct{} // closed when the dispatcher stops

	lifetime
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL, a
// write-only command: one syscall).
func (c *Context) CreateCompChannel() (_ *CompChannel, err error) {
	sp := c.begin("CreateCompChannel")
	defer func() { sp.end(err) }()
	var req abi.IbUverbsCreateCompChannel
	var resp abi.IbUverbsCreateCompChannelResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, In: abi.Bytes(&req), Out: abi.Bytes(&resp)}
	if err := c.invoke("CreateCompChannel", &cmd); err != nil {
		return nil, err
	}
	ch := &CompChannel{ctx: c, file: asyncFile(int(resp.Fd)), fd: int(resp.Fd), sig: make(chan struct{}, 1), stopped: make(chan struct{})}
	c.channels.Store(ch, struct{}{})
	if c.closed.Load() { // Context.Close ran meanwhile: it may have missed ch
		ch.Close()
		return nil, &OpError{Verb: "CreateCompChannel", Device: c.dev.Name, Err: ErrClosed}
	}
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
func (ch *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	ch.ctx.watchDevice()
	ch.start.Do(func() { go ch.dispatch() })
	for {
		if err := ch.waitClosed(); err != nil {
			return nil, err
		}
		ch.mu.Lock()
		for len(ch.ready) > 0 {
			cq := ch.ready[0]
			ch.ready = ch.ready[1:]
			cq.queued = false
			if !cq.isClosed() {
				ch.mu.Unlock()
				return cq, nil
			}
		}
		ch.mu.Unlock()
		select {
		case <-ch.sig:
		case <-ch.closed():
		case <-ch.ctx.dead:
		case <-ch.ctx.lostCh:
			return nil, ch.ctx.lostError("CompChannel.Wait")
		case <-ch.stopped:
			if err := ch.waitClosed(); err != nil {
				return nil, err
			}
			return nil, opError("CompChannel.Wait", ch.ctx.dev.Name, abi.TransportNone, ch.err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
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

// dispatch reads completion events until the channel is closed. Reading
// parks the goroutine on the runtime poller between events.
func (ch *CompChannel) dispatch() {
	var ev abi.IbUverbsCompEventDesc
	buf := abi.Bytes(&ev)
	for {
		if _, err := io.ReadFull(ch.file, buf); err != nil {
			if errors.Is(err, os.ErrClosed) || (errors.Is(err, unix.EIO) && ch.ctx.closed.Load()) {
				err = ErrClosed
			}
			ch.err = err
			close(ch.stopped)
			return
		}
		v, ok := ch.ctx.cqs.Load(ev.CqHandle)
		if !ok {
			continue // a CQ destroyed with an event in flight
		}
		cq := v.(*CQ)
		if !cq.acquire() {
			continue // closing: its provider state may be gone
		}
		cq.events.Add(1)
		cq.prov.Event()
		ch.mu.Lock()
		if cq.waiters.Load() > 0 {
			// A CQ.Wait owns the CQ's events.
			select {
			case cq.wake <- struct{}{}:
			default: // a wake-up is already pending; it covers this event
			}
		} else if !cq.queued {
			cq.queued = true
			ch.ready = append(ch.ready, cq)
		}
		ch.mu.Unlock()
		cq.done()
		select {
		case ch.sig <- struct{}{}:
		default:
		}
	}
}

// Close closes the channel and wakes its waiters. It is idempotent; close
// the CQs bound to it first (the kernel keeps the channel alive while they
// exist).
func (ch *CompChannel) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return ch.close(func() (err error) {
		sp := ch.ctx.begin("DestroyCompChannel")
		defer func() { sp.end(err) }()
		ch.ctx.channels.Delete(ch)
		return ch.file.Close()
	})
}
