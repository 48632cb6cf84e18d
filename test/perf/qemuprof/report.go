package main

import (
	"fmt"
	"io"
	"math"
	"sort"
)

// cost is one side's host CPU (ns) and wall time (s) per unit, by row.
type cost struct {
	side   string
	how    string // "runs of U" or "U2 - U1"
	rounds int
	wall   float64 // µs per unit
	rows   map[string]float64
}

// sideCost turns a side's runs into per-unit figures: at one size the
// rounds' sums over their units; at two sizes the difference of the
// rounds' means over the difference of the sizes.
func sideCost(side string, runs []*run) (cost, error) {
	bySize := map[int][]*run{}
	for _, r := range runs {
		bySize[r.units] = append(bySize[r.units], r)
	}
	sizes := make([]int, 0, len(bySize))
	for u := range bySize {
		sizes = append(sizes, u)
	}
	sort.Ints(sizes)
	c := cost{side: side, rows: map[string]float64{}}
	mean := func(rs []*run) (wall float64, rows map[string]float64) {
		rows = map[string]float64{}
		for _, r := range rs {
			wall += r.t1 - r.t0
			for k, v := range r.ns {
				rows[k] += v
			}
			rows[total] += r.total
		}
		n := float64(len(rs))
		for k := range rows {
			rows[k] /= n
		}
		return wall / n, rows
	}
	switch len(sizes) {
	case 1:
		u := float64(sizes[0])
		w, rows := mean(bySize[sizes[0]])
		c.how, c.rounds, c.wall = fmt.Sprintf("runs of %d", sizes[0]), len(bySize[sizes[0]]), w*1e6/u
		for k, v := range rows {
			c.rows[k] = v / 1e3 / u
		}
	case 2:
		u1, u2 := sizes[0], sizes[1]
		w1, r1 := mean(bySize[u1])
		w2, r2 := mean(bySize[u2])
		d := float64(u2 - u1)
		c.how, c.rounds = fmt.Sprintf("%d - %d", u2, u1), min(len(bySize[u1]), len(bySize[u2]))
		c.wall = (w2 - w1) * 1e6 / d
		for k := range union(r1, r2) {
			c.rows[k] = (r2[k] - r1[k]) / 1e3 / d
		}
	default:
		return c, fmt.Errorf("side %s ran at %d sizes: one or two", side, len(sizes))
	}
	return c, nil
}

const total = "(all of the emulator)"

func union(a, b map[string]float64) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// printReport prints each side's wall and host CPU time per unit, then the
// rows by the size of their difference from the first side (the sides in
// the order of their first run).
func printReport(w io.Writer, runs []*run, top int) error {
	var sides []string
	bySide := map[string][]*run{}
	for _, r := range runs {
		if bySide[r.side] == nil {
			sides = append(sides, r.side)
		}
		bySide[r.side] = append(bySide[r.side], r)
	}
	costs := make([]cost, len(sides))
	keys := map[string]bool{}
	for i, s := range sides {
		c, err := sideCost(s, bySide[s])
		if err != nil {
			return err
		}
		costs[i] = c
		for k := range c.rows {
			keys[k] = true
		}
	}
	fmt.Fprintln(w, "per unit of each side's work: wall time in the guest's runs and the emulator's host CPU (all its threads), µs")
	for _, c := range costs {
		fmt.Fprintf(w, "  %-8s %-12s %2d rounds  wall %9.3f  host CPU %9.3f\n", c.side, c.how, c.rounds, c.wall, c.rows[total])
	}
	rows := make([]string, 0, len(keys))
	for k := range keys {
		if k != total {
			rows = append(rows, k)
		}
	}
	diff := func(k string) float64 {
		if len(costs) < 2 {
			return costs[0].rows[k]
		}
		return costs[len(costs)-1].rows[k] - costs[0].rows[k]
	}
	sort.Slice(rows, func(i, j int) bool {
		di, dj := math.Abs(diff(rows[i])), math.Abs(diff(rows[j]))
		if di != dj {
			return di > dj
		}
		return rows[i] < rows[j]
	})
	fmt.Fprintf(w, "\n%-48s", "host CPU µs per unit")
	for _, c := range costs {
		fmt.Fprintf(w, " %10s", c.side)
	}
	if len(costs) > 1 {
		fmt.Fprintf(w, " %10s", costs[len(costs)-1].side+"-"+costs[0].side)
	}
	fmt.Fprintln(w)
	for i, k := range append([]string{total}, rows...) {
		if i > top {
			break
		}
		name := k
		if len(name) > 48 {
			name = name[:47] + "~"
		}
		fmt.Fprintf(w, "%-48s", name)
		for _, c := range costs {
			fmt.Fprintf(w, " %10.3f", c.rows[k])
		}
		if len(costs) > 1 {
			fmt.Fprintf(w, " %+10.3f", diff(k))
		}
		fmt.Fprintln(w)
	}
	return nil
}
