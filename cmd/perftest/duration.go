package main

import (
	"fmt"
	"time"
)

// phase is where a -D run is: perftest's duration states, which its
// SIGALRM handler (catch_alarm) steps through.
type phase int32

const (
	warmingUp   phase = iota // START_STATE: the first margin, not counted
	sampling                 // SAMPLE_STATE: completions counted
	coolingDown              // STOP_SAMPLE_STATE: the last margin, not counted
	ended                    // END_STATE: the loops stop
)

// clock runs a -D test: margin seconds of warm-up, duration-2*margin of
// sampling and margin of cool-down, each side by its own clock as in
// perftest (the two sides start within one handshake of each other, and
// every wait gives up once the run has ended). The phases follow from the
// session's stamps (see session.now): startClock fixes the stamps at which
// sampling starts, sampling stops and the run ends, and every look at the
// phase reads the stamp counter, which costs no syscall.
//
// perftest steps its phases from SIGALRM, which arrives on time. A Go
// timer would not: this program runs on one P (main.go), whose timers
// fire only when the spinning loop is preempted (10 ms or more late each)
// and never while it is inside a raw syscall (the doorbell). On 5.10 a
// send_bw client whose phases ran late posted on after perftest's server
// had ended and stopped reposting receives; rxe there retries an RNR NAK
// without waiting its timer, in the doorbell's write(), so that write
// never returned and the guest reported a soft lockup.
type clock struct {
	start, stop, end int64 // stamps: sampling starts, sampling stops, the run ends
}

// durationUnit is what -D and -f count: seconds (tests shorten it).
var durationUnit = time.Second

// startClock starts the phases of a -D run now.
func (s *session) startClock() *clock {
	perUnit := float64(durationUnit) / s.nsPerTick() // stamps a unit
	margin := int64(float64(s.c.margin) * perUnit)
	total := int64(float64(s.c.duration) * perUnit)
	t := s.now()
	return &clock{start: t + margin, stop: t + total - margin, end: t + total}
}

// at is the phase at stamp t.
func (k *clock) at(t int64) phase {
	switch {
	case t >= k.end:
		return ended
	case t >= k.stop:
		return coolingDown
	case t >= k.start:
		return sampling
	}
	return warmingUp
}

// phaseNow is where the -D run is now.
func (s *session) phaseNow() phase { return s.clock.at(s.now()) }

// window is the sampling time in the session's stamps (see now).
func (k *clock) window() int64 { return k.stop - k.start }

// more reports whether a loop whose counter stands at n goes on: until
// -n iterations, or with -D until the run ends.
func (s *session) more(n int) bool {
	if s.clock != nil {
		return s.phaseNow() != ended
	}
	return n < s.c.iters
}

// over reports whether a -D run has ended.
func (s *session) over() bool { return s.clock != nil && s.phaseNow() == ended }

// counting reports whether a completion now counts in a -D run's figures.
func (s *session) counting() bool { return s.clock != nil && s.phaseNow() == sampling }

// printLatDuration is print_report_lat_duration: the sampling window over
// the iterations counted in it (halved for round trips), and transactions
// per second.
func (s *session) printLatDuration(size, rtt, count int) {
	usec := float64(s.clock.window()) * s.nsPerTick() / 1000
	lat, tps := 0.0, 0.0
	if count > 0 && usec > 0 {
		lat = usec / float64(rtt) / float64(count)
		tps = float64(count) / (usec / 1e6)
	}
	fmt.Fprintf(s.out, " %-7d       %d            %-7.2f        %-7.2f\n", size, count, lat, tps)
}

// durationFigures is print_report_bw for a -D run: the completions
// counted over the sampling window (no peak).
func (s *session) durationFigures(size, count int) bwReport {
	s.stamps(1)
	s.posted[0], s.completed[0] = s.clock.start, s.clock.stop
	if count == 0 {
		return bwReport{size: uint64(size)}
	}
	return s.bwFigures(size, count)
}
