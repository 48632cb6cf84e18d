package main

import (
	"fmt"
	"sync/atomic"
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
// every wait gives up once the run has ended). The loops read the phase
// on every turn: one atomic load.
type clock struct {
	phase       atomic.Int32
	start, stop atomic.Int64 // session.now() when sampling began and ended
}

// durationUnit is what -D and -f count: seconds (tests shorten it).
var durationUnit = time.Second

// startClock starts the phases of a -D run.
func (s *session) startClock() *clock {
	k := &clock{}
	margin := time.Duration(s.c.margin) * durationUnit
	sample := time.Duration(s.c.duration)*durationUnit - 2*margin
	var step func()
	step = func() {
		switch phase(k.phase.Load()) {
		case warmingUp:
			k.start.Store(s.now())
			k.phase.Store(int32(sampling))
			time.AfterFunc(sample, step)
		case sampling:
			k.stop.Store(s.now())
			k.phase.Store(int32(coolingDown))
			if margin <= 0 {
				k.phase.Store(int32(ended))
				return
			}
			time.AfterFunc(margin, step)
		case coolingDown:
			k.phase.Store(int32(ended))
		}
	}
	if margin <= 0 {
		step()
	} else {
		time.AfterFunc(margin, step)
	}
	return k
}

func (k *clock) now() phase { return phase(k.phase.Load()) }

// window is the sampling time in the session's stamps (see now).
func (k *clock) window() int64 { return k.stop.Load() - k.start.Load() }

// more reports whether a loop whose counter stands at n goes on: until
// -n iterations, or with -D until the run ends.
func (s *session) more(n int) bool {
	if s.clock != nil {
		return s.clock.now() != ended
	}
	return n < s.c.iters
}

// over reports whether a -D run has ended.
func (s *session) over() bool { return s.clock != nil && s.clock.now() == ended }

// counting reports whether a completion now counts in a -D run's figures.
func (s *session) counting() bool { return s.clock != nil && s.clock.now() == sampling }

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
	s.posted[0], s.completed[0] = s.clock.start.Load(), s.clock.stop.Load()
	if count == 0 {
		return bwReport{size: uint64(size)}
	}
	return s.bwFigures(size, count)
}
