package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// run is one program's run between its marks, and the emulator's host CPU
// time (ns) sampled in it, by row key.
type run struct {
	side   string
	round  string
	units  int
	t0, t1 float64 // host CLOCK_MONOTONIC seconds
	ns     map[string]float64
	total  float64
}

// parseMarks reads the stamped console's QMARK lines into runs, in time
// order.
func parseMarks(r io.Reader) ([]*run, error) {
	open := map[string]*run{}
	var runs []*run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[1] != "QMARK" {
			continue
		}
		t, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("mark %q: %v", sc.Text(), err)
		}
		key := f[3] + " " + f[4]
		switch f[2] {
		case "start":
			if len(f) < 6 {
				return nil, fmt.Errorf("mark %q: no units", sc.Text())
			}
			u, err := strconv.Atoi(f[5])
			if err != nil || u < 1 {
				return nil, fmt.Errorf("mark %q: units must be a positive integer", sc.Text())
			}
			open[key] = &run{side: f[3], round: f[4], units: u, t0: t, ns: map[string]float64{}}
		case "end":
			r := open[key]
			if r == nil {
				return nil, fmt.Errorf("mark %q: no start", sc.Text())
			}
			delete(open, key)
			r.t1 = t
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].t0 < runs[j].t0 })
	return runs, sc.Err()
}

// addSamples adds each `perf script -F tid,time,period,ip,sym,dso` line to
// the run it falls in, under its row key.
func addSamples(r io.Reader, runs []*run, by string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		i := sort.Search(len(runs), func(i int) bool { return runs[i].t1 >= s.t })
		if i == len(runs) || s.t < runs[i].t0 {
			continue // between runs
		}
		k := s.key(by)
		runs[i].ns[k] += s.period
		runs[i].total += s.period
	}
	return sc.Err()
}

type sample struct {
	tid      string
	t        float64
	period   float64
	sym, dso string
}

// parseSample reads "TID TIME: PERIOD IP SYM (DSO)"; SYM may hold spaces
// and may be missing.
func parseSample(line string) (sample, bool) {
	var s sample
	f := strings.Fields(line)
	if len(f) < 5 || !strings.HasSuffix(f[1], ":") {
		return s, false
	}
	t, err1 := strconv.ParseFloat(strings.TrimSuffix(f[1], ":"), 64)
	p, err2 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || err2 != nil {
		return s, false
	}
	s.tid, s.t, s.period = f[0], t, p
	rest := strings.Join(f[4:], " ")
	if i := strings.LastIndex(rest, " ("); i >= 0 && strings.HasSuffix(rest, ")") {
		s.sym, s.dso = rest[:i], rest[i+2:len(rest)-1]
	} else if strings.HasPrefix(rest, "(") {
		s.dso = strings.Trim(rest, "()")
	} else {
		s.sym = rest
	}
	return s, true
}

// key is the sample's row: translated guest code (perf finds no object
// for it: "[unknown]" in an anonymous mapping, or QEMU's perf map) is one
// row whatever its address.
func (s sample) key(by string) string {
	base := s.dso[strings.LastIndex(s.dso, "/")+1:]
	guest := strings.HasPrefix(base, "perf-") || base == "[unknown]" || strings.HasPrefix(base, "[JIT]") || base == ""
	switch by {
	case "thread":
		return "thread " + s.tid
	case "dso":
		if guest {
			return "[guest code]"
		}
		return base
	}
	if guest {
		return "[guest code]"
	}
	if s.sym == "" || s.sym == "[unknown]" {
		return base + " (no symbol)"
	}
	return s.sym
}
