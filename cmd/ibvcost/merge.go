package main

import (
	"fmt"
	"slices"
	"strings"
)

// readReports reads a comma-separated list of reports of one tool and
// merges them (see merge).
func readReports(list string) (*Report, error) {
	var reps []*Report
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		r, err := readReport(p)
		if err != nil {
			return nil, err
		}
		reps = append(reps, r)
	}
	if len(reps) == 0 {
		return nil, fmt.Errorf("no report in %q", list)
	}
	return merge(reps)
}

// merge combines runs of the same tool and workload into one report. Under
// emulation on a shared host a whole run can be slowed by its neighbours,
// so each row's median is the median of the runs' medians (likewise p99
// and mean; min is the least), and its syscalls those of the first run
// that counted them. A row skipped in any run keeps the first reason.
// Overhead is the least per op over the runs. Runs counts the runs merged.
// Clocksource and Pinned name every value the runs had (perRun).
func merge(reps []*Report) (*Report, error) {
	if len(reps) == 1 {
		if reps[0].Runs == 0 {
			reps[0].Runs = 1
		}
		return reps[0], nil
	}
	out := *reps[0]
	out.Rows = nil
	out.Overhead = nil
	out.Runs = 0
	var floors []int64
	for _, r := range reps {
		if r.Tool != out.Tool || r.Device != out.Device {
			return nil, fmt.Errorf("cannot merge %s on %s with %s on %s", r.Tool, r.Device, out.Tool, out.Device)
		}
		out.Runs += max(r.Runs, 1)
		floors = append(floors, r.FloorNS)
		if r.FastPath != "" && out.FastPath == "" {
			out.FastPath = r.FastPath
		}
	}
	out.FloorNS = medianI(floors)
	out.Clocksource = perRun(reps, func(r *Report) string { return r.Clocksource }, "unknown")
	out.Pinned = perRun(reps, func(r *Report) string { return r.Pinned }, "unpinned")
	for _, r0 := range reps[0].Rows {
		row := r0
		var med, p99, mean []int64
		row.N = 0
		for _, r := range reps {
			x := r.row(r0.Name)
			if x == nil || x.Skipped != "" {
				if row.Skipped == "" {
					row.Skipped = "skipped in a run"
					if x != nil {
						row.Skipped = x.Skipped
					}
				}
				continue
			}
			med, p99, mean = append(med, x.MedianNS), append(p99, x.P99NS), append(mean, x.MeanNS)
			row.MinNS = min(row.MinNS, x.MinNS)
			row.N += x.N
			if row.Syscalls == nil && x.Syscalls != nil {
				row.Syscalls, row.Transport = x.Syscalls, x.Transport
			}
			if row.Recorder == nil {
				row.Recorder = x.Recorder
			}
		}
		if row.Skipped != "" {
			row.N, row.MedianNS, row.P99NS, row.MinNS, row.MeanNS, row.PerSecond = 0, 0, 0, 0, 0, 0
		} else {
			row.MedianNS, row.P99NS, row.MeanNS = medianI(med), medianI(p99), medianI(mean)
			row.FastestRunNS = slices.Min(med)
			row.RunMediansNS = med
			if lo := row.FastestRunNS; lo > 0 {
				row.Spread = float64(slices.Max(med)) / float64(lo)
			}
			if row.PerSecond > 0 && row.MeanNS > 0 {
				row.PerSecond = 1e9 / float64(row.MeanNS)
			}
		}
		out.Rows = append(out.Rows, row)
	}
	for _, o := range reps[0].Overhead {
		best := o
		for _, r := range reps[1:] {
			for _, x := range r.Overhead {
				if x.Op == o.Op {
					best.OffNS, best.OnNS = min(best.OffNS, x.OffNS), min(best.OnNS, x.OnNS)
				}
			}
		}
		out.Overhead = append(out.Overhead, best)
	}
	return &out, nil
}

// medianI is the lower median (nearest rank) of v.
func medianI(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[rank(len(s), 0.5)]
}

// perRun is the runs' value of a field (get), or, when it differs between
// runs, each value with its count of runs in order of first use, an empty
// one named none: "tsc (1 run), hpet (4 runs)". A table built across a
// change says so: a TCG guest's kernel can mark the TSC unstable and switch
// to the HPET minutes after boot (a clock read then costs a syscall), and
// runs merged from several commands may differ in their pinning.
func perRun(reps []*Report, get func(*Report) string, none string) string {
	var names []string
	count := map[string]int{}
	for _, r := range reps {
		v := get(r)
		if count[v] == 0 {
			names = append(names, v)
		}
		count[v]++
	}
	if len(names) == 1 {
		return names[0]
	}
	parts := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			n = none
		}
		parts[i] = fmt.Sprintf("%s (%d run", n, count[names[i]])
		if count[names[i]] > 1 {
			parts[i] += "s"
		}
		parts[i] += ")"
	}
	return strings.Join(parts, ", ")
}
