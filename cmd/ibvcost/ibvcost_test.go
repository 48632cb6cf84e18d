package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/uverbs"
)

// The test binary doubles as ibvcost: run with IBVCOST_TEST_MAIN=1 it is
// the program, so the rig test needs no separately built binary.
func TestMain(m *testing.M) {
	if os.Getenv("IBVCOST_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// ---- unit tests ----

func TestSizes(t *testing.T) {
	for n, want := range map[int64]string{8: "8B", 64: "64B", 4096: "4KiB", 65536: "64KiB", 1 << 20: "1MiB", 256 << 20: "256MiB", 1000: "1000B"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
	for s, want := range map[string]int64{"256MiB": 256 << 20, "16M": 16 << 20, "4k": 4096, "65536": 65536, "1GiB": 1 << 30, "64KiB": 64 << 10} {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x", "-1", "1.5M"} {
		if _, err := parseSize(s); err == nil {
			t.Errorf("parseSize(%q) accepted", s)
		}
	}
	if postSendRow("write", 8) != "post_send_write_8B_inline" || postSendRow("read", 8) != "post_send_read_8B" || postSendRow("send", 65536) != "post_send_send_64KiB" {
		t.Error("post_send row names")
	}
}

func TestQuantile(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	for q, want := range map[float64]time.Duration{0: 1, 0.5: 3, 0.99: 5, 1: 5, 0.2: 1, 0.21: 2} {
		if got := quantile(d, q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}

// sample builds a small report of one tool.
func sample(tool string, scale float64, sys float64) *Report {
	r := &Report{Tool: tool, Device: "rxe0", Driver: "rxe", Kernel: "6.1.0", N: 10, BigN: 2, Counted: 3, FloorNS: 1000, Counter: "perf:raw_syscalls:sys_enter"}
	add := func(name, path string, med int64, s Syscalls) {
		r.Rows = append(r.Rows, Row{Name: name, Path: path, N: 10, MedianNS: int64(float64(med) * scale), P99NS: int64(float64(2*med) * scale),
			MinNS: med / 2, MeanNS: int64(float64(med) * scale), Syscalls: &s, Transport: transportOf(s.Ioctl, s.Write)})
	}
	add("open_device", "slow", 100000, Syscalls{Total: sys, Ioctl: 2})
	add("alloc_pd", "slow", 20000, Syscalls{Total: 1, Ioctl: 1})
	for _, n := range []string{"create_cq", "create_qp", "modify_qp_init", "modify_qp_rtr", "modify_qp_rts", "reg_mr_1MiB", "reg_mr_4KiB"} {
		add(n, "slow", 50000, Syscalls{Total: 1, Ioctl: 1})
	}
	r.Rows = append(r.Rows, Row{Name: "create_ah", Path: "slow", Skipped: "not supported <&>", Transport: "-"})
	add("poll_cq_empty", "fast", 80, Syscalls{})
	add("pingpong_send_64B", "fast", 100000, Syscalls{Total: 2, Write: 2})
	add("msg_rate_write_64B", "fast", 50000, Syscalls{Total: 1, Write: 1})
	r.Rows[len(r.Rows)-1].PerSecond = 20000
	return r
}

func TestRatios(t *testing.T) {
	r := sample("goverbs", 1, 6)
	got := map[string]float64{}
	for _, x := range ratios(r) {
		got[x.Name] = x.Value
	}
	// set-up: create CQ + QP and three transitions, 5 × 50 µs, over 50 µs writes.
	if got["rc_setup_in_writes"] != 5 || got["rc_setup_in_roundtrips"] != 2.5 || got["alloc_pd_in_writes"] != 0.4 {
		t.Errorf("ratios = %v", got)
	}
	r.row("modify_qp_rtr").Skipped = "no"
	for _, x := range ratios(r) {
		if strings.HasPrefix(x.Name, "rc_setup") && x.Value != 0 {
			t.Errorf("%s = %v with a row skipped", x.Name, x.Value)
		}
	}
}

func TestSVGIsWellFormed(t *testing.T) {
	for _, reps := range [][]*Report{{sample("goverbs", 1, 6)}, {sample("goverbs", 1, 6), sample("rdma-core", 0.5, 5)}} {
		var b bytes.Buffer
		if err := writeSVG(&b, reps...); err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(&b)
		rects := 0
		for {
			tok, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%d reports: SVG is not well-formed XML: %v", len(reps), err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
				rects++
			}
		}
		// A background, a legend swatch per tool, a bar per measured row and tool.
		if want := 1 + len(reps) + 12*len(reps); rects != want {
			t.Errorf("%d reports: %d rects, want %d", len(reps), rects, want)
		}
	}
	var b bytes.Buffer
	writeSVG(&b, sample("goverbs", 1, 6))
	for _, s := range []string{"alloc_pd", "skipped: not supported &lt;&amp;&gt;", "10µs", "100µs"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
}

func TestCompareTable(t *testing.T) {
	g, c := sample("goverbs", 2, 6), sample("rdma-core", 1, 5)
	var b strings.Builder
	if err := writeCompare(&b, g, c, defaultSides); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{"alloc_pd", "2.00", "≠", "open_device                goverbs 6 (ioctl 2, write 0, mmap 0, other 4), rdma-core 5",
		"skipped by both", "N = 5.00 (goverbs), 5.00 (rdma-core)"} {
		if !strings.Contains(out, s) {
			t.Errorf("comparison lacks %q:\n%s", s, out)
		}
	}
	if strings.Count(out, "≠") != 2 { // the row's mark and the list's header
		t.Errorf("want exactly one row marked:\n%s", out)
	}
	b.Reset()
	if err := writeTable(&b, g); err != nil || !strings.Contains(b.String(), "skipped: not supported") || !strings.Contains(b.String(), "20000 msg/s") {
		t.Errorf("table (%v):\n%s", err, b.String())
	}
}

// TestCompareLabels compares two goverbs builds, as test/cost/compare.sh's
// BASE does: -labels names the sides in the table and the chart, and a
// -labels that is not two names, or comes without -compare, is refused.
func TestCompareLabels(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r *Report) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newer, base := write("new.json", sample("goverbs", 1, 6)), write("base.json", sample("goverbs", 2, 5))
	svg := filepath.Join(dir, "ab.svg")
	var out, errOut strings.Builder
	if rc := run([]string{"-load", newer, "-compare", base, "-labels", "new,base", "-svg", svg}, &out, &errOut); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errOut.String())
	}
	for _, s := range []string{"new on rxe0", "base on rxe0", "row                              new      base  go/rc", "   0.50 ",
		"open_device                new 6 (ioctl 2, write 0, mmap 0, other 4), base 5", "N = 5.00 (new), 5.00 (base)"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "rdma-core") || strings.Contains(out.String(), "goverbs") {
		t.Errorf("table still names the default sides:\n%s", out.String())
	}
	chart, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(chart), ">new<") || !strings.Contains(string(chart), ">base<") {
		t.Errorf("chart's legend (%v) lacks new and base", err)
	}
	for _, args := range [][]string{{"-load", newer, "-compare", base, "-labels", "new"},
		{"-load", newer, "-compare", base, "-labels", ",base"}, {"-load", newer, "-labels", "new,base"}} {
		errOut.Reset()
		if rc := run(args, &out, &errOut); rc != 2 || !strings.Contains(errOut.String(), "-labels") {
			t.Errorf("%v: exit %d, %q; want 2 and a word on -labels", args, rc, errOut.String())
		}
	}
}

// TestCompareBest: a side whose runs were mostly slow has the larger
// median, and "best" compares the fastest runs instead.
func TestCompareBest(t *testing.T) {
	_, _, f := compareRow(t, "open_device",
		[]*Report{sample("goverbs", 1, 6), sample("goverbs", 4, 6), sample("goverbs", 4, 6)},
		[]*Report{sample("rdma-core", 2, 5), sample("rdma-core", 2, 5), sample("rdma-core", 2, 5)})
	if f[3] != "~2.00" || f[4] != "0.50" {
		t.Errorf("open_device: ratio %s, best %s; want ~2.00 (medians, 4 runs' worth against 2) and 0.50:\n%s", f[3], f[4], strings.Join(f, " "))
	}
}

// compareRow merges each side's runs, prints the comparison and returns
// the merged reports and the fields of row name's line (fatal if none).
func compareRow(t *testing.T, name string, gs, cs []*Report) (g, c *Report, fields []string) {
	t.Helper()
	g, err := merge(gs)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = merge(cs); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeCompare(&b, g, c, defaultSides); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[0] == name {
			return g, c, f
		}
	}
	t.Fatalf("no %s row:\n%s", name, b.String())
	return nil, nil, nil
}

// TestComparePaired: runs made next to each other are compared pair by
// pair. goverbs' runs are 0.91x their rdma-core neighbours' in three pairs
// of four; the fastest runs (from different moments) say 0.80.
func TestComparePaired(t *testing.T) {
	var gs, cs []*Report
	for i, scale := range []float64{1.5, 4, 4, 1} {
		gs = append(gs, sample("goverbs", scale, 6))
		cs = append(cs, sample("rdma-core", []float64{1.65, 4.4, 2, 1.25}[i], 6))
	}
	g, c, f := compareRow(t, "open_device", gs, cs)
	if f[4] != "0.80" || f[5] != "0.91" {
		t.Errorf("open_device: best %s, paired %s; want 0.80 and 0.91:\n%s", f[4], f[5], strings.Join(f, " "))
	}
	if pairedRatio(g.row("open_device").RunMediansNS, c.row("open_device").RunMediansNS[:3]) != 0 {
		t.Error("pairedRatio paired runs of unequal counts")
	}
}

func TestParsePaths(t *testing.T) {
	for _, c := range []struct {
		in       string
		fast, cm bool
		ok       bool
	}{
		{"slow,fast,cm", true, true, true},
		{"slow", false, false, true},
		{"cm, slow", false, true, true},
		{"fast,cm", false, false, false},
		{"slow,fats", false, false, false},
	} {
		fast, cm, err := parsePaths(c.in)
		if (err == nil) != c.ok || fast != c.fast || cm != c.cm {
			t.Errorf("parsePaths(%q) = %v, %v, %v; want %v, %v, ok %v", c.in, fast, cm, err, c.fast, c.cm, c.ok)
		}
	}
}

func TestMerge(t *testing.T) {
	a, b, c := sample("goverbs", 1, 6), sample("goverbs", 3, 6), sample("goverbs", 2, 6)
	b.row("alloc_pd").Skipped = "gone"
	m, err := merge([]*Report{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	if m.Runs != 3 || m.row("open_device").MedianNS != 200000 || m.row("open_device").N != 30 || m.row("open_device").Spread != 3 {
		t.Errorf("merged open_device = %+v (runs %d)", *m.row("open_device"), m.Runs)
	}
	if r := m.row("open_device"); r.FastestRunNS != 100000 || !slices.Equal(r.RunMediansNS, []int64{100000, 300000, 200000}) {
		t.Errorf("merged open_device's fastest run %d, want 100000 (the first run's); runs %v, want in merge order", r.FastestRunNS, r.RunMediansNS)
	}
	if r := m.row("alloc_pd"); r.Skipped != "gone" || r.N != 0 {
		t.Errorf("merged alloc_pd = %+v", *r)
	}
	if _, err := merge([]*Report{a, sample("rdma-core", 1, 5)}); err == nil {
		t.Error("merged two tools")
	}
	for _, r := range []*Report{a, b, c} {
		r.Clocksource = "hpet"
	}
	if m, _ := merge([]*Report{a, b, c}); m.Clocksource != "hpet" {
		t.Errorf("merged clocksource %q, want hpet", m.Clocksource)
	}
	a.Clocksource = "tsc"
	if m, _ := merge([]*Report{a, b, c}); m.Clocksource != "tsc (1 run), hpet (2 runs)" {
		t.Errorf("merged clocksource %q, want the switch named", m.Clocksource)
	}
	if m, _ := merge([]*Report{a, b, c}); m.Pinned != "" {
		t.Errorf("merged unpinned runs: pinned %q, want empty", m.Pinned)
	}
	b.Pinned, c.Pinned = "cpu 0", "cpu 0"
	if m, _ := merge([]*Report{a, b, c}); m.Pinned != "unpinned (1 run), cpu 0 (2 runs)" {
		t.Errorf("merged pinning %q, want the difference named", m.Pinned)
	}
	if h := header(&Report{Tool: "goverbs", Device: "rxe0", Pinned: "cpu 1"}); !strings.Contains(h, "measuring thread pinned: cpu 1") {
		t.Errorf("header %q does not name the pinning", h)
	}
}

// TestReadsRDMACoreReport reads a report verbs_cost.c wrote in the rig.
func TestReadsRDMACoreReport(t *testing.T) {
	r, err := readReports("testdata/rdma-core-rxe0.json")
	if err != nil {
		t.Fatal(err)
	}
	if r.Tool != "rdma-core" || len(r.Rows) != len(specs()) {
		t.Fatalf("tool %q, %d rows, want %d", r.Tool, len(r.Rows), len(specs()))
	}
	for i, s := range specs() {
		row := r.Rows[i]
		if row.Name != s.name || row.Path != s.path {
			t.Errorf("row %d is %s (%s), want %s (%s)", i, row.Name, row.Path, s.name, s.path)
		}
	}
	if p := r.row("alloc_pd"); p.Syscalls == nil || p.Syscalls.Total != 1 || p.Transport != "ioctl" {
		t.Errorf("alloc_pd = %+v", p)
	}
}

// ---- the rig ----

// runSelf runs the test binary as ibvcost and decodes its -json report.
func runSelf(t *testing.T, args ...string) *Report {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "IBVCOST_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ibvcost %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ibvcost %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return &r
}

// recorderWant is the syscalls each row's call makes at goverbs' chokepoint,
// per the uverbs.Recorder, on rxe and on siw: both map a CQ's ring and a
// QP's two (and unmap them); Open is GET_CONTEXT and ASYNC_EVENT_ALLOC (its
// open(2) precedes the span), Close the command file's close; a PostSend
// on an idle queue is one doorbell write(), whatever the opcode and size;
// receives and polls make none. -1: the row is skipped on siw (its QPs are
// connected by rdma_cm: no MODIFY_QP to RTR/RTS, no address handles).
var recorderWant = map[string][2]float64{
	"open_device": {2, 2}, "close_device": {1, 1},
	"query_device": {1, 1}, "query_port": {1, 1}, "query_gid": {1, 1},
	"alloc_pd": {1, 1}, "dealloc_pd": {1, 1},
	"reg_mr_4KiB": {1, 1}, "dereg_mr_4KiB": {1, 1}, "reg_mr_64KiB": {1, 1}, "dereg_mr_64KiB": {1, 1},
	"reg_mr_1MiB": {1, 1}, "dereg_mr_1MiB": {1, 1},
	"create_cq": {2, 2}, "destroy_cq": {2, 2}, "create_qp": {3, 3}, "destroy_qp": {3, 3},
	"modify_qp_init": {1, 1}, "modify_qp_rtr": {1, 1}, "modify_qp_rts": {1, -1}, "modify_qp_err": {1, 1}, "modify_qp_reset": {1, 1},
	"create_ah": {1, -1}, "destroy_ah": {1, -1},
	"post_recv": {0, 0}, "poll_cq_empty": {0, 0}, "poll_cq": {0, 0},
	"pingpong_send_64B": {2, 2}, "msg_rate_write_64B": {1, 1},
}

// ahNumbered reports whether dev's kernel names its address handles by a
// number (rxe since Linux 5.16): without one, provider/rxe builds the
// address vector UD WQEs carry and reads the source GID for it, one more
// command per CreateAH.
func ahNumbered(t *testing.T, dev string) bool {
	t.Helper()
	d, err := uverbs.DeviceByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	c, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	ah, err := pd.CreateAH(uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: g.GID, SGIDIndex: 1, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	n, ok := ah.ProviderAH().(interface{ Num() uint32 })
	return !ok || n.Num() != 0
}

// TestRig runs ibvcost with few calls on rxe0 and siw0 and checks that
// every row is there, measured (or skipped for a stated reason where the
// device cannot do it), with a positive time and the syscalls it must make.
//
// It counts with the Recorder alone (-perf=false): the rig runs under TCG,
// where registering the syscall tracepoint from a multi-threaded process
// can crash the guest (see bench). test/cost/compare.sh checks the kernel's
// counts, behind a single-threaded holder, beside rdma-core's.
func TestRig(t *testing.T) {
	rigtest.Require(t)
	for i, dev := range []string{"rxe0", "siw0"} {
		t.Run(dev, func(t *testing.T) {
			rigtest.Device(t, dev)
			r := runSelf(t, "-d", dev, "-n", "5", "-big-n", "2", "-mr-max", "1MiB", "-perf=false", "-json")
			if r.Tool != "goverbs" || r.Device != dev || r.Kernel == "" || r.FloorNS <= 0 || r.Counted != countedCalls ||
				!strings.HasPrefix(r.Counter, "none: disabled") {
				t.Errorf("header: %+v", *r)
			}
			specs := specs()
			if len(r.Rows) != len(specs) {
				t.Fatalf("%d rows, want %d", len(r.Rows), len(specs))
			}
			iwarp := i == 1
			if r.FastPath != "" {
				t.Errorf("fast path skipped: %q", r.FastPath)
			}
			for k, row := range r.Rows {
				if row.Name != specs[k].name {
					t.Errorf("row %d is %s, want %s", k, row.Name, specs[k].name)
					continue
				}
				if row.Skipped != "" {
					allowed := strings.Contains(row.Name, "16MiB") || strings.Contains(row.Name, "256MiB")
					if iwarp {
						allowed = allowed || row.Name == "modify_qp_rts" || strings.HasSuffix(row.Name, "_ah")
					}
					if !allowed {
						t.Errorf("%s skipped: %s", row.Name, row.Skipped)
					}
					continue
				}
				if row.N != 5 || row.MedianNS <= 0 || row.MeanNS <= 0 || row.P99NS < row.MedianNS || row.MinNS > row.MedianNS {
					t.Errorf("%s: n %d median %d p99 %d min %d mean %d", row.Name, row.N, row.MedianNS, row.P99NS, row.MinNS, row.MeanNS)
				}
				if row.Path == "cm" {
					// Timed only (the work spans the event channel's goroutine).
					if row.Recorder != nil || row.Syscalls != nil {
						t.Errorf("%s: recorder %+v, kernel counts %+v", row.Name, row.Recorder, row.Syscalls)
					}
					continue
				}
				rc := row.Recorder
				if rc == nil || row.Syscalls != nil {
					t.Errorf("%s: recorder %+v, kernel counts %+v", row.Name, rc, row.Syscalls)
					continue
				}
				want, ok := recorderWant[row.Name]
				if strings.HasPrefix(row.Name, "post_send_") {
					want, ok = [2]float64{1, 1}, true
				}
				if !ok {
					t.Errorf("%s: no expectation", row.Name)
					continue
				}
				if row.Name == "create_ah" && !iwarp && !ahNumbered(t, dev) {
					want[i]++ // the provider reads the source GID (one command)
				}
				if iwarp && row.Name == "msg_rate_write_64B" {
					// siw rings only when the kernel may have gone
					// idle (the entry before is no longer valid): at
					// most one doorbell per message, fewer when the
					// send queue is busy.
					if rc.Syscalls <= 0 || rc.Syscalls > 1 {
						t.Errorf("%s: %v syscalls per call, want (0, 1]", row.Name, rc.Syscalls)
					}
				} else if rc.Syscalls != want[i] {
					t.Errorf("%s: %v syscalls per call, want %v (recorder %+v)", row.Name, rc.Syscalls, want[i], *rc)
				}
				wantMaps := 0.0
				if strings.Contains(row.Name, "_cq") && row.Path == "slow" {
					wantMaps = 1
				}
				if strings.HasSuffix(row.Name, "_qp") {
					wantMaps = 2
				}
				if rc.Mappings != wantMaps {
					t.Errorf("%s: %v mappings per call, want %v", row.Name, rc.Mappings, wantMaps)
				}
				// Commands go by ioctl on these kernels; doorbells, receives
				// and polls have no command.
				wantTr := "ioctl"
				switch {
				case row.Path == "fast":
					wantTr = "none"
				case row.Name == "close_device":
					wantTr = "none"
				}
				if rc.Transport != wantTr || row.Transport != wantTr {
					t.Errorf("%s: transport %s (recorder %s), want %s", row.Name, row.Transport, rc.Transport, wantTr)
				}
				if row.Path == "slow" && (rc.Calls != 1 || wantTr == "ioctl" && rc.BytesIn == 0) {
					t.Errorf("%s: recorder %+v", row.Name, *rc)
				}
			}
			{
				if len(r.Overhead) != 2 {
					t.Errorf("overhead: %+v", r.Overhead)
				}
				for _, o := range r.Overhead {
					if o.OffNS <= 0 || o.OnNS <= 0 {
						t.Errorf("overhead %+v", o)
					}
				}
			}
			var table strings.Builder
			writeTable(&table, r)
			t.Logf("%s", table.String())
		})
	}
}
