package uverbs

import (
	"errors"
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
