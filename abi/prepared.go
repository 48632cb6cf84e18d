package abi

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
)

// Prepared is an ioctl call of one shape built once and made again and
// again with new input values: a query a program repeats (QUERY_GID_ENTRY,
// QUERY_PORT) keeps one per context. Take hands out its kept builder with
// the attribute array as it was built (the kernel writes output flags,
// lengths and new handles into it), so a call skips the pool, the
// attributes' checks and the arena's set-up; the caller sets the call's
// values with SetUint64 and runs it with File.Ioctl as any builder.
//
// A Prepared is safe for concurrent use: one goroutine at a time has the
// kept builder, and Take gives the others a builder from the pool built
// afresh by the same function, with the same attribute numbers.
type Prepared struct {
	object, method uint16
	build          func(*Ioctl)
	busy           atomic.Bool // the kept builder is out (Take, until Done)
	b              *Ioctl
	built          [maxIoctlAttrs]IbUverbsAttr // b's attributes before any call
}

// NewPrepared builds a call of method on object: build adds its
// attributes, exactly as it would on NewIoctl's builder (and is called
// again for every builder Take makes afresh). Inputs whose values change
// from call to call are added as Uint64In or Uint32In and set with
// SetUint64; outputs are read from the builder (PtrOutLen and Output):
// PtrOut's caller memory would outlive the call in a kept builder, so
// build must not use it (the call then fails with the builder's error).
func NewPrepared(object, method uint16, build func(*Ioctl)) *Prepared {
	b := &Ioctl{object: object, method: method, wire: newIoctlWire(), arena: kernelBuf(256)[:0], kept: true}
	build(b)
	if b.dstMask != 0 && b.err == nil {
		b.err = fmt.Errorf("abi: ioctl %d/%d: a prepared call cannot copy its outputs into caller memory (PtrOut); use PtrOutLen", object, method)
	}
	p := &Prepared{object: object, method: method, build: build, b: b}
	// Encoded once: the arena's addresses go into the attributes that
	// Take restores, so a call re-encodes nothing.
	b.encode(0)
	b.encoded = true
	p.built = b.wire.attrs
	return p
}

// Take returns a builder for one call: the kept one, its attributes as
// built, or, while another goroutine has that, a pooled builder built
// afresh. Give it back with Done once its outputs are read.
func (p *Prepared) Take() *Ioctl {
	if !p.busy.CompareAndSwap(false, true) {
		b := NewIoctl(p.object, p.method)
		p.build(b)
		return b
	}
	b := p.b
	copy(b.wire.attrs[:b.n], p.built[:b.n])
	// Outputs start zeroed, as in a fresh builder: a kernel that writes
	// less than the whole attribute leaves no byte of the last answer.
	for m := b.outMask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m)
		clear(b.arena[b.offs[i] : b.offs[i]+b.lens[i]])
	}
	b.called = false
	return b
}

// Done gives back a builder Take returned. Neither it nor any slice its
// Output returned may be used afterwards. p may be nil: b is then a
// builder of NewIoctl's, released (the caller that found no kept call of
// its shape gives back either kind the same way).
func (p *Prepared) Done(b *Ioctl) {
	if p == nil || b != p.b {
		b.Release()
		return
	}
	p.busy.Store(false)
}

// SetBytes sets the bytes of input a (added by PtrIn, Uint64In or
// Uint32In) for the next call; p must be as long as the input was. Calls
// with another length, of other kinds of attribute, or after the call,
// leave b as it is.
func (b *Ioctl) SetBytes(a Attr, p []byte) {
	if a < 0 || int(a) >= b.n || b.called || b.outMask&(1<<a) != 0 || int(b.wire.attrs[a].Len) != len(p) {
		return
	}
	if b.arenaMask&(1<<a) != 0 {
		copy(b.arena[b.offs[a]:], p)
		return
	}
	var v [8]byte
	copy(v[:], p)
	b.wire.attrs[a]._union = v
}

// ptrInZero adds an input of n zero bytes, to be set by SetBytes.
func (b *Ioctl) ptrInZero(id uint16, n int) Attr {
	if !b.checkLen(id, n) {
		return -1
	}
	if n <= 8 {
		return b.add(id, n, 0)
	}
	off := b.reserve(n)
	clear(b.arena[off : off+n])
	return b.addArena(id, n, off, false)
}

// SetUint64 sets the value of inline input a (added by Uint64In or
// Uint32In; a 4-byte input keeps its low 32 bits) or the handle or
// descriptor of a Handle or FD attribute, for the next call. Calls of
// other kinds of attribute, or after the call, leave b as it is.
func (b *Ioctl) SetUint64(a Attr, v uint64) {
	if a < 0 || int(a) >= b.n || b.called || b.arenaMask&(1<<a) != 0 {
		return
	}
	w := &b.wire.attrs[a]
	if w.Len > 0 && w.Len < 8 {
		v &= 1<<(8*uint(w.Len)) - 1
	}
	binary.NativeEndian.PutUint64(w._union[:], v)
}

// Shape is what a kept call's attributes depend on (a command's number and
// lengths, a destroy's response): comparable, and able to build the call.
type Shape interface {
	comparable
	Build(*Ioctl)
}

// Kept is a Prepared made for one shape, as a slot of its owner holds it.
// The caller uses P only for a call of the same Shape, and compares the
// two itself, where the shape's type is known (a plain struct compare).
type Kept[S Shape] struct {
	Shape S
	P     *Prepared
}

// Keep returns the Kept in slot, made on first use for shape (built by
// shape.Build). Two first uses at once may both make one; the first stored
// is kept. A call after the first allocates nothing.
func Keep[S Shape](slot *atomic.Pointer[Kept[S]], shape S, object, method uint16) *Kept[S] {
	if k := slot.Load(); k != nil {
		return k
	}
	slot.CompareAndSwap(nil, &Kept[S]{shape, NewPrepared(object, method, shape.Build)})
	return slot.Load()
}
