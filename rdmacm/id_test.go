package rdmacm

import (
	"context"
	"errors"
	"testing"
	"time"
)

// registeredID is an ID on ch, registered as CreateID leaves it (no
// kernel id: the pipe answers nothing).
func registeredID(t *testing.T, ch *EventChannel) *ID {
	t.Helper()
	id := newID(ch, PSTCP, 0)
	uid, err := ch.register(id)
	if err != nil {
		t.Fatal(err)
	}
	id.uid = uid
	return id
}

// closedNow reports whether c is closed (or ready) without waiting.
func closedNow(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestIDChannelsMadeOnDemand: an ID's channels are made by the first
// goroutine that waits on one, and an event that came before anyone asked
// is still seen: Done after the disconnect is closed, a wait that starts
// after Close fails at once, a wait that started before an event or Close
// wakes.
func TestIDChannelsMadeOnDemand(t *testing.T) {
	ch, _ := pipeChannel(t)

	t.Run("Done before and after DISCONNECTED", func(t *testing.T) {
		early, late := registeredID(t, ch), registeredID(t, ch)
		defer early.Close()
		defer late.Close()
		done := early.Done()
		if closedNow(done) {
			t.Fatal("Done is closed before any event")
		}
		for _, id := range []*ID{early, late} {
			id.deliver(Event{Type: EventDisconnected})
		}
		if !closedNow(done) || !closedNow(early.Done()) {
			t.Error("the Done taken before the event is not closed after it")
		}
		if !closedNow(late.Done()) {
			t.Error("Done asked for after the event is not closed")
		}
		if !errors.Is(late.Err(), ErrDisconnected) {
			t.Errorf("Err = %v, want ErrDisconnected", late.Err())
		}
	})

	t.Run("waiters woken by an event", func(t *testing.T) {
		id := registeredID(t, ch)
		defer id.Close()
		got := make(chan error, 2)
		go func() {
			_, err := id.wait(context.Background(), "ResolveAddr", false, EventAddrResolved)
			got <- err
		}()
		go func() {
			ev, err := id.NextEvent(context.Background())
			if err == nil && ev.Type != EventAddrChange {
				err = errors.New("NextEvent returned " + ev.Type.String())
			}
			got <- err
		}()
		time.Sleep(10 * time.Millisecond) // let both park (the test passes either way)
		id.deliver(Event{Type: EventAddrResolved})
		id.deliver(Event{Type: EventAddrChange})
		for range 2 {
			select {
			case err := <-got:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a waiter was not woken by its event")
			}
		}
	})

	t.Run("Close wakes waiters and refuses later ones", func(t *testing.T) {
		id := registeredID(t, ch)
		got := make(chan error, 3)
		go func() {
			_, err := id.wait(context.Background(), "Connect", true, EventEstablished)
			got <- err
		}()
		go func() { _, err := id.NextRequest(context.Background()); got <- err }()
		go func() { _, err := id.NextEvent(context.Background()); got <- err }()
		time.Sleep(10 * time.Millisecond)
		if err := id.Close(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			select {
			case err := <-got:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("a waiter woken by Close returned %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a waiter was not woken by Close")
			}
		}
		if !closedNow(id.closed()) {
			t.Error("closed() is not closed after Close")
		}
		if _, err := id.NextEvent(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("NextEvent after Close: %v, want ErrClosed", err)
		}
	})
}

// TestAllocsCreateClose: CreateID and Close of an ID nobody waits on
// allocate the ID alone (its channels are made on demand).
func TestAllocsCreateClose(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's sync.Pool drops items; `make unit` runs this test without -race")
	}
	ch, r := pipeChannel(t)
	buf := make([]byte, 4096)
	if n := testing.AllocsPerRun(100, func() { createClose(t, ch, r, buf) }); n != 1 {
		t.Errorf("CreateID+Close: %v allocations, want 1 (the ID)", n)
	}
}
