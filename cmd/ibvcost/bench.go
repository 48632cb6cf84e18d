package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// bench collects the rows of one run.
//
// The workload is a set of cycles (open then close a context; register
// then deregister an MR; take a QP through its states …), and it runs
// twice. The counting pass runs each cycle `counted` times with a fresh
// uverbs.Recorder, and the syscall counters (opened once for the whole
// pass), around every measured call. The timing pass runs each cycle once
// untimed (warm-up), then n times with nothing but a clock around each
// call: no perf counter, no Recorder.
//
// The counters are opened once per run, not per cycle: registering the
// syscall tracepoint patches kernel text, and under QEMU's TCG a patch
// racing with another vCPU's syscall entry can leave that vCPU on a stale
// int3 in syscall_trace_enter (seen in the rig: soft lockups of every CPU
// on 6.1, an oops and a panic on 6.12). A Go program always has other
// threads making syscalls (sysmon), so under TCG ibvcost leaves the counters
// off unless told (-perf), and test/cost registers the tracepoint first
// from a single-threaded holder, after which opening a counter patches
// nothing.
type bench struct {
	rep       *Report
	rows      map[string]*rowState
	order     []string
	floor     time.Duration
	ctr       *sysCounter // open during the counting pass
	countPass bool
	counted   int
	verbose   io.Writer // -v: each row's name as it starts
}

// rowState accumulates one row.
type rowState struct {
	row     *Row
	samples []time.Duration
	counts  [][nKinds]float64
	rec     recAcc
	err     error // the row failed: no more calls
	started bool
}

// recAcc sums the Recorder's snapshots of a row's counted calls.
type recAcc struct {
	calls, spans                int
	syscalls, mappings, in, out uint64
	transport                   map[string]int
	verbs                       []string
}

// spec describes a row before it is measured.
type spec struct {
	name string
	path string // "slow" or "fast"
	verb string // goverbs' method
	size int64
}

func newBench(rep *Report, specs []spec) *bench {
	b := &bench{rep: rep, rows: map[string]*rowState{}}
	for _, s := range specs {
		b.order = append(b.order, s.name)
		b.rows[s.name] = &rowState{row: &Row{Name: s.name, Path: s.path, Verb: s.verb, Size: s.size}}
	}
	return b
}

// epoch is the origin of now.
var epoch = time.Now()

// now reads the monotonic clock once (time.Since of a monotonic time is
// one clock_gettime(CLOCK_MONOTONIC); time.Now would add a CLOCK_REALTIME
// read): the same clock and cost as verbs_cost.c's timer.
func now() time.Duration { return time.Since(epoch) }

// measureFloor finds the cost of an empty timed region.
func (b *bench) measureFloor() {
	d := make([]time.Duration, 2001)
	for i := range d {
		t0 := now()
		d[i] = now() - t0
	}
	b.floor = quantile(d, 0.5)
	b.rep.FloorNS = int64(b.floor)
}

// phase is one iteration of a cycle: counting, warming up or timing.
type phase struct {
	b        *bench
	counting bool
	warm     bool // run, measure nothing
}

// cycle runs f: in the counting pass `counted` times, counting; in the
// timing pass once to warm up, then n times timing. It stops at f's first
// error and returns it.
func (b *bench) cycle(n int, f func(p *phase) error) error {
	if b.countPass {
		for range b.counted {
			if err := f(&phase{b: b, counting: true}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := f(&phase{b: b, warm: true}); err != nil {
		return err
	}
	for range n {
		if err := f(&phase{b: b}); err != nil {
			return err
		}
	}
	return nil
}

// do measures one call of f as row name. ctx, if set, is the context the
// Recorder is attached to while counting.
func (p *phase) do(name string, ctx *uverbs.Context, f func() error) error {
	return p.call(name, ctx, 1, func(*uverbs.Recorder) (bool, error) { return true, f() })
}

// call measures one call of f as row name; per divides the time and counts
// (f did per operations). f returns whether to keep the sample (a poll that
// found nothing is not a poll that found one). While counting, f gets the
// Recorder, for calls that create the context themselves.
func (p *phase) call(name string, ctx *uverbs.Context, per int, f func(rec *uverbs.Recorder) (bool, error)) error {
	rs := p.b.start(name)
	if rs.err != nil {
		return rs.err
	}
	if p.warm {
		if _, err := f(nil); err != nil {
			rs.err = err
			return err
		}
		return nil
	}
	if !p.counting {
		t0 := now()
		keep, err := f(nil)
		d := now() - t0
		if err != nil {
			rs.err = err
			return err
		}
		if keep {
			rs.samples = append(rs.samples, max(0, d-p.b.floor)/time.Duration(per))
		}
		return nil
	}
	rec := uverbs.NewRecorder()
	if ctx != nil {
		ctx.SetRecorder(rec)
	}
	var c0, c1 counts
	var cerr error
	if p.b.ctr != nil {
		c0, cerr = p.b.ctr.read()
	}
	keep, err := f(rec)
	if p.b.ctr != nil && cerr == nil {
		c1, cerr = p.b.ctr.read()
	}
	if ctx != nil {
		ctx.SetRecorder(nil)
	}
	if err != nil {
		rs.err = err
		return err
	}
	if cerr != nil {
		return cerr
	}
	if !keep {
		return nil
	}
	if p.b.ctr != nil {
		d := p.b.ctr.diff(c0, c1)
		for k := range d {
			d[k] /= float64(per)
		}
		rs.counts = append(rs.counts, d)
	}
	rs.rec.add(rec, per)
	return nil
}

// sample records d, timed by the caller, as one call of row name: the
// timing pass keeps it, counting and warm-up measure nothing (rows timed
// so have no counts).
func (p *phase) sample(name string, d time.Duration) error {
	rs := p.b.start(name)
	if rs.err != nil {
		return rs.err
	}
	if !p.warm && !p.counting {
		rs.samples = append(rs.samples, max(0, d-p.b.floor))
	}
	return nil
}

// fail records err as row name's failure and returns it.
func (p *phase) fail(name string, err error) error {
	rs := p.b.start(name)
	if rs.err == nil {
		rs.err = err
	}
	return err
}

// start returns row name's state, saying so with -v the first time.
func (b *bench) start(name string) *rowState {
	rs := b.rows[name]
	if rs == nil {
		panic("ibvcost: no row " + name)
	}
	if !rs.started {
		rs.started = true
		if b.verbose != nil {
			fmt.Fprintf(b.verbose, "ibvcost: %s\n", name)
		}
	}
	return rs
}

func (a *recAcc) add(rec *uverbs.Recorder, per int) {
	a.calls += per
	if a.transport == nil {
		a.transport = map[string]int{}
	}
	for _, v := range rec.Snapshot() {
		a.spans += int(v.Calls)
		a.syscalls += v.Syscalls
		a.mappings += v.Mappings
		a.in += v.BytesIn
		a.out += v.BytesOut
		for t, n := range v.ByTransport {
			if n > 0 && uverbs.CommandTransport(t) != uverbs.CommandNone {
				a.transport[uverbs.CommandTransport(t).String()] += int(n)
			}
		}
		if !slices.Contains(a.verbs, v.Verb) {
			a.verbs = append(a.verbs, v.Verb)
		}
	}
}

// skip marks a row as not measured, unless it already failed.
func (b *bench) skip(name, why string) {
	if rs := b.rows[name]; rs != nil && rs.err == nil && rs.row.Skipped == "" {
		rs.row.Skipped = why
	}
}

// skipRest marks every row not yet reached (never called, no reason) of
// path ("" for any).
func (b *bench) skipRest(path, why string) {
	for _, name := range b.order {
		rs := b.rows[name]
		if (path == "" || rs.row.Path == path) && !rs.started && rs.err == nil && rs.row.Skipped == "" {
			rs.row.Skipped = why
		}
	}
}

// finish fills the report's rows.
func (b *bench) finish() {
	b.rep.Rows = b.rep.Rows[:0]
	for _, name := range b.order {
		rs := b.rows[name]
		r := *rs.row
		if rs.err != nil && r.Skipped == "" {
			r.Skipped = rs.err.Error()
		}
		if len(rs.samples) == 0 && r.Skipped == "" {
			r.Skipped = "not measured"
		}
		if r.Skipped != "" {
			r.Transport = "-"
			b.rep.Rows = append(b.rep.Rows, r)
			continue
		}
		r.N = len(rs.samples)
		r.MedianNS = int64(quantile(rs.samples, 0.5))
		r.P99NS = int64(quantile(rs.samples, 0.99))
		r.MinNS = int64(quantile(rs.samples, 0))
		var sum time.Duration
		for _, d := range rs.samples {
			sum += d
		}
		r.MeanNS = int64(sum) / int64(len(rs.samples))
		if strings.HasPrefix(r.Name, "msg_rate") && sum > 0 {
			r.PerSecond = float64(len(rs.samples)) * 1e9 / float64(sum)
		}
		if len(rs.counts) > 0 {
			var s Syscalls
			col := func(k int) float64 {
				v := make([]float64, len(rs.counts))
				for i, c := range rs.counts {
					v[i] = c[k]
				}
				return quantileF(v, 0.5)
			}
			s.Total, s.Ioctl, s.Write, s.Mmap, s.Runtime = col(kindAll), col(kindIoctl), col(kindWrite), col(kindMmap), col(kindRuntime)
			r.Syscalls = &s
			r.Transport = transportOf(s.Ioctl, s.Write)
		}
		if a := rs.rec; a.calls > 0 {
			rc := &RecorderCost{
				Verbs:     a.verbs,
				Calls:     float64(a.spans) / float64(a.calls),
				Syscalls:  float64(a.syscalls) / float64(a.calls),
				Mappings:  float64(a.mappings) / float64(a.calls),
				BytesIn:   float64(a.in) / float64(a.calls),
				BytesOut:  float64(a.out) / float64(a.calls),
				Transport: "none",
			}
			best := 0
			for t, n := range a.transport {
				if n > best || n == best && t < rc.Transport {
					best, rc.Transport = n, t
				}
			}
			sort.Strings(rc.Verbs)
			r.Recorder = rc
			if r.Syscalls == nil {
				r.Transport = rc.Transport
			}
		}
		if r.Transport == "" {
			r.Transport = "-"
		}
		b.rep.Rows = append(b.rep.Rows, r)
	}
}

// transportOf names how a call's syscalls went, from its ioctl and write
// counts.
func transportOf(ioctl, write float64) string {
	switch {
	case ioctl > 0 && write > 0:
		return "ioctl+write"
	case ioctl > 0:
		return "ioctl"
	case write > 0:
		return "write"
	}
	return "none"
}

// quantile is the nearest-rank q-quantile: the ⌈q·n⌉-th smallest sample
// (the smallest for q = 0). verbs_cost.c computes the same.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[rank(len(s), q)]
}

func quantileF(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[rank(len(s), q)]
}

func rank(n int, q float64) int {
	i := int(math.Ceil(q*float64(n))) - 1
	return min(max(i, 0), n-1)
}

// errorf is fmt.Errorf, for errors of the workload itself.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
