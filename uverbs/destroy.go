package uverbs

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/abi"
)

// lifetime is the one owner of a kernel object's life, shared by every
// object type: its closed state, a count of the verbs in flight that carry
// its handle to the kernel, and its single destroy.
//
// A verb takes a reference (use) before the handle goes into a command and
// drops it (done) after the command returns; once Close has begun, use
// fails with ErrClosed, so a closed object's handle never reaches the
// kernel again (the kernel gives the lowest free handle to the next object,
// so a stale handle would name a live one). Close waits for the verbs in
// flight, then destroys. A destroy that fails (EBUSY while in use) leaves
// the object open and usable, so the caller can release what holds it and
// retry; verbs that ran concurrently with that failed Close may have failed
// with ErrClosed. Once destroyed, Close returns nil every time.
//
// References do not block: a verb may take references on several objects,
// or twice on one, and Close never waits on a goroutine parked in a Wait
// (waiters hold no reference while parked; they select on closed()).
//
// A reference is one atomic add on word (and one to drop it): verbs on a
// live object take no lock. The mutex guards only what Close and waiters
// share (the channels).
type lifetime struct {
	closeMu sync.Mutex // one Close at a time

	// word counts the references in flight (the low bits) and has
	// lifeClosing set from the moment Close begins: until the object is
	// destroyed, or until a failed destroy reopens it.
	word atomic.Uint64
	gone atomic.Bool // closed for good, for the fast path's check
	// fast counts fast-path calls in flight that reach the kernel with the
	// object's handle (rxe's PostSend doorbell is a POST_SEND command
	// naming the QP); fastClosing is set while Close runs.
	fast atomic.Uint64

	mu      sync.Mutex
	drained chan struct{} // made by a Close that waits for references
	dead    chan struct{} // closed once the object is closed for good
}

const (
	lifeClosing = 1 << 63
	fastClosing = 1 << 63
)

// fastAcquire takes a fast-path reference: false once Close has begun.
func (l *lifetime) fastAcquire() bool {
	if l.fast.Add(1)&fastClosing != 0 {
		l.fast.Add(^uint64(0))
		return false
	}
	return true
}

// fastRelease drops a fast-path reference.
func (l *lifetime) fastRelease() { l.fast.Add(^uint64(0)) }

// use takes a reference for one verb, or returns ErrClosed (as an *OpError
// naming verb) if the object is closed or closing. A nil error must be
// paired with done.
func (l *lifetime) use(verb, dev string) error {
	if l.word.Add(1)&lifeClosing == 0 { // acquire, inlined: use inlines too
		return nil
	}
	return l.refuseUse(verb, dev)
}

// refuseUse is use's way out once Close has begun (see refuse).
//
//go:noinline
func (l *lifetime) refuseUse(verb, dev string) error {
	l.done()
	return &OpError{Verb: verb, Device: dev, Err: ErrClosed}
}

// acquire is use without the error: false if the object is closed or
// closing. A true result must be paired with done.
func (l *lifetime) acquire() bool {
	if l.word.Add(1)&lifeClosing == 0 {
		return true
	}
	return l.refuse()
}

// refuse is acquire's way out once Close has begun, out of line so that
// acquire inlines: the count went up, and a Close may be waiting on it.
//
//go:noinline
func (l *lifetime) refuse() bool {
	l.done()
	return false
}

// done drops a reference taken by use.
func (l *lifetime) done() {
	if l.word.Add(^uint64(0)) == lifeClosing {
		l.drain()
	}
}

// drain tells a Close waiting for references that the count reached
// zero. It may run more than once for one Close (a refused acquire
// counts up and down again): the channel holds one token, and Close
// reads the count again after each.
func (l *lifetime) drain() {
	l.mu.Lock()
	ch := l.drained
	l.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close runs destroy once successfully, after the verbs in flight have
// returned; later calls return nil.
func (l *lifetime) close(destroy func() error) error {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.gone.Load() {
		return nil
	}
	if l.word.Or(lifeClosing)&^lifeClosing != 0 {
		// Verbs in flight: wait for the last to leave. The channel is made
		// after the flag is set, so a done that finds none ran before this
		// reads the count again below.
		l.mu.Lock()
		if l.drained == nil {
			l.drained = make(chan struct{}, 1)
		}
		ch := l.drained
		l.mu.Unlock()
		for l.word.Load()&^lifeClosing != 0 {
			<-ch
		}
	}
	// New fast-path calls are refused from here on, and the destroy waits
	// for those in flight: the kernel refuses to destroy an object a
	// command is using (EBUSY), and a doorbell after the destroy would
	// name a freed handle, or the next object's.
	l.fast.Or(fastClosing)
	for l.fast.Load()&^fastClosing != 0 {
		time.Sleep(10 * time.Microsecond)
	}
	if err := destroy(); err != nil {
		l.fast.And(^uint64(fastClosing))
		l.word.And(^uint64(lifeClosing))
		return err
	}
	l.mu.Lock() // closed() reads gone under it to decide who closes dead
	l.gone.Store(true)
	// Only a waiter's closed() made the channel; without one, closed()
	// makes it already closed later: most objects never need one.
	if l.dead != nil {
		close(l.dead)
	}
	l.mu.Unlock()
	return nil
}

// isClosed reports whether the object is closed for good (a Close under
// way may still fail and leave it open).
func (l *lifetime) isClosed() bool { return l.gone.Load() }

// closing reports whether a Close is under way or done.
func (l *lifetime) closing() bool { return l.word.Load()&lifeClosing != 0 }

// closed returns a channel that is closed once the object is closed for
// good: waiters select on it.
func (l *lifetime) closed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead == nil {
		l.dead = make(chan struct{})
		if l.gone.Load() {
			close(l.dead)
		}
	}
	return l.dead
}

// destroyObject destroys a kernel object by its ioctl DESTROY method (the
// method's handle attribute is id 0 for every object), with the legacy
// write command as fallback. resp, if not empty, receives the destroy
// response (event counts) through attribute respAttr or the write response.
// If the context is closed, the kernel destroyed the object with it: that
// is success, so Close after Context.Close returns nil. write.Quick makes
// the ioctl form quick too (abi.Ioctl.Quick).
func (c *Context) destroyObject(verb string, object, method uint16, handle uint32, respAttr uint16, resp []byte, write *abi.Command) error {
	if !c.teardown.Load() {
		attrs := [1]abi.FlatAttr{{ID: 0, Data: uint64(handle)}}
		if done, err := c.flatIoctl(verb, object, method, write.Quick, attrs[:], respAttr, resp); done {
			// A response not written leaves resp as the builder's path
			// does; a context closed meanwhile destroyed the object.
			if errors.Is(err, abi.ErrNoOutput) || errors.Is(err, ErrClosed) && c.closed.Load() {
				return nil
			}
			return err
		}
	}
	s := destroyShape{method, respAttr, len(resp), write.Quick}
	var b *abi.Ioctl
	var p *abi.Prepared
	if int(object) < len(c.destroys) {
		if k := abi.Keep(&c.destroys[object], s, object, method); k.Shape.same(s) {
			p = k.P
			b = p.Take()
		}
	}
	if b == nil {
		b = abi.NewIoctl(object, method)
		s.Build(b)
	}
	b.SetUint64(0, uint64(handle))
	out := abi.Attr(-1)
	if len(resp) > 0 {
		out = 1
	}
	err := c.destroyWith(verb, b, out, resp, write)
	p.Done(b) // without a defer, as abi's invokeIoctl; a nil p releases b
	return err
}

// destroyWith runs destroyObject's call b (its response, if any, in
// attribute out), or write where the kernel has no ioctl method.
func (c *Context) destroyWith(verb string, b *abi.Ioctl, out abi.Attr, resp []byte, write *abi.Command) error {
	if c.teardown.Load() {
		// Context.Close destroys what is left before it frees the
		// objects' memory: straight to the file, which is still open.
		err := c.file.Ioctl(b)
		if abi.IsNoIoctl(err) {
			_, err = c.file.Invoke(write)
			copy(resp, write.Out)
		} else {
			copy(resp, b.Output(out))
		}
		return err
	}
	tr, err := c.ioctl(verb, b, func() error {
		err := c.fallback(verb, write)
		copy(resp, write.Out)
		return err
	})
	if tr == abi.TransportIoctl {
		copy(resp, b.Output(out))
	}
	if err != nil && errors.Is(err, ErrClosed) && c.closed.Load() {
		return nil
	}
	return err
}

// destroyShape is what a destroy call's attributes depend on (besides
// its object, which numbers Context.destroys).
type destroyShape struct {
	method   uint16
	respAttr uint16
	respLen  int
	quick    bool
}

// same is s == o, field by field (the compiler's == of a struct with
// padding is a call: see abi's invokeShape.same).
func (s destroyShape) same(o destroyShape) bool {
	return s.method == o.method && s.respAttr == o.respAttr && s.respLen == o.respLen && s.quick == o.quick
}

// Build adds the handle (attribute 0, set per call) and the response
// (attribute 1, if any).
func (s destroyShape) Build(b *abi.Ioctl) {
	if s.quick { // the caller's judgement covers both forms
		b.Quick()
	}
	b.Handle(0, 0)
	if s.respLen > 0 {
		b.PtrOutLen(s.respAttr, s.respLen)
	}
}
