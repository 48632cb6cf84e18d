package uverbs

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/goverbs/goverbs/abi"
)

// CompChannel is a completion channel: the file on which the kernel
// reports completion events of the CQs bound to it. It is non-blocking and
// registered with Go's runtime poller, so a goroutine waiting for an event
// parks without holding an OS thread (the epoll pattern of rdma-core's
// users, done by the Go runtime).
//
// Events are read by one dispatcher goroutine per channel, started by the
// first waiter; it wakes the CQ the event is for (CQ.Wait) and queues the CQ
// for CompChannel.Wait. Both may be used, from any number of goroutines.
type CompChannel struct {
	ctx  *Context
	file *os.File

	start sync.Once
	mu    sync.Mutex
	ready []*CQ         // CQs with an event not yet returned by Wait
	sig   chan struct{} // capacity 1: "ready changed"
	err   error         // why the dispatcher stopped
	done  chan struct{} // closed when the dispatcher stops

	destroyer
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
	return &CompChannel{ctx: c, file: asyncFile(int(resp.Fd)), sig: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// Fd is the channel's file descriptor, for programs that poll it
// themselves; do not read or close it while using Wait.
func (ch *CompChannel) Fd() int { return int(ch.file.Fd()) }

// Wait returns the next CQ that had a completion event, waiting until one
// comes or ctx is done. The event is acknowledged; arm the CQ again
// (ReqNotify) before polling it empty, or use CQ.Wait, which does it all.
func (ch *CompChannel) Wait(ctx context.Context) (*CQ, error) {
	ch.start.Do(func() { go ch.dispatch() })
	for {
		ch.mu.Lock()
		if len(ch.ready) > 0 {
			cq := ch.ready[0]
			ch.ready = ch.ready[1:]
			cq.queued = false
			ch.mu.Unlock()
			return cq, nil
		}
		ch.mu.Unlock()
		select {
		case <-ch.sig:
		case <-ch.done:
			return nil, opError("CompChannel.Wait", ch.ctx.dev.Name, abi.TransportNone, ch.err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dispatch reads completion events until the channel is closed. Reading
// parks the goroutine on the runtime poller between events.
func (ch *CompChannel) dispatch() {
	var ev abi.IbUverbsCompEventDesc
	buf := abi.Bytes(&ev)
	for {
		if _, err := io.ReadFull(ch.file, buf); err != nil {
			if errors.Is(err, os.ErrClosed) {
				err = ErrClosed
			}
			ch.err = err
			close(ch.done)
			return
		}
		v, ok := ch.ctx.cqs.Load(ev.CqHandle)
		if !ok {
			continue // a CQ destroyed with an event in flight
		}
		cq := v.(*CQ)
		cq.events.Add(1)
		cq.prov.Event()
		select {
		case cq.wake <- struct{}{}:
		default: // a wake-up is already pending; it covers this event
		}
		ch.mu.Lock()
		if !cq.queued {
			cq.queued = true
			ch.ready = append(ch.ready, cq)
		}
		ch.mu.Unlock()
		select {
		case ch.sig <- struct{}{}:
		default:
		}
	}
}

// Close closes the channel. It is idempotent; close the CQs bound to it
// first (the kernel keeps the channel alive while they exist).
func (ch *CompChannel) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return ch.close(func() (err error) {
		sp := ch.ctx.begin("DestroyCompChannel")
		defer func() { sp.end(err) }()
		return ch.file.Close()
	})
}
