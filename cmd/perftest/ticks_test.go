package main

import (
	"testing"
	"time"
)

// TestTicksToNs: stamps in ticks convert into the nanoseconds the
// monotonic clock measured over the same span.
func TestTicksToNs(t *testing.T) {
	s := &session{base: time.Now(), baseTicks: ticks()}
	a := s.now()
	time.Sleep(20 * time.Millisecond)
	b := s.now()
	if b <= a {
		t.Fatalf("stamps %d then %d: not increasing", a, b)
	}
	v := []int64{a, b}
	s.toNs(v)
	if d := time.Duration(v[1] - v[0]); d < 15*time.Millisecond || d > 5*time.Second {
		t.Fatalf("20 ms sleep measured as %v (%d ticks, %.4f ns a tick)", d, b-a, s.nsPerTick())
	}
	// A session made without ticks (the report tests) keeps nanoseconds.
	n := &session{base: time.Now()}
	w := []int64{1000, 3000}
	n.toNs(w)
	if w[0] != 1000 || w[1] != 3000 || n.nsPerTick() != 1 {
		t.Fatalf("a session without ticks converted its stamps: %v", w)
	}
}
