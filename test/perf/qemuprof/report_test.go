package main

import (
	"math"
	"strings"
	"testing"
)

func TestParseSample(t *testing.T) {
	for _, c := range []struct {
		line, by, key string
	}{
		{"29131 15175.469334:     500000  ffffffff82250fa7 _raw_spin_lock ([kernel.kallsyms])", "sym", "_raw_spin_lock"},
		{"29131 15175.469334:     500000  7f0012345678 [unknown] (/tmp/perf-29131.map)", "sym", "[guest code]"},
		{"29131 15175.469334:     500000  7f0012345678 [unknown] ([unknown])", "dso", "[guest code]"},
		{"29131 15175.469334:     500000  55aa00001234 helper_lookup_tb_ptr (/x/build/qemu-system-x86_64)", "dso", "qemu-system-x86_64"},
		{"29131 15175.469334:     500000  55aa00001234 operator new(unsigned long) (/usr/lib/libstdc++.so.6)", "sym", "operator new(unsigned long)"},
		{"29134 15175.469334:     500000  55aa00001234 [unknown] (/x/build/qemu-system-x86_64)", "sym", "qemu-system-x86_64 (no symbol)"},
		{"29134 15175.469334:     500000  55aa00001234 cpu_exec (/x/qemu)", "thread", "thread 29134"},
	} {
		s, ok := parseSample(c.line)
		if !ok {
			t.Errorf("parseSample(%q) failed", c.line)
			continue
		}
		if s.period != 500000 || s.t != 15175.469334 {
			t.Errorf("parseSample(%q): period %v, time %v", c.line, s.period, s.t)
		}
		if k := s.key(c.by); k != c.key {
			t.Errorf("key(%q) of %q = %q, want %q", c.by, c.line, k, c.key)
		}
	}
	if _, ok := parseSample("# a perf header line"); ok {
		t.Error("a header line parsed as a sample")
	}
}

// Two sizes of one side: what both runs pay (here 7 ms of sampled time and
// 1 s of wall time) cancels, and the rest is per unit of the difference.
func TestSideCostDifference(t *testing.T) {
	lines := strings.Join([]string{
		"100.000 QMARK start go 1.a 1000",
		"101.100 QMARK end go 1.a",
		"102.000 QMARK start go 1.b 3000",
		"103.300 QMARK end go 1.b",
		"104.000 QMARK start c 1 2000",
		"105.000 QMARK end c 1",
	}, "\n")
	runs, err := parseMarks(strings.NewReader(lines))
	if err != nil || len(runs) != 3 {
		t.Fatalf("parseMarks: %d runs, %v", len(runs), err)
	}
	samples := strings.Join([]string{
		"1 100.5: 9000000 1 cpu_exec (/q)",               // go, 1000 units: 9 ms
		"1 101.5: 1000000 1 cpu_exec (/q)",               // between runs: dropped
		"1 102.5: 13000000 1 cpu_exec (/q)",              // go, 3000 units: 13 ms
		"2 104.5: 4000000 1 [unknown] (/tmp/perf-2.map)", // c: 4 ms of guest code
	}, "\n")
	if err := addSamples(strings.NewReader(samples), runs, "sym"); err != nil {
		t.Fatal(err)
	}
	g, err := sideCost("go", runs[:2])
	if err != nil {
		t.Fatal(err)
	}
	// (13 - 9) ms over 2000 units: 2 µs a unit; wall (1.3 - 1.1) s: 100 µs.
	if off(g.rows["cpu_exec"], 2) || off(g.rows[total], 2) || off(g.wall, 100) {
		t.Errorf("go: cpu_exec %v, total %v, wall %v µs a unit; want 2, 2, 100", g.rows["cpu_exec"], g.rows[total], g.wall)
	}
	c, err := sideCost("c", runs[2:])
	if err != nil {
		t.Fatal(err)
	}
	if off(c.rows["[guest code]"], 2) || off(c.wall, 500) {
		t.Errorf("c: guest code %v, wall %v µs a unit; want 2, 500", c.rows["[guest code]"], c.wall)
	}
}

// off reports whether got is farther than 1e-9 from want.
func off(got, want float64) bool { return math.Abs(got-want) > 1e-9 }

func TestParseMarksRefusesBadMarks(t *testing.T) {
	for _, in := range []string{
		"1.0 QMARK start go 1",   // no units
		"1.0 QMARK start go 1 0", // zero units
		"1.0 QMARK end go 1",     // no start
		"x QMARK start go 1 10",  // no stamp
	} {
		if _, err := parseMarks(strings.NewReader(in)); err == nil {
			t.Errorf("parseMarks(%q) accepted it", in)
		}
	}
}
