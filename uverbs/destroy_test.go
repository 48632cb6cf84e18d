package uverbs

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLifetime: Close waits for the verbs in flight, refuses new ones, a
// failed destroy leaves the object usable, the destroy runs once, and
// closed() wakes waiters only when the object is closed for good.
func TestLifetime(t *testing.T) {
	var l lifetime
	if err := l.use("V", "dev"); err != nil {
		t.Fatal(err)
	}
	destroys := 0
	closed := make(chan error, 1)
	go func() {
		closed <- l.close(func() error { destroys++; return nil })
	}()
	// The close waits for the reference; new verbs are refused meanwhile.
	for l.acquire() {
		l.done()
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a verb in flight", err)
	case <-l.closed():
		t.Fatal("closed() fired before the destroy")
	case <-time.After(20 * time.Millisecond):
	}
	if l.isClosed() {
		t.Error("isClosed while the close waits")
	}
	l.done()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	<-l.closed()
	err := l.use("Verb", "dev")
	var oe *OpError
	if !errors.Is(err, ErrClosed) || !errors.As(err, &oe) || oe.Verb != "Verb" {
		t.Errorf("use after Close = %v", err)
	}
	if err := l.close(func() error { destroys++; return nil }); err != nil || destroys != 1 {
		t.Errorf("second Close = %v, %d destroys", err, destroys)
	}

	// A failed destroy (EBUSY) leaves the object open and usable.
	var m lifetime
	if err := m.close(func() error { return unix.EBUSY }); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Close = %v", err)
	}
	if m.isClosed() || m.use("V", "dev") != nil {
		t.Fatal("object not usable after a failed Close")
	}
	m.done()
	select {
	case <-m.closed():
		t.Fatal("closed() fired after a failed Close")
	default:
	}
}

// TestLifetimeRace: goroutines taking and dropping references while Close
// runs (a failed destroy first, then one that succeeds). The destroy never
// runs with a reference held, Close returns only after it, and once it has
// every acquire is refused.
func TestLifetimeRace(t *testing.T) {
	for round := 0; round < 100; round++ {
		lifetimeRaceRound(t)
	}
}

// lifetimeRaceRound is one round of TestLifetimeRace; its goroutines are
// stopped before it returns, a failed check included.
func lifetimeRaceRound(t *testing.T) {
	var l lifetime
	var held atomic.Int32
	var destroyed atomic.Bool
	var taken atomic.Int64 // references taken so far
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !l.acquire() {
					continue
				}
				held.Add(1)
				taken.Add(1)
				if destroyed.Load() {
					t.Error("a reference was taken after the destroy")
				}
				held.Add(-1)
				l.done()
			}
		}()
	}
	destroy := func(err error) func() error {
		return func() error {
			if n := held.Load(); n != 0 {
				t.Errorf("destroy ran with %d references held", n)
			}
			if err == nil {
				destroyed.Store(true)
			}
			return err
		}
	}
	// Close once the goroutines are taking references, so that it meets
	// them (without the race detector's slowdown they may not have begun).
	for taken.Load() < 20 {
		runtime.Gosched()
	}
	if err := l.close(destroy(unix.EBUSY)); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Close = %v", err)
	}
	if err := l.close(destroy(nil)); err != nil || !destroyed.Load() || !l.isClosed() {
		t.Fatalf("Close = %v, destroyed %v", err, destroyed.Load())
	}
	if l.acquire() {
		t.Fatal("acquire after Close succeeded")
	}
	<-l.closed()
}
