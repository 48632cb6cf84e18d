package main

import (
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// overhead measures what a Recorder adds to the fast path: mean time per
// call over a round of calls, recording off and on, in eight alternating
// rounds (off, on, off, on …); each side reports its fastest round, the
// one least disturbed by the host (under TCG, by other guests).
//
//   - poll_cq_empty: CQ.Poll of an empty CQ, 200·n calls a round, one clock
//     pair around the whole round.
//   - post_send_write_8B_inline: QP.PostSend of one 8-byte inline WRITE,
//     batches of 32 (every 8th signaled) timed as a batch, 2·n batches a
//     round; the completions are reaped outside the timing.
func (f *fast) overhead() ([]Overhead, error) {
	ctx, a, rb, wc := f.w.ctx, f.a, f.b, f.wc
	n := f.w.n
	polls := 200 * n
	poll := func() (time.Duration, error) {
		t0 := now()
		for range polls {
			if _, err := a.scq.Poll(wc); err != nil {
				return 0, err
			}
		}
		return now() - t0, nil
	}
	wrs := [2][]uverbs.SendWR{
		{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendInline, SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: rb.addr(0), RKey: rb.mr.RKey()}},
		{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendInline | uverbs.SendSignaled, SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: rb.addr(0), RKey: rb.mr.RKey()}},
	}
	const batch = 32
	batches := 2 * n
	post := func() (time.Duration, error) {
		var total time.Duration
		for range batches {
			t0 := now()
			for i := range batch {
				sig := 0
				if i%signalGap == signalGap-1 {
					sig = 1
				}
				if _, err := a.qp.PostSend(wrs[sig]); err != nil {
					return 0, err
				}
			}
			total += now() - t0
			if err := f.reap(a.scq, batch/signalGap); err != nil {
				return 0, err
			}
		}
		return total, nil
	}
	ops := []struct {
		name  string
		calls int
		run   func() (time.Duration, error)
	}{{"poll_cq_empty", polls, poll}, {"post_send_write_8B_inline", batches * batch, post}}
	var out []Overhead
	for _, op := range ops {
		best := [2]time.Duration{}
		for round := range 8 {
			rec := round % 2
			if rec == 1 {
				ctx.SetRecorder(uverbs.NewRecorder())
			}
			d, err := op.run()
			ctx.SetRecorder(nil)
			if err != nil {
				return out, err
			}
			if best[rec] == 0 || d < best[rec] {
				best[rec] = d
			}
		}
		out = append(out, Overhead{Op: op.name, Calls: op.calls,
			OffNS: float64(best[0]) / float64(op.calls), OnNS: float64(best[1]) / float64(op.calls)})
	}
	return out, nil
}
