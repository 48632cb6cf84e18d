package uverbs

import (
	"slices"
	"testing"
	"time"
)

// TestWaitSpinBudget walks the spin's decisions: timed spins until one
// sees two clock intervals and learns what a poll costs, then the cap in polls on every wait; after
// spinGiveUp waits in a row that parked, a spin on one wait in
// spinProbeEvery only; every wait spins again once a spin finds a
// completion; and every spinCalibrateEvery-th spin is timed again.
func TestWaitSpinBudget(t *testing.T) {
	s := newWaitSpin(100*time.Microsecond, 0)
	if n, timed := s.budget(); n != -1 || !timed {
		t.Fatalf("first budget: %d, timed %v; want a timed spin (-1, true)", n, timed)
	}
	s.calibrate(10, 10_000, 2) // too short a spin to time a poll
	if s.pollPs != 0 {
		t.Fatalf("a spin of 10 polls calibrated a poll at %d ps", s.pollPs)
	}
	s.calibrate(1000, 10_000, 1) // the least of one interval: maybe descheduled
	if s.pollPs != 0 {
		t.Fatalf("a spin of one clock interval calibrated a poll at %d ps", s.pollPs)
	}
	if n, timed := s.budget(); n != -1 || !timed {
		t.Fatalf("budget after a spin too short to calibrate: %d, timed %v; want a timed spin again", n, timed)
	}
	s.calibrate(1000, 10_000, 2) // 10 ns a poll: the cap is 10000 polls
	if got := s.capPolls(); got != 10_000 {
		t.Fatalf("cap: %d polls, want 10000", got)
	}
	for i := range spinGiveUp {
		if n, timed := s.budget(); n != 10_000 || timed {
			t.Fatalf("budget of wait %d (%d parked before): %d, timed %v; want the cap (10000, false)", i, s.parks, n, timed)
		}
		s.parked()
	}
	spins := 0
	for range 4 * spinProbeEvery {
		switch n, _ := s.budget(); n {
		case 0:
		case spinProbeLength * s.capPolls():
			spins++
		default:
			t.Fatalf("budget %d after %d parked waits: want 0 or a probe of %d caps", n, s.parks, spinProbeLength)
		}
		s.parked()
	}
	if spins != 4 {
		t.Fatalf("%d spins in %d waits after giving up; want a probe in %d (4)", spins, 4*spinProbeEvery, spinProbeEvery)
	}
	s.found()
	for range 3 {
		if n, _ := s.budget(); n != s.capPolls() {
			t.Fatalf("budget %d after a spin found a completion: want the cap", n)
		}
	}
	timedSeen := false
	for range spinCalibrateEvery {
		if _, timed := s.budget(); timed {
			timedSeen = true
		}
	}
	if !timedSeen {
		t.Fatalf("no timed spin in %d waits", spinCalibrateEvery)
	}
}

// TestWaitSpinOff: a negative WaitSpin never spins; 0 is the default.
func TestWaitSpinOff(t *testing.T) {
	s := newWaitSpin(-1, 0)
	for range 3 {
		if n, timed := s.budget(); n != 0 || timed {
			t.Fatalf("budget with spinning off: %d, timed %v", n, timed)
		}
		s.parked()
	}
	if s.parks != 0 {
		t.Fatalf("parks counted with spinning off: %d", s.parks)
	}
	if d := newWaitSpin(0, 0); d.capNs != int64(defaultWaitSpin) {
		t.Fatalf("default cap %d ns, want %d", d.capNs, defaultWaitSpin)
	}
}

// TestWaitSpinCalibrationBounded: one timed spin that was interrupted
// (its polls look 1000x dearer) at most halves the cap in polls, and a
// normal spin after it brings the cap back.
func TestWaitSpinCalibrationBounded(t *testing.T) {
	s := newWaitSpin(100*time.Microsecond, 0)
	s.calibrate(1000, 10_000, 2) // 10 ns a poll: the cap is 10000 polls
	s.calibrate(1000, 10_000_000, 2)
	if got := s.capPolls(); got != 5000 {
		t.Fatalf("cap after an interrupted calibration: %d polls, want 5000 (a poll at most twice as dear)", got)
	}
	s.calibrate(1000, 10_000, 2)
	if got := s.capPolls(); got != 10_000 {
		t.Fatalf("cap after a normal calibration: %d polls, want 10000", got)
	}
	s.calibrate(1000, 15_000, 2) // polls really dearer: followed, within the bound
	if got := s.capPolls(); got != 6666 {
		t.Fatalf("cap after a 1.5x dearer calibration: %d polls, want 6666", got)
	}
}

// TestWaitSpinGrowth: with a growth limit the cap rises at once to 1.5
// times a wait that ended within the limit, sinks slowly on shorter
// waits and faster on waits beyond the limit, never leaves
// [WaitSpin, limit], and a wait within the limit ends a run of parks.
func TestWaitSpinGrowth(t *testing.T) {
	const ms = int64(time.Millisecond)
	s := newWaitSpin(time.Millisecond, 16*time.Millisecond)
	if !s.grows() {
		t.Fatal("a 16 ms limit over a 1 ms cap: no growth")
	}
	s.parks = spinGiveUp
	s.observe(3 * ms)
	if s.capNs != 4500_000 || s.parks != 0 {
		t.Fatalf("after a 3 ms wait: cap %d ns, parks %d; want 4500000 and 0", s.capNs, s.parks)
	}
	s.observe(10_000) // a short wait: the cap sinks by 1/32 of the way to WaitSpin
	if want := 4500_000 - (4500_000-ms)/spinShrinkDen; s.capNs != want {
		t.Fatalf("after a 10 us wait: cap %d ns, want %d", s.capNs, want)
	}
	s.observe(12 * ms) // 18 ms asked: the limit
	if s.capNs != 16*ms {
		t.Fatalf("after a 12 ms wait: cap %d ns, want the limit %d", s.capNs, 16*ms)
	}
	s.parks = 3
	s.observe(40 * ms) // beyond the limit: a quarter of the height goes
	if want := 16*ms - 15*ms/spinShrinkLongDen; s.capNs != want || s.parks != 3 {
		t.Fatalf("after a 40 ms wait: cap %d ns, parks %d; want %d and 3", s.capNs, s.parks, want)
	}
	for range 1000 {
		s.observe(100 * ms)
	}
	if s.capNs < ms || s.capNs > ms+ms/100 {
		t.Fatalf("after 1000 waits beyond the limit: cap %d ns, want about WaitSpin (%d)", s.capNs, ms)
	}
	s.pollPs = 10_000
	if got := s.spent(1000); got != 10_000 {
		t.Fatalf("1000 polls at 10 ns: %d ns", got)
	}

	fixed := newWaitSpin(time.Millisecond, time.Millisecond/2)
	fixed.parks = 5
	fixed.observe(ms / 2)
	if fixed.grows() || fixed.capNs != ms || fixed.parks != 5 {
		t.Fatalf("a limit under the cap: grows %v, cap %d, parks %d; want no growth", fixed.grows(), fixed.capNs, fixed.parks)
	}
	if off := newWaitSpin(-1, 16*time.Millisecond); off.grows() {
		t.Fatal("spinning off, yet the cap grows")
	}
}

// TestWaitSpinYields: the spin yields once per spinKernelChunks chunks
// until a yield takes more than spinYieldTaken times the least seen (the
// CPU went to another task); then once per chunk, and each yield that
// finds nothing to run doubles the interval back to spinKernelChunks.
func TestWaitSpinYields(t *testing.T) {
	s := newWaitSpin(time.Millisecond, 0)
	s.yielded(1000)
	s.yielded(1500) // slower, not taken: the least stays
	if s.every != spinKernelChunks || s.yieldNs != 1000 {
		t.Fatalf("after empty yields: every %d chunks, least %d ns; want %d, 1000", s.every, s.yieldNs, spinKernelChunks)
	}
	s.yielded(spinYieldTaken*1000 + 1)
	if s.every != 1 {
		t.Fatalf("after a yield that gave the CPU away: every %d chunks, want 1", s.every)
	}
	s.yielded(spinYieldTaken * 1000) // at the bound: not taken
	if s.every != 2 {
		t.Fatalf("after one empty yield: every %d chunks, want 2", s.every)
	}
	var seen []int
	for range 4 {
		s.yielded(900)
		seen = append(seen, s.every)
	}
	if want := []int{4, 8, 8, 8}; !slices.Equal(seen, want) {
		t.Fatalf("intervals as empty yields follow: %v, want %v (doubling, at most %d)", seen, want, spinKernelChunks)
	}
	if s.yieldNs != 900 {
		t.Fatalf("least yield %d ns, want 900", s.yieldNs)
	}
}
