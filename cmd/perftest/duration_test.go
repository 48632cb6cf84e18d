package main

import (
	"strings"
	"testing"
	"time"
)

// TestClockPhases: a -D run steps through perftest's states in order, the
// sampling window is at least duration-2*margin long, and with no margin
// sampling starts at once.
func TestClockPhases(t *testing.T) {
	defer func(u time.Duration) { durationUnit = u }(durationUnit)
	durationUnit = 20 * time.Millisecond
	s := &session{base: time.Now(), c: config{duration: 5, margin: 1}}
	s.clock = s.startClock()
	if got := s.phaseNow(); got != warmingUp {
		t.Fatalf("phase right after the start: %d; want warming up", got)
	}
	last := warmingUp
	deadline := time.Now().Add(10 * time.Second)
	for last != ended {
		p := s.phaseNow()
		if p < last {
			t.Fatalf("phase went back from %d to %d", last, p)
		}
		last = p
		if time.Now().After(deadline) {
			t.Fatalf("no end after 10 s (phase %d)", p)
		}
		time.Sleep(time.Millisecond)
	}
	if w := time.Duration(s.clock.window()); w < 3*durationUnit {
		t.Errorf("sampling window %v; want at least (5-2*1) units = %v", w, 3*durationUnit)
	}
	if !s.over() || s.counting() || !(s.more(0) == false) {
		t.Errorf("after the end: over %v counting %v more %v; want true, false, false", s.over(), s.counting(), s.more(0))
	}

	s = &session{base: time.Now(), c: config{duration: 3, margin: 0}}
	s.clock = s.startClock()
	if !s.counting() {
		t.Errorf("margin 0: phase %d right after the start; want sampling", s.phaseNow())
	}
}

// TestClockStamps: the phases change at the stamps startClock fixed, to
// the stamp, whatever the scheduler does: each look reads the counter (a
// timer would step them only when this program's one P reschedules).
func TestClockStamps(t *testing.T) {
	k := (&session{base: time.Now(), c: config{duration: 7, margin: 2}}).startClock()
	unit := int64(durationUnit) // tests' stamps are nanoseconds
	if k.stop-k.start != 3*unit || k.end-k.stop != 2*unit || k.window() != 3*unit {
		t.Fatalf("stamps %+v: want sampling 3 units (7-2*2) then a 2-unit cool-down", *k)
	}
	for _, c := range []struct {
		at   int64
		want phase
	}{
		{k.start - 2*unit, warmingUp}, {k.start - 1, warmingUp}, {k.start, sampling},
		{k.stop - 1, sampling}, {k.stop, coolingDown}, {k.end - 1, coolingDown}, {k.end, ended}, {k.end + unit, ended},
	} {
		if got := k.at(c.at); got != c.want {
			t.Errorf("phase at start%+d: %d, want %d", c.at-k.start, got, c.want)
		}
	}
}

// TestDurationReport: a -D latency line has perftest's four columns, and
// the figures follow from the window and the count.
func TestDurationReport(t *testing.T) {
	var out strings.Builder
	s := &session{out: &out, clock: &clock{}, c: config{duration: 5, noPeak: true}}
	s.clock.start, s.clock.stop = 1_000_000, 3_000_000 // 2 ms
	s.printLatDuration(64, 2, 100)
	// 2000 us / 2 / 100 = 10 us; 100 / 0.002 s = 50000 tps.
	want := " 64            100            10.00          50000.00\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	r := s.durationFigures(1024, 2000)
	// 2000 messages of 1 KiB in 2 ms: 976.5625 MiB/s, 1 Mpps.
	if r.iters != 2000 || r.peak != 0 || r.avg < 976.5 || r.avg > 976.6 || r.msgRateMpps < 0.999 || r.msgRateMpps > 1.001 {
		t.Errorf("durationFigures: %+v; want 2000 iterations, no peak, 976.56 MB/s, 1 Mpps", r)
	}
}

// TestBWPeakUnstampedSlots: with cq_mod 100 only every hundredth
// completion is stamped; the unstamped slots (0 among them, which seeds
// perftest's search) must not win the peak, as in perftest, whose
// cycles_t is unsigned. The peak is then the best window: 300 messages
// posted 10 ns apart, each stamped completion 50 ns after its own post,
// is 10 ns a message over the whole run (integer division, as perftest).
func TestBWPeakUnstampedSlots(t *testing.T) {
	s := &session{c: config{cqMod: 100, postList: 1}}
	s.stamps(300)
	for i := range s.posted {
		s.posted[i] = 1000 + 10*int64(i)
	}
	for _, j := range []int{99, 199, 299} {
		s.completed[j] = s.posted[j] + 50
	}
	r := s.bwFigures(64, 300)
	// 64 bytes every 10 ns: 6.4e9 B/s over perftest's MiB.
	want := 64 * 1e9 / (10 * 1048576.0)
	if r.peak != want {
		t.Errorf("peak %.2f MB/s, want %.2f (10 ns a message)", r.peak, want)
	}
	// The average: 300 messages from the first post to the last stamp.
	avg := 64 * 300 * 1e9 / (float64(s.completed[299]-s.posted[0]) * 1048576.0)
	if r.avg != avg {
		t.Errorf("average %.2f MB/s, want %.2f", r.avg, avg)
	}
}
