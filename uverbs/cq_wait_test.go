package uverbs

import (
	"testing"
	"time"
)

// TestWaitSpinBudget walks the adaptive spin's decisions: a first timed
// spin to learn what a poll costs, the whole cap while there is no
// history, twice the recent waits after, no spin once waits outlast the
// cap, and back to spinning when they shorten.
func TestWaitSpinBudget(t *testing.T) {
	s := newWaitSpin(100 * time.Microsecond)
	if n, timed := s.budget(); n != -1 || !timed {
		t.Fatalf("first budget: %d, timed %v; want a timed spin (-1, true)", n, timed)
	}
	s.calibrate(1000, 10_000) // 10 ns a poll: the cap is 10000 polls
	if got := s.capPolls(); got != 10_000 {
		t.Fatalf("cap: %d polls, want 10000", got)
	}
	if n, timed := s.budget(); n != 10_000 || timed {
		t.Fatalf("budget with no history: %d, timed %v; want the cap (10000, false)", n, timed)
	}
	s.learn(1000, false)
	if n, _ := s.budget(); n != 2000 {
		t.Fatalf("budget after a wait of 1000 polls: %d, want 2000", n)
	}
	s.learn(10, false) // parked: a quarter of the way
	if n, _ := s.budget(); n != 2*(1000+(10-1000)/4) {
		t.Fatalf("budget after waits of 1000 and 10 polls: %d, want %d", n, 2*(1000+(10-1000)/4))
	}
	s.learn(10, true) // spun: half of the way
	if want := int64(1000+(10-1000)/4+10) / 2; s.avg != want {
		t.Fatalf("average after a spun wait of 10 polls: %d, want %d", s.avg, want)
	}
	for range 3 {
		s.learn(1, true)
	}
	if n, _ := s.budget(); n != 2*s.avg || n < spinChunk {
		t.Fatalf("budget %d: want twice the average %d, at least a chunk", n, s.avg)
	}
	s.avg = 1
	if n, _ := s.budget(); n != spinChunk {
		t.Fatalf("budget for waits of 1 poll: %d, want one chunk (%d)", n, spinChunk)
	}
	// Long waits (a parked wait of 1 s): clamped to twice the cap, and the
	// spinning stops while the average stays above the cap.
	for range 8 {
		s.learn(100_000_000, false)
	}
	if s.avg > 2*s.capPolls() {
		t.Fatalf("average %d after long waits: want at most twice the cap (%d)", s.avg, 2*s.capPolls())
	}
	// Long waits: park at once, except for a probe (a whole spin) on one
	// wait in spinProbeEvery.
	parks, probes := 0, 0
	for range 2 * spinProbeEvery {
		switch n, _ := s.budget(); n {
		case 0:
			parks++
		case s.capPolls():
			probes++
		default:
			t.Fatalf("budget %d after long waits: want 0 or the cap", n)
		}
	}
	if probes != 2 || parks != 2*spinProbeEvery-2 {
		t.Fatalf("after long waits: %d parks and %d probes in %d waits; want 2 probes", parks, probes, 2*spinProbeEvery)
	}
	// A probe that finds a completion soon brings the spinning back
	// within a few waits.
	k := 0
	for ; k < 10; k++ {
		if s.avg <= s.capPolls() {
			break
		}
		s.learn(500, true)
	}
	if k == 0 || k >= 10 {
		t.Fatalf("spinning came back after %d short spun waits; want after a few", k)
	}
	if n, _ := s.budget(); n != min(2*s.avg, s.capPolls()) {
		t.Fatalf("budget %d after short waits: want twice the average (%d), at most the cap", n, s.avg)
	}
	// Every spinCalibrateEvery-th spinning wait is timed again.
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
	}
	if d := newWaitSpin(0); d.capNs != int64(DefaultWaitSpin) {
		t.Fatalf("default cap %d ns, want %d", d.capNs, DefaultWaitSpin)
	}
}
