package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rdmacm"
)

// holderBecomes waits until the channel's reader token is held by want.
func holderBecomes(t *testing.T, ch *rdmacm.EventChannel, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rdmacm.TokenHolder(ch) != want {
		if time.Now().After(deadline) {
			t.Fatalf("the reader token is held by %q after 10s, want %q", rdmacm.TokenHolder(ch), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// resolveOnce creates an ID on ch, resolves an address and a route to dst
// and closes the ID.
func resolveOnce(ctx context.Context, ch *rdmacm.EventChannel, dst netip.AddrPort) error {
	id, err := ch.CreateID(rdmacm.PSTCP)
	if err != nil {
		return err
	}
	defer id.Close()
	if err := id.ResolveAddr(ctx, netip.AddrPort{}, dst); err != nil {
		return err
	}
	return id.ResolveRoute(ctx)
}

// TestRigWaitersShareReader: calls that wait for events read the channel
// themselves (EventChannel's reader token) and hand each other's events
// on; the channel's goroutine reads again once nobody waits.
func TestRigWaitersShareReader(t *testing.T) {
	rigtest.Require(t)
	ctx := rigCtx(t, 60*time.Second)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() }) // after pair's cleanups: connections first
	dst := netip.AddrPortFrom(addrRXE0, 7471)
	holderBecomes(t, ch, "channel")

	// A wait with nothing to come holds the token: it reads the events of
	// other IDs' resolutions and wakes their waits.
	idle, err := ch.CreateID(rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	idleDone := make(chan error, 1)
	go func() {
		_, err := idle.NextEvent(ctx)
		idleDone <- err
	}()
	holderBecomes(t, ch, "waiter")
	for i := range 5 {
		if err := resolveOnce(ctx, ch, dst); err != nil {
			t.Fatalf("resolution %d beside a waiting NextEvent: %v", i, err)
		}
	}
	// Between two reads the waiter holds no token for a moment: "none"
	// now and then is the hand-over, not the channel's goroutine.
	holderBecomes(t, ch, "waiter")
	// Close wakes the wait that holds the token, parked in its read.
	start := time.Now()
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-idleDone:
		if !errors.Is(err, rdmacm.ErrClosed) {
			t.Errorf("NextEvent after its ID's Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("NextEvent still waits 5s after its ID's Close")
	}
	t.Logf("NextEvent returned %v after Close", time.Since(start))
	holderBecomes(t, ch, "channel")

	// The end of ctx wakes a wait that holds the token.
	idle2, err := ch.CreateID(rdmacm.PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer idle2.Close()
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := idle2.NextEvent(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("NextEvent cancelled after 100ms: %v, want context.Canceled", err)
	}
	holderBecomes(t, ch, "channel")

	// Waits one after another, each joining as the channel's goroutine
	// takes the token back: a read of the channel's goroutine that began
	// after a waiter took its token over would sit in the file's read
	// lock, and the next waiter's event would wake nobody.
	for i := range 200 {
		if err := resolveOnce(ctx, ch, dst); err != nil {
			t.Fatalf("resolution %d of 200 in a row: %v", i, err)
		}
	}

	// Many waits at once on one channel, each for its own IDs' events.
	const workers, rounds = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := resolveOnce(ctx, ch, dst); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent resolutions: %v", err)
	}
	holderBecomes(t, ch, "channel")

	// With no call waiting, the channel's goroutine takes DISCONNECTED in:
	// the accepted side's Done closes when the dialer disconnects.
	cfg := &rdmacm.Config{Channel: ch}
	client, server := pair(t, ctx, netip.Addr{}, addrRXE0, cfg)
	holderBecomes(t, ch, "channel")
	if err := client.Disconnect(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-server.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no DISCONNECTED reached the server in 10s with no call waiting")
	}
}
