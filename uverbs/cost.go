package uverbs

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goverbs/goverbs/abi"
)

// Recorder accumulates what each verb costs: calls, errors, syscalls,
// bytes handed to and from the kernel, the transport, and a latency
// histogram. It is opt-in (Context.SetRecorder, OpenOptions.Recorder) and
// free when off: a verb then does one atomic pointer load, no allocation
// and no clock read. One Recorder may serve several contexts.
type Recorder struct {
	mu    sync.Mutex
	verbs map[string]*VerbCost
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{verbs: map[string]*VerbCost{}} }

// VerbCost is one verb's accumulated cost.
type VerbCost struct {
	Verb     string
	Calls    uint64
	Errors   uint64
	Syscalls uint64 // every syscall the verb made, commands, mappings and doorbells
	Mappings uint64 // the mmap/munmap calls among Syscalls
	BytesIn  uint64 // command bytes handed to the kernel (requests, driver data, ioctl framing)
	BytesOut uint64 // response bytes the kernel could write
	// ByTransport counts calls by how their command went (index: a
	// CommandTransport).
	ByTransport [3]uint64
	Latency     Histogram
}

// SyscallsPerCall is Syscalls/Calls.
func (v *VerbCost) SyscallsPerCall() float64 {
	if v.Calls == 0 {
		return 0
	}
	return float64(v.Syscalls) / float64(v.Calls)
}

// Transport is the transport most of the verb's calls used.
func (v *VerbCost) Transport() CommandTransport {
	best := CommandNone
	for t, n := range v.ByTransport {
		if n > v.ByTransport[best] {
			best = CommandTransport(t)
		}
	}
	return best
}

// Histogram is a latency histogram with power-of-two nanosecond buckets:
// bucket i counts durations d with 2^(i-1) ≤ d/ns < 2^i (bucket 0: d < 1 ns).
type Histogram struct {
	Buckets  [64]uint64
	Count    uint64
	Sum      time.Duration
	Min, Max time.Duration
}

func (h *Histogram) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.Buckets[bits.Len64(uint64(d))]++
	if h.Count == 0 || d < h.Min {
		h.Min = d
	}
	if d > h.Max {
		h.Max = d
	}
	h.Count++
	h.Sum += d
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) as the geometric middle of
// the bucket it falls in, clamped to [Min, Max]: within a factor of √2.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Count-1)) + 1
	var seen uint64
	for i, n := range h.Buckets {
		seen += n
		if seen >= rank {
			var d time.Duration
			if i > 0 {
				d = time.Duration(float64(uint64(1)<<(i-1)) * 1.4142135623730951)
			}
			return min(max(d, h.Min), h.Max)
		}
	}
	return h.Max
}

// Mean is the average latency.
func (h *Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

func (r *Recorder) entry(verb string) *VerbCost {
	v := r.verbs[verb]
	if v == nil {
		v = &VerbCost{Verb: verb}
		r.verbs[verb] = v
	}
	return v
}

// Snapshot returns a copy of every verb's cost, sorted by verb.
func (r *Recorder) Snapshot() []VerbCost {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]VerbCost, 0, len(r.verbs))
	for _, v := range r.verbs {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Verb < out[j].Verb })
	return out
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verbs = map[string]*VerbCost{}
}

// WriteTo prints the recorder as a table, one verb a line.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %8s %6s %9s %8s %8s %-9s %10s %10s %10s\n",
		"verb", "calls", "errors", "sys/call", "in B", "out B", "transport", "median", "p99", "max")
	for _, v := range r.Snapshot() {
		fmt.Fprintf(&b, "%-20s %8d %6d %9.2f %8d %8d %-9s %10v %10v %10v\n",
			v.Verb, v.Calls, v.Errors, v.SyscallsPerCall(), v.BytesIn, v.BytesOut, v.Transport(),
			v.Latency.Quantile(0.5), v.Latency.Quantile(0.99), v.Latency.Max)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// SetRecorder starts recording this context's verbs into r (nil stops).
func (c *Context) SetRecorder(r *Recorder) { c.rec.Store(r) }

// Recorder is the context's recorder, or nil.
func (c *Context) Recorder() *Recorder { return c.rec.Load() }

// span measures one verb call; its zero value (recording off) does nothing.
type span struct {
	rec  *Recorder
	file *abi.File
	verb string
	t0   int64 // abi.Nanotime
	sys  uint64
	maps uint64
}

// begin starts measuring verb if the context records. Verbs defer the
// span's end only when it records (`if sp := c.begin(v); sp.rec != nil
// { defer ... }`): unconditionally, the deferred closure cost a command
// ~100 instructions with the Recorder off.
func (c *Context) begin(verb string) span {
	if c.rec.Load() != nil {
		return c.beginRecorded(verb)
	}
	return span{}
}

// beginRecorded is begin with a Recorder attached, out of line: without
// one, begin is a load, a compare and a zero span, inlined into the verb
// (cost 76 against the inliner's 80; passing the loaded Recorder here made
// it 83, a call on every command).
func (c *Context) beginRecorded(verb string) span {
	rec := c.rec.Load()
	if rec == nil { // detached since begin looked
		return span{}
	}
	return span{rec: rec, file: c.file, verb: verb, t0: abi.Nanotime(), sys: c.file.Syscalls(), maps: c.file.Mappings()}
}

// end records the call; err is the verb's result.
func (s span) end(err error) {
	if s.rec == nil {
		return
	}
	d := time.Duration(abi.Nanotime() - s.t0)
	sys, maps := s.file.Syscalls()-s.sys, s.file.Mappings()-s.maps
	s.rec.mu.Lock()
	v := s.rec.entry(s.verb)
	v.Calls++
	if err != nil {
		v.Errors++
	}
	v.Syscalls += sys
	v.Mappings += maps
	v.Latency.add(d)
	s.rec.mu.Unlock()
}

// noteCommand records a command's bytes and transport for verb.
func (c *Context) noteCommand(verb string, tr abi.Transport, in, out int) {
	rec := c.rec.Load()
	if rec == nil {
		return
	}
	rec.mu.Lock()
	v := rec.entry(verb)
	v.BytesIn += uint64(in)
	v.BytesOut += uint64(out)
	v.ByTransport[tr]++
	rec.mu.Unlock()
}
