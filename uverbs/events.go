package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// EventType is an async event's kind (enum ibv_event_type, the kernel's
// enum ib_event_type).
type EventType uint32

// Async event types.
const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPKeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
	EventWQFatal          EventType = 19
)

// eventNames are libibverbs' ibv_event_type_str texts.
var eventNames = [...]string{
	"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
	"local access violation work queue error", "communication established", "send queue drained",
	"path migrated", "path migration request error", "local catastrophic error", "port active",
	"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
	"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change", "WQ fatal",
}

// String is libibverbs' ibv_event_type_str text ("port active", …), or
// "unknown event N".
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("unknown event %d", uint32(t))
}

// AsyncEvent is one asynchronous event: which kind, and the object or port
// it is about (the others are nil or zero).
type AsyncEvent struct {
	Type EventType
	CQ   *CQ
	QP   *QP
	SRQ  *SRQ
	Port int
	// Element is the raw element the kernel sent (an object's user handle
	// or a port number).
	Element uint64
}

// asyncEvents is the context's async event reader: one goroutine, parked
// on the runtime poller, feeding a channel.
type asyncEvents struct {
	start sync.Once
	ch    chan AsyncEvent
	done  chan struct{}
	err   error
}

// NextAsyncEvent returns the next async event, waiting until one comes or
// ctx is done. Events are typed: port events carry Port, object events the
// *CQ, *QP or *SRQ they are about. It may be called from any number of
// goroutines; each event goes to one of them. Events not yet read stay
// queued (in the reader's channel, then in the kernel) until the Context
// closes. Close wakes every caller, which then returns an error for which
// errors.Is(err, ErrClosed) holds, as does every call after Close.
//
// When the device is removed, every caller waiting then gets an
// EventDeviceFatal event (from the kernel, or made by goverbs for drivers
// whose removal is silent: rxe, siw; see devwatch.go), or, if none was
// waiting, the first caller after; later calls return an error wrapping
// ENODEV. Close the Context then: the device's removal waits for it.
func (c *Context) NextAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	if c.closed.Load() {
		return AsyncEvent{}, &OpError{Verb: "NextAsyncEvent", Device: c.dev.Name, Err: ErrClosed}
	}
	c.watchDevice()
	a := &c.events
	a.start.Do(func() {
		a.ch = make(chan AsyncEvent, 64)
		a.done = make(chan struct{})
		f := c.asyncEventFile()
		if f == nil { // Close got there first
			a.err = ErrClosed
			close(a.done)
			return
		}
		go c.readAsyncEvents(f)
	})
	// A caller waiting when the device goes gets the event; one that comes
	// after the loss was seen, or after a fatal event was handed out (the
	// kernel's can come before the device watch sees the node go), is a
	// later caller.
	parked := !c.lost.Load() && !c.fatalSent.Load()
	for {
		var ev AsyncEvent
		select {
		case ev = <-a.ch:
		case <-a.done:
			select {
			case ev = <-a.ch:
			default:
				if c.lost.Load() { // the reader ended as the device went
					return c.lostEvent(parked)
				}
				return AsyncEvent{}, opError("NextAsyncEvent", c.dev.Name, abi.TransportNone, a.err)
			}
		case <-c.dead:
			return AsyncEvent{}, &OpError{Verb: "NextAsyncEvent", Device: c.dev.Name, Err: ErrClosed}
		case <-c.lostCh:
			select {
			case ev = <-a.ch: // what the kernel said before comes first
			default:
				return c.lostEvent(parked)
			}
		case <-ctx.Done():
			return AsyncEvent{}, ctx.Err()
		}
		if ev.Type == EventDeviceFatal && c.fatalSent.Swap(true) && !parked {
			// The kernel's, read after a waiter was handed the one
			// goverbs made (the device watch saw the node go first): a
			// later caller gets ENODEV, as the doc says.
			continue
		}
		return ev, nil
	}
}

// lostEvent is NextAsyncEvent's answer once the device is gone: the
// EventDeviceFatal goverbs makes, unless one was handed out already (the
// kernel's or ours: fatalSent) and the caller was not waiting when the
// device went.
func (c *Context) lostEvent(parked bool) (AsyncEvent, error) {
	if c.fatalSent.Swap(true) && !parked {
		return AsyncEvent{}, c.lostError("NextAsyncEvent")
	}
	return AsyncEvent{Type: EventDeviceFatal}, nil
}

func (c *Context) readAsyncEvents(f *os.File) {
	a := &c.events
	var desc abi.IbUverbsAsyncEventDesc
	buf := abi.Bytes(&desc)
	for {
		if _, err := io.ReadFull(f, buf); err != nil {
			if errors.Is(err, os.ErrClosed) || (errors.Is(err, unix.EIO) && c.closed.Load()) {
				err = ErrClosed
			} else if errors.Is(err, unix.EIO) {
				// A driver with disassociate_ucontext (rxe on 7.3,
				// mlx5): the kernel's DEVICE_FATAL came, then EIO (the
				// queue of a live file is closed only when the kernel
				// revokes the context), maybe before the device watch
				// saw the node go.
				c.deviceLost(lostRevoked)
			}
			a.err = err
			close(a.done)
			return
		}
		if EventType(desc.EventType) == EventDeviceFatal {
			// The device is gone: the provider's fast path fails from
			// now on (and stops writing doorbells) before the program
			// hears of it.
			if l, ok := c.prov.(provider.DeviceLoser); ok {
				l.DeviceLost()
			}
		}
		select {
		case a.ch <- c.decodeEvent(desc):
		case <-c.dead: // nobody reads any more: never block past Close
			a.err = ErrClosed
			close(a.done)
			return
		}
	}
}

// decodeEvent resolves an event's element to the object it names.
func (c *Context) decodeEvent(d abi.IbUverbsAsyncEventDesc) AsyncEvent {
	ev := AsyncEvent{Type: EventType(d.EventType), Element: d.Element}
	switch ev.Type {
	case EventCQErr:
		ev.CQ = c.cqs.load(d.Element)
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained, EventPathMig,
		EventPathMigErr, EventQPLastWQEReached:
		ev.QP = c.qps.load(d.Element)
	case EventSRQErr, EventSRQLimitReached:
		ev.SRQ = c.srqs.load(d.Element)
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		ev.Port = int(d.Element)
	}
	return ev
}
