package rsocket_test

import (
	"io"
	"sort"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// TestRigAllocs: Write and Read of a connected pair allocate nothing, at
// sizes that fit in one send and that take several (credit updates, send
// completions, a parked waiter).
func TestRigAllocs(t *testing.T) {
	rigtest.Require(t)
	client, server := pair(t, paths[0], rsocket.Config{})
	for _, size := range []int{1, 64, 4096, 65536} {
		w, r := pattern(size, 3), make([]byte, size)
		round := func() {
			if _, err := client.Write(w); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(server, r); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 200; i++ { // warm up: the CQ's waiter and event plumbing
			round()
		}
		if n := testing.AllocsPerRun(200, round); n != 0 {
			t.Errorf("size %d: %v allocations per Write+Read, want 0", size, n)
		}
	}
}

// TestRigSpin measures the round trip of 64 bytes (ping-pong between two
// goroutines) with waiters parking at once and with them polling first
// for 10 µs and 50 µs (rsocket.c polls ~10 µs), and logs the medians. It
// checks that every round trip completes and echoes what was sent; which
// setting is faster it only reports: that depends on the machine (under TCG a parked goroutine costs a futex and a poller
// wake-up, a spin a vCPU).
func TestRigSpin(t *testing.T) {
	rigtest.Require(t)
	client, server := pair(t, paths[0], rsocket.Config{})
	defer rsocket.SetSpin(rsocket.SetSpin(0))
	go func() {
		b := make([]byte, 64)
		for {
			if _, err := io.ReadFull(server, b); err != nil {
				return
			}
			if _, err := server.Write(b); err != nil {
				return
			}
		}
	}()
	b := make([]byte, 64)
	const rounds = 300
	for _, spin := range []time.Duration{0, 10 * time.Microsecond, 50 * time.Microsecond, 0} {
		rsocket.SetSpin(spin)
		d := make([]time.Duration, rounds)
		for i := range d {
			b[0], b[63] = byte(i), byte(i>>8)
			start := time.Now()
			if _, err := client.Write(b); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(client, b); err != nil {
				t.Fatal(err)
			}
			d[i] = time.Since(start)
			if b[0] != byte(i) || b[63] != byte(i>>8) {
				t.Fatalf("spin %v, round %d: the echo is not what was sent", spin, i)
			}
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("spin %v: round trip of 64 B: median %v, p90 %v (%d rounds)", spin, d[rounds/2], d[rounds*9/10], rounds)
	}
}
