package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ratios restates rows in units of a 64-byte RDMA WRITE (the mean time per
// message of msg_rate_write_64B: what a WRITE costs when they stream) and of
// a ping-pong round trip. A ratio whose rows were skipped is 0.
func ratios(r *Report) []Ratio {
	med := func(names ...string) float64 {
		var s float64
		for _, n := range names {
			row := r.row(n)
			if row == nil || row.Skipped != "" || row.N == 0 {
				return 0
			}
			s += float64(row.MedianNS)
		}
		return s
	}
	write := 0.0
	if row := r.row("msg_rate_write_64B"); row != nil && row.Skipped == "" {
		write = float64(row.MeanNS)
	}
	rtt := med("pingpong_send_64B")
	setup := med("create_cq", "create_qp", "modify_qp_init", "modify_qp_rtr", "modify_qp_rts")
	div := func(a, b float64) float64 {
		if a == 0 || b == 0 {
			return 0
		}
		return a / b
	}
	return []Ratio{
		{"rc_setup_in_writes", "RC connection set-up (create CQ + QP, INIT, RTR, RTS) = N × 64-B RDMA WRITE", div(setup, write)},
		{"rc_setup_in_roundtrips", "RC connection set-up = N × 64-B SEND ping-pong round trip", div(setup, rtt)},
		{"reg_mr_1MiB_in_writes", "reg MR 1 MiB = N × 64-B RDMA WRITE", div(med("reg_mr_1MiB"), write)},
		{"reg_mr_4KiB_in_writes", "reg MR 4 KiB = N × 64-B RDMA WRITE", div(med("reg_mr_4KiB"), write)},
		{"open_device_in_writes", "open device = N × 64-B RDMA WRITE", div(med("open_device"), write)},
		{"alloc_pd_in_writes", "alloc PD (one command) = N × 64-B RDMA WRITE", div(med("alloc_pd"), write)},
	}
}

// fmtNS prints nanoseconds with three significant digits: 850ns, 12.3µs,
// 1.23ms, 2.05s.
func fmtNS(ns float64) string {
	units := []struct {
		div float64
		suf string
	}{{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}}
	for _, u := range units {
		if ns >= u.div {
			return sig3(ns/u.div) + u.suf
		}
	}
	return strconv.FormatFloat(ns, 'f', 0, 64) + "ns"
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// fmtCount prints a per-call count: "2", "1.5", "0.004".
func fmtCount(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	if v >= 0.1 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return sig3(v)
}

// header describes a report in one line.
func header(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s", r.Tool, r.Device)
	if r.Driver != "" {
		fmt.Fprintf(&b, " (%s)", r.Driver)
	}
	fmt.Fprintf(&b, ", Linux %s", r.Kernel)
	if r.CPU != "" {
		fmt.Fprintf(&b, ", %s", r.CPU)
	}
	if r.Clocksource != "" {
		fmt.Fprintf(&b, ", clocksource %s", r.Clocksource)
	}
	if r.Pinned != "" {
		fmt.Fprintf(&b, ", measuring thread pinned: %s", r.Pinned)
	}
	fmt.Fprintf(&b, "\n  %d timed calls a row (MRs ≥ 16 MiB: %d) after %d counted", r.N, r.BigN, r.Counted)
	if r.Runs > 1 {
		fmt.Fprintf(&b, ", in each of %d runs (a row's median and p99: the median of the runs')", r.Runs)
	}
	fmt.Fprintf(&b, "; timer floor %s subtracted; syscalls: %s", fmtNS(float64(r.FloorNS)), r.Counter)
	return b.String()
}

// writeTable prints one report.
func writeTable(w io.Writer, r *Report) error {
	fmt.Fprintln(w, header(r))
	const f = "%-26s %9s %9s %5s %5s %5s %5s  %-11s %-9s%s\n"
	fmt.Fprintf(w, f, "row", "median", "p99", "sys", "ioctl", "write", "mmap", "transport", "recorder", "")
	path := ""
	for _, row := range r.Rows {
		if row.Path != path {
			path = row.Path
			fmt.Fprintf(w, "%s path\n", path)
		}
		if row.Skipped != "" {
			fmt.Fprintf(w, "%-26s skipped: %s\n", row.Name, row.Skipped)
			continue
		}
		sys := []string{"-", "-", "-", "-"}
		if s := row.Syscalls; s != nil {
			sys = []string{fmtCount(s.Total), fmtCount(s.Ioctl), fmtCount(s.Write), fmtCount(s.Mmap)}
		}
		rec := "-"
		if rc := row.Recorder; rc != nil {
			rec = fmtCount(rc.Syscalls) + " " + rc.Transport
			if rc.Calls == 0 {
				rec = "no span, " + rc.Transport
			}
		}
		extra := ""
		if row.PerSecond > 0 {
			extra = fmt.Sprintf("  %.0f msg/s", row.PerSecond)
		}
		fmt.Fprintf(w, f, row.Name, fmtNS(float64(row.MedianNS)), fmtNS(float64(row.P99NS)),
			sys[0], sys[1], sys[2], sys[3], row.Transport, rec, extra)
	}
	if r.FastPath != "" {
		fmt.Fprintf(w, "fast path skipped: %s\n", r.FastPath)
	}
	writeRatios(w, r, nil, sides{})
	writeOverhead(w, r)
	return nil
}

// sides names the two reports of a comparison in its table: goverbs and
// rdma-core by default, or two goverbs builds (compare.sh's BASE).
type sides struct{ a, b string }

// defaultSides is -labels' default.
var defaultSides = sides{"goverbs", "rdma-core"}

func writeRatios(w io.Writer, r, rc *Report, s sides) {
	rs := ratios(r)
	var cs []Ratio
	if rc != nil {
		cs = ratios(rc)
	}
	fmt.Fprintln(w, "ratios (medians; a WRITE is msg_rate_write_64B's mean time per message):")
	for i, x := range rs {
		if rc == nil {
			fmt.Fprintf(w, "  %-78s N = %s\n", x.Text, fmtRatio(x.Value))
			continue
		}
		fmt.Fprintf(w, "  %-78s N = %s (%s), %s (%s)\n", x.Text, fmtRatio(x.Value), s.a, fmtRatio(cs[i].Value), s.b)
	}
}

func writeOverhead(w io.Writer, r *Report) {
	if len(r.Overhead) == 0 {
		return
	}
	fmt.Fprintln(w, "uverbs.Recorder overhead (mean per call over batches, recorder off → on):")
	for _, o := range r.Overhead {
		fmt.Fprintf(w, "  %-28s %s → %s (+%s per call, %d calls each)\n", o.Op, fmtNS(o.OffNS), fmtNS(o.OnNS), fmtNS(max(0, o.OnNS-o.OffNS)), o.Calls)
	}
}

// unstable is the spread of the runs' medians above which a row's
// comparison is marked.
const unstable = 3.0

// writeCompare prints g beside c (goverbs beside rdma-core, unless s
// names them otherwise), row by row, with the ratio of the medians and
// each side's syscalls per call. The short column names (go, rc) stay
// whatever the sides are called.
func writeCompare(w io.Writer, g, c *Report, s sides) error {
	fmt.Fprintln(w, header(g))
	fmt.Fprintln(w, header(c))
	const f = "%-26s %9s %9s %6s %6s %6s %9s %9s %6s %6s%1s  %-11s %-11s%s\n"
	fmt.Fprintf(w, f, "row", s.a, s.b, "go/rc", "best", "paired", "p99 go", "p99 rc", "sys go", "sys rc", "", "tr go", "tr rc", "")
	var differ []string
	unsteady := 0
	path := ""
	for i := range g.Rows {
		gr := &g.Rows[i]
		if gr.Path != path {
			path = gr.Path
			fmt.Fprintf(w, "%s path (median, p99: wall time per call; best: the ratio of the fastest runs' medians; paired: the median of the i-th runs' ratios; sys: syscalls per call; tr: their transport)\n", path)
		}
		cr := c.row(gr.Name)
		if cr == nil {
			cr = &Row{Skipped: "no such row"}
		}
		cell := func(r *Row, v int64) string {
			if r.Skipped != "" {
				return "-"
			}
			return fmtNS(float64(v))
		}
		sys := func(r *Row) string {
			if r.Skipped != "" || r.Syscalls == nil {
				return "-"
			}
			return fmtCount(r.Syscalls.Total)
		}
		tr := func(r *Row) string {
			if r.Skipped != "" {
				return "-"
			}
			return r.Transport
		}
		ratio := "-"
		if gr.Skipped == "" && cr.Skipped == "" && cr.MedianNS > 0 {
			ratio = sig3(float64(gr.MedianNS) / float64(cr.MedianNS))
			if gr.Spread > unstable || cr.Spread > unstable {
				ratio = "~" + ratio
				unsteady++
			}
		}
		best := "-" // the fastest runs' ratio: see Row.FastestRunNS
		if gr.Skipped == "" && cr.Skipped == "" && gr.FastestRunNS > 0 && cr.FastestRunNS > 0 {
			best = sig3(float64(gr.FastestRunNS) / float64(cr.FastestRunNS))
		}
		paired := "-"
		if gr.Skipped == "" && cr.Skipped == "" {
			if p := pairedRatio(gr.RunMediansNS, cr.RunMediansNS); p > 0 {
				paired = sig3(p)
			}
		}
		mark := ""
		if gr.Skipped == "" && cr.Skipped == "" && gr.Syscalls != nil && cr.Syscalls != nil && !sameCounts(gr.Syscalls, cr.Syscalls) {
			mark = "≠"
			differ = append(differ, fmt.Sprintf("  %-26s %s %s, %s %s", gr.Name, s.a, fmtSys(gr.Syscalls), s.b, fmtSys(cr.Syscalls)))
		}
		note := ""
		switch {
		case gr.Skipped != "" && cr.Skipped != "":
			note = "  skipped by both: " + gr.Skipped
		case gr.Skipped != "":
			note = "  " + s.a + " skipped: " + gr.Skipped
		case cr.Skipped != "":
			note = "  " + s.b + " skipped: " + cr.Skipped
		}
		fmt.Fprintf(w, f, gr.Name, cell(gr, gr.MedianNS), cell(cr, cr.MedianNS), ratio, best, paired,
			cell(gr, gr.P99NS), cell(cr, cr.P99NS), sys(gr), sys(cr), mark, tr(gr), tr(cr), note)
	}
	if unsteady > 0 {
		fmt.Fprintf(w, "~: the runs' medians of the row differ more than %g×, on one side or both: its ratio says little\n", unstable)
	}
	if g.FastPath != "" {
		fmt.Fprintf(w, "%s fast path skipped: %s\n", s.a, g.FastPath)
	}
	if c.FastPath != "" {
		fmt.Fprintf(w, "%s fast path skipped: %s\n", s.b, c.FastPath)
	}
	if len(differ) > 0 {
		fmt.Fprintln(w, "syscalls per call differ (≠; docs/COST.md explains each):")
		for _, d := range differ {
			fmt.Fprintln(w, d)
		}
	} else {
		fmt.Fprintf(w, "syscalls per call: %s and %s agree on every row both measured\n", s.a, s.b)
	}
	writeRatios(w, g, c, s)
	writeOverhead(w, g)
	return nil
}

// pairedRatio is the median over i of a[i]/b[i], the ratios of runs made
// next to each other (see Row.RunMediansNS); 0 unless both sides have the
// same number of runs, at least two, all measured.
func pairedRatio(a, b []int64) float64 {
	if len(a) < 2 || len(a) != len(b) {
		return 0
	}
	r := make([]float64, len(a))
	for i := range a {
		if a[i] <= 0 || b[i] <= 0 {
			return 0
		}
		r[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(r)
	if n := len(r); n%2 == 0 {
		return (r[n/2-1] + r[n/2]) / 2
	}
	return r[len(r)/2]
}

// sameCounts compares what two calls did, up to rounding.
func sameCounts(a, b *Syscalls) bool {
	eq := func(x, y float64) bool { d := x - y; return d < 0.05 && d > -0.05 }
	return eq(a.Total, b.Total) && eq(a.Ioctl, b.Ioctl) && eq(a.Write, b.Write) && eq(a.Mmap, b.Mmap)
}

func fmtSys(s *Syscalls) string {
	other := s.Total - s.Ioctl - s.Write - s.Mmap
	return fmt.Sprintf("%s (ioctl %s, write %s, mmap %s, other %s)", fmtCount(s.Total), fmtCount(s.Ioctl), fmtCount(s.Write), fmtCount(s.Mmap), fmtCount(other))
}
