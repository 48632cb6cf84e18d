package uverbs

import (
	"testing"
	"time"
)

// TestWaitSpinBudget walks the spin's decisions: a first timed spin to
// learn what a poll costs, then the cap in polls on every wait; after
// spinGiveUp waits in a row that parked, a spin on one wait in
// spinProbeEvery only; every wait spins again once a spin finds a
// completion; and every spinCalibrateEvery-th spin is timed again.
func TestWaitSpinBudget(t *testing.T) {
	s := newWaitSpin(100 * time.Microsecond)
	if n, timed := s.budget(); n != -1 || !timed {
		t.Fatalf("first budget: %d, timed %v; want a timed spin (-1, true)", n, timed)
	}
	s.calibrate(10, 10_000) // too short a spin to time a poll
	if s.pollPs != 0 {
		t.Fatalf("a spin of 10 polls calibrated a poll at %d ps", s.pollPs)
	}
	s.calibrate(1000, 10_000) // 10 ns a poll: the cap is 10000 polls
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
	s := newWaitSpin(-1)
	for range 3 {
		if n, timed := s.budget(); n != 0 || timed {
			t.Fatalf("budget with spinning off: %d, timed %v", n, timed)
		}
		s.parked()
	}
	if s.parks != 0 {
		t.Fatalf("parks counted with spinning off: %d", s.parks)
	}
	if d := newWaitSpin(0); d.capNs != int64(defaultWaitSpin) {
		t.Fatalf("default cap %d ns, want %d", d.capNs, defaultWaitSpin)
	}
}

// TestWaitSpinCalibrationBounded: one timed spin that was interrupted
// (its polls look 1000x dearer) at most halves the cap in polls, and a
// normal spin after it brings the cap back.
func TestWaitSpinCalibrationBounded(t *testing.T) {
	s := newWaitSpin(100 * time.Microsecond)
	s.calibrate(1000, 10_000) // 10 ns a poll: the cap is 10000 polls
	s.calibrate(1000, 10_000_000)
	if got := s.capPolls(); got != 5000 {
		t.Fatalf("cap after an interrupted calibration: %d polls, want 5000 (a poll at most twice as dear)", got)
	}
	s.calibrate(1000, 10_000)
	if got := s.capPolls(); got != 10_000 {
		t.Fatalf("cap after a normal calibration: %d polls, want 10000", got)
	}
	s.calibrate(1000, 15_000) // polls really dearer: followed, within the bound
	if got := s.capPolls(); got != 6666 {
		t.Fatalf("cap after a 1.5x dearer calibration: %d polls, want 6666", got)
	}
}
