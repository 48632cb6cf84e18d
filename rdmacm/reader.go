package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"time"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// Who reads the rdma_cm file.
//
// One goroutine at a time reads events (GET_EVENT) and hands each to the
// sink its uid names: the holder of the reader's token. While nobody
// waits for an event, the channel's own goroutine (reader) holds it, so
// that DISCONNECTED, DEVICE_REMOVAL and connection requests are taken in
// and acted on (the QP flushed, Done closed) with no call waiting. A call
// that waits for an event (ResolveAddr, Connect, Accept, NextEvent, ...)
// joins: the channel's goroutine is kicked out of its read (a read
// deadline in the past) and steps aside until no call waits, and a waiter
// takes the token over at once (its read waits on the file's read lock
// for the kicked one to end) and reads the file itself. Its own event
// then wakes it straight from the runtime poller, as a thread blocked in
// librdmacm's rdma_get_cm_event is woken by the kernel, instead of waking
// the channel's goroutine, which would wake the waiter. Events for other
// IDs are dispatched by whichever goroutine reads them, under the file's
// read lock so that they keep the kernel's order, and their waiters
// woken; a waiter without the token waits for its own wake-up or for the
// token to come free. CQ.Wait's waiters read their completion channel the
// same way (package uverbs).
//
// The rules that keep a wake-up from being lost, all under ch.mu:
//   - the token is free and someone waits (want > 0): free has a wake-up
//     pending, or a waiter is about to look (part and giveBack send it);
//   - the token is free and nobody waits: resume has a wake-up pending,
//     or the channel's goroutine is about to look;
//   - a kick (Close of an ID, the end of a waiter's ctx, a migrated ID's
//     event read on its former channel) ends the holder's read; only the
//     holder clears the deadline, and a waiter looks at what it waits for
//     after it took the token (and after every read), so a kick after
//     that look ends the next read instead.

// initReader prepares the GET_EVENT command the token's holder writes.
func (ch *EventChannel) initReader() {
	ch.resp = make([]byte, 336)
	var req abi.RdmaUcmGetEvent
	req.Response = addrOf(ch.resp)
	ch.hdr = make([]byte, 8+8)
	binary.NativeEndian.PutUint32(ch.hdr[0:], abi.RDMA_USER_CM_CMD_GET_EVENT)
	binary.NativeEndian.PutUint16(ch.hdr[4:], 8)
	binary.NativeEndian.PutUint16(ch.hdr[6:], uint16(len(ch.resp)))
	copy(ch.hdr[8:], abi.Bytes(&req))
	ch.free = make(chan struct{}, 1)
	ch.resume = make(chan struct{}, 1)
}

// reader is the channel's goroutine: it reads events whenever no call
// waits for one, until the channel stops.
func (ch *EventChannel) reader() {
	for {
		ch.mu.Lock()
		for ch.err == nil && (ch.reading || ch.want > 0) {
			ch.mu.Unlock()
			select {
			case <-ch.resume:
			case <-ch.done:
			}
			ch.mu.Lock()
		}
		if ch.err != nil {
			ch.mu.Unlock()
			return
		}
		ch.reading, ch.bgReading = true, true
		ch.mu.Unlock()
		stopped := ch.readEvent(true)
		ch.mu.Lock()
		waiting := false
		if ch.bgReading { // else a waiter took the token over (await)
			ch.reading, ch.bgReading = false, false
			waiting = ch.want > 0
		}
		ch.mu.Unlock()
		if waiting {
			notify(ch.free)
		}
		if stopped {
			return
		}
	}
}

// readEvent reads one event and dispatches it, parked on the runtime
// poller until one comes or a kick ends the read. It reports whether the
// channel stopped (the file was closed or failed): ch.stop has run. bg
// says the channel's goroutine reads (a waiter may take its token over).
//
// GET_EVENT is a write() and the file only ever reports EPOLLIN, so the
// write is made from RawConn.Read's callback, which retries it each time
// the poller says the file is readable.
func (ch *EventChannel) readEvent(bg bool) bool {
	var werr error
	stolen := false
	err := ch.rc.Read(func(fd uintptr) bool {
		if bg && ch.tokenTaken() {
			// A waiter took the token over before this read got the
			// file's read lock: the read is the waiter's now.
			stolen = true
			return true
		}
		_, werr = rawWrite(fd, ch.hdr, ch.resp)
		if werr == nil {
			// Dispatched under the file's read lock, so that events are
			// handed on in the kernel's order whoever reads them.
			if ev, derr := decodeEvent(ch.resp, ch.isUD); derr == nil { // it cannot fail: the kernel wrote a whole event
				ch.dispatch(ev)
			}
		}
		return werr != unix.EAGAIN
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Only the token's holder clears the deadline, and it looks at
		// what it waits for afterwards. The channel's goroutine whose
		// token a waiter took over leaves it: the kick may be the
		// waiter's, come after its look.
		ch.mu.Lock()
		if ch.reading && (bg == ch.bgReading) {
			ch.file.SetReadDeadline(time.Time{}) //nolint:errcheck // fails only once closed: the next read says so
		}
		ch.mu.Unlock()
		return false
	case err == nil && stolen:
		return false
	case err == nil && werr == unix.EINTR:
		return false
	case err == nil && werr == nil:
		return false
	}
	if err == nil {
		err = werr
	}
	if errors.Is(err, os.ErrClosed) {
		err = ErrClosed
	}
	ch.stop(err)
	return true
}

// tokenTaken reports whether a waiter took the token over from the
// channel's goroutine.
func (ch *EventChannel) tokenTaken() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return !ch.bgReading
}

// kick ends the token holder's read at once (a read deadline in the
// past), so that it looks again at what it waits for. A kick that finds
// no read ends the next one, which is harmless: its reader looks and
// reads again.
func (ch *EventChannel) kick() {
	ch.file.SetReadDeadline(time.Unix(1, 0)) //nolint:errcheck // a closed file has no reader to kick
}

// join counts the caller as waiting for an event until the function it
// returns is called: the channel's goroutine gives the token up, and
// the end of ctx kicks the holder's read. A caller may join before it
// sends the command whose event it will wait for, so that the hand-over
// overlaps the kernel's work; joining twice is harmless.
func (ch *EventChannel) join(ctx context.Context) (part func()) {
	ch.mu.Lock()
	ch.want++
	kick := ch.bgReading
	ch.mu.Unlock()
	if kick {
		ch.kick()
	}
	unwatch := func() bool { return false }
	if ctx.Done() != nil {
		unwatch = context.AfterFunc(ctx, ch.kick)
	}
	return func() {
		unwatch()
		ch.mu.Lock()
		ch.want--
		free, waiting := !ch.reading, ch.want > 0
		ch.mu.Unlock()
		switch {
		case free && waiting:
			notify(ch.free) // pass on a wake-up this waiter may have taken
		case free:
			notify(ch.resume)
		}
	}
}

// await waits, for a caller that joined, until something it waits for
// may have changed: it reads and dispatches one event if it can take the
// token, or else waits for its own wake-ups (sig, broken, closed: nil
// channels are never ready) or for the token to come free. It returns
// ctx's error once ctx is done and nil otherwise: the caller looks again
// at what it waits for.
func (ch *EventChannel) await(ctx context.Context, sig, broken, closed <-chan struct{}) error {
	ch.mu.Lock()
	free := false
	switch {
	case ch.err != nil:
	case !ch.reading:
		ch.reading, free = true, true
	case ch.bgReading:
		// The channel's goroutine holds the token and was kicked when
		// the caller joined: take the token over. Its read ends at once
		// and ours waits for that on the file's read lock.
		ch.bgReading, free = false, true
	}
	stopped := ch.err != nil
	ch.mu.Unlock()
	if !free {
		token := ch.free
		if stopped {
			token = nil // the channel's stop closes its IDs' closed
		}
		select {
		case <-token:
		case <-sig:
		case <-broken:
		case <-closed:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	// A look after taking the token: a kick that came after the caller
	// looked may have been cleared by the token's former holder.
	select {
	case <-sig:
	case <-broken:
	case <-closed:
	case <-ctx.Done():
		ch.giveBack()
		return ctx.Err()
	default:
		ch.readEvent(false)
	}
	ch.giveBack()
	return nil
}

// giveBack gives back the token a waiter took in await.
func (ch *EventChannel) giveBack() {
	ch.mu.Lock()
	ch.reading = false
	others := ch.want > 1
	ch.mu.Unlock()
	if others {
		notify(ch.free)
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
