package model

import (
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/mmap"
)

// tornRace runs store in a loop on another goroutine while read runs for
// d, then stops the writer.
func tornRace(d time.Duration, store, read func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := 0; i < 64; i++ {
				store()
			}
		}
	}()
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 64; i++ {
			read()
		}
	}
	close(stop)
	wg.Wait()
}

// TestArmRegisterReadWhole arms two CQs of one UAR page from another
// goroutine, as two waiters of one context do, with the provider's one
// 64-bit store, while the model services the page's arm register. Every
// doorbell the model takes must name one of the two CQs: hardware takes
// the 8-byte write whole. (Read byte by byte, as it was before, the race
// build tore the register, and the model reported doorbells for CQ 768 or
// CQ 0 that no provider wrote: issue 11's stress.)
func TestArmRegisterReadWhole(t *testing.T) {
	mem, err := mmap.Anonymous(mmap.PageSize())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	p := &uarPage{mem: mem}
	d := &Device{cqs: map[uint32]*mcq{}}
	// CQ numbers that differ in two bytes: a torn read names neither.
	a, b := &mcq{cqn: 0x0000ff, uar: p}, &mcq{cqn: 0x00ff00, uar: p}
	d.cqs[a.cqn], d.cqs[b.cqn] = a, b
	reg := mem.Pointer(uarCQArm)
	flip := false
	tornRace(300*time.Millisecond, func() {
		c := a
		if flip = !flip; flip {
			c = b
		}
		doorbell.Store64BE(reg, uint64(c.armSN&3)<<60|uint64(c.cqn))
	}, func() { d.serviceArmRegister(p) })
	if len(d.violations) > 0 {
		t.Fatalf("%d violations, first: %s", len(d.violations), d.violations[0])
	}
	if d.stats.Arms == 0 {
		t.Fatal("the model took no doorbell")
	}
}

// TestConsumerIndexReadWhole moves a CQ's consumer index back and forth
// across a byte boundary (0xff, 0x100) with the provider's one 32-bit
// store while the device writes CQEs at producer index 0x100: the CQ is
// never overrun. (Read byte by byte, the race build saw 0x1ff, a consumer
// index 255 ahead of the producer, and reported an overrun of 16777215
// CQEs: issue 11's "CQ 587 overrun".)
func TestConsumerIndexReadWhole(t *testing.T) {
	const log = 4
	n := 1 << log
	mem, err := mmap.Anonymous(n*cqe64 + 64)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	b := mem.Bytes()
	c := &mcq{cqn: 1, log: log, cqeSize: cqe64, buf: b[:n*cqe64], db: b[n*cqe64 : n*cqe64+8]}
	d := &Device{cqs: map[uint32]*mcq{1: c}}
	ci := mem.Pointer(n*cqe64 + dbRecSetCI)
	doorbell.Store32BE(ci, 0x100)
	flip := false
	tornRace(time.Second, func() {
		v := uint32(0xff)
		if flip = !flip; flip {
			v = 0x100
		}
		doorbell.Store32BE(ci, v)
	}, func() {
		c.pi, c.overflow = 0x100, false
		var e [cqe64]byte
		d.writeCQE(c, &e)
	})
	if len(d.violations) > 0 {
		t.Fatalf("%d violations, first: %s", len(d.violations), d.violations[0])
	}
	if d.stats.CQEs == 0 {
		t.Fatal("the model wrote no CQE")
	}
}
