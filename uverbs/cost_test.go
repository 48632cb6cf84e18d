package uverbs

import (
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	if h.Count != 1000 || h.Min != time.Microsecond || h.Max != time.Millisecond {
		t.Fatalf("count %d min %v max %v", h.Count, h.Min, h.Max)
	}
	// Power-of-two buckets: within √2 of the true quantile.
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {0, time.Microsecond}} {
		got := h.Quantile(c.q)
		if r := float64(got) / float64(c.want); r < 0.70 || r > 1.42 {
			t.Errorf("Quantile(%v) = %v, want within √2 of %v", c.q, got, c.want)
		}
	}
	if h.Mean() != 500500*time.Nanosecond {
		t.Errorf("Mean = %v", h.Mean())
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram reports a latency")
	}
}

// countingCQ is a provider CQ that returns one completion per Poll.
type countingCQ struct{ plainCQ }

func (countingCQ) Poll(wc []provider.WorkCompletion) (int, error) {
	wc[0] = provider.WorkCompletion{ID: 1}
	return 1, nil
}

func fakeCQ(t testing.TB) *CQ {
	f, err := abi.Open("/dev/null", 0)
	if err != nil {
		t.Fatal(err)
	}
	return &CQ{ctx: &Context{file: f}, prov: countingCQ{}}
}

func TestRecorderFastPathAllocatesNothing(t *testing.T) {
	cq := fakeCQ(t)
	wc := make([]WorkCompletion, 4)
	if n := testing.AllocsPerRun(1000, func() { cq.Poll(wc) }); n != 0 {
		t.Errorf("Poll with recording off: %v allocs", n)
	}
	rec := NewRecorder()
	cq.ctx.SetRecorder(rec)
	cq.Poll(wc) // the first call creates the verb's entry
	if n := testing.AllocsPerRun(1000, func() { cq.Poll(wc) }); n != 0 {
		t.Errorf("Poll with recording on: %v allocs", n)
	}
	snap := rec.Snapshot()
	if len(snap) != 1 || snap[0].Verb != "PollCQ" || snap[0].Calls != 1002 || snap[0].Syscalls != 0 {
		t.Fatalf("snapshot = %+v", snap)
	}
	var b strings.Builder
	rec.WriteTo(&b)
	if !strings.Contains(b.String(), "PollCQ") || !strings.Contains(b.String(), "1002") {
		t.Errorf("table:\n%s", b.String())
	}
	rec.Reset()
	if len(rec.Snapshot()) != 0 {
		t.Error("Reset kept entries")
	}
}

// BenchmarkPollRecorder measures the recorder's overhead on a fast-path
// call: compare ns/op of off and on (the fake provider itself costs ~2 ns).
func BenchmarkPollRecorder(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			cq := fakeCQ(b)
			if on {
				cq.ctx.SetRecorder(NewRecorder())
			}
			wc := make([]WorkCompletion, 4)
			b.ReportAllocs()
			for b.Loop() {
				cq.Poll(wc)
			}
		})
	}
}
