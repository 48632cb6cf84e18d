package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/goverbs/goverbs/internal/cpuprofile"
	"github.com/goverbs/goverbs/internal/cstdio"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// The measuring goroutine stays on one thread: the syscall counters count
// the calling thread's syscalls.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(cpuprofile.Run(func() int {
		return cstdio.Run(func(out io.Writer) int { return run(os.Args[1:], out, os.Stderr) })
	}))
}

// countedCalls is how many calls of every row are counted before the timed
// ones (the median of the counts is reported).
const countedCalls = 3

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ibvcost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := fs.String("d", "rxe0", "RDMA `device` to measure")
	n := fs.Int("n", 100, "timed calls of every row")
	bigN := fs.Int("big-n", 5, "timed calls of MR registrations of 16 MiB and more")
	mrMax := fs.String("mr-max", "256MiB", "largest MR `size` registered (4KiB, 64KiB, 1MiB, 16MiB, 256MiB; larger rows are skipped)")
	gid := fs.Int("g", -1, "source GID `index` for the loopback address (-1: the port's first RoCE v2 IPv4 GID, else its first)")
	asJSON := fs.Bool("json", false, "print the report as JSON (the Report type) instead of a table")
	svg := fs.String("svg", "", "also draw the chart into `file` (SVG)")
	compare := fs.String("compare", "", "rdma-core's report (`files`: test/cost/verbs_cost's output; a comma-separated list is merged) to print beside goverbs'")
	labels := fs.String("labels", defaultSides.a+","+defaultSides.b, "the two sides' `names` in -compare's table and chart (e.g. new,base for two goverbs builds)")
	load := fs.String("load", "", "read goverbs' report from `files` (-json output; a comma-separated list is merged) instead of measuring")
	overhead := fs.Bool("overhead", true, "measure the uverbs.Recorder's overhead on the fast path")
	verbose := fs.Bool("v", false, "print each row's name on stderr as it starts")
	paths := fs.String("paths", "slow,fast,cm", "the `paths` measured: slow, and any of fast and cm (the slow path opens the device the others use)")
	cpu := fs.Int("cpu", -1, "pin the measuring thread to CPU `n` (sched_setaffinity; verbs_cost's -c); -1: not pinned")
	perf := fs.Bool("perf", true, "count syscalls with a perf counter on the raw_syscalls:sys_enter tracepoint (off by default under QEMU TCG: see doc)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ibvcost [flags]\n\nMeasures what goverbs' slow-path verbs and fast-path operations cost; see `go doc ./cmd/ibvcost`.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	perfWhy := ""
	if !*perf {
		perfWhy = "disabled (-perf=false)"
	} else if !flagSet(fs, "perf") && strings.Contains(cpuModel(), "TCG") {
		perfWhy = tcgPerf
	}
	if fs.NArg() > 0 || *n < 1 || *bigN < 1 {
		fs.Usage()
		return 2
	}
	maxMR, err := parseSize(*mrMax)
	if err != nil {
		fmt.Fprintf(stderr, "ibvcost: -mr-max: %v\n", err)
		return 2
	}
	p := plan{n: *n, bigN: *bigN, maxMR: maxMR, gid: *gid, overhead: *overhead, cpu: *cpu}
	if p.fast, p.cm, err = parsePaths(*paths); err != nil {
		fmt.Fprintf(stderr, "ibvcost: -paths: %v\n", err)
		return 2
	}

	status := 0
	var rep *Report
	if *load != "" {
		if rep, err = readReports(*load); err != nil {
			fmt.Fprintf(stderr, "ibvcost: %v\n", err)
			return 1
		}
	} else {
		var progress io.Writer
		if *verbose {
			progress = stderr
		}
		rep, err = measure(*dev, p, perfWhy, stderr, progress)
		if err != nil {
			fmt.Fprintf(stderr, "ibvcost: %v\n", err)
			if rep == nil {
				return 1
			}
			status = 1
		}
	}
	var rc *Report
	if *compare != "" {
		if rc, err = readReports(*compare); err != nil {
			fmt.Fprintf(stderr, "ibvcost: %v\n", err)
			return 1
		}
	}
	rep.Ratios = ratios(rep)
	names := defaultSides
	if flagSet(fs, "labels") {
		a, b, ok := strings.Cut(*labels, ",")
		if !ok || a == "" || b == "" || rc == nil {
			fmt.Fprintf(stderr, "ibvcost: -labels wants two names, a,b, and -compare\n")
			return 2
		}
		// The reports carry them too: the table's header and the chart's
		// legend name each side by its report's Tool.
		names, rep.Tool, rc.Tool = sides{a, b}, a, b
	}

	if *svg != "" {
		reps := []*Report{rep}
		if rc != nil {
			reps = append(reps, rc)
		}
		f, err := os.Create(*svg)
		if err == nil {
			err = writeSVG(f, reps...)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "ibvcost: %v\n", err)
			status = 1
		}
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	case rc != nil:
		err = writeCompare(stdout, rep, rc, names)
	default:
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ibvcost: %v\n", err)
		return 1
	}
	return status
}

// notMeasured is the reason of the rows of a path -paths left out (verbs_cost
// -p gives the same).
const notMeasured = "not measured (-paths)"

// plan is what a measurement runs: the flags' values.
type plan struct {
	n, bigN  int   // timed calls a row, and a row of MRs of 16 MiB and more
	maxMR    int64 // the largest MR registered
	gid      int   // the source GID's index, -1 to choose
	overhead bool  // measure the Recorder's overhead (after the fast path)
	fast, cm bool  // measure the fast path's rows, the CM's rows
	cpu      int   // pin the measuring thread to this CPU; -1: not pinned
}

// parsePaths reads -paths: a comma-separated list that names slow and any
// of fast and cm.
func parsePaths(s string) (fast, cm bool, err error) {
	slow := false
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "slow":
			slow = true
		case "fast":
			fast = true
		case "cm":
			cm = true
		default:
			return false, false, fmt.Errorf("unknown path %q (want slow, fast or cm)", p)
		}
	}
	if !slow {
		return false, false, fmt.Errorf("%q leaves out slow, whose rows open the device the others use", s)
	}
	return fast, cm, nil
}

// measure runs the workload on device name.
func measure(name string, p plan, noPerf string, stderr, progress io.Writer) (*Report, error) {
	n, bigN, maxMR := p.n, p.bigN, p.maxMR
	rep := &Report{Tool: "goverbs", Device: name, N: n, BigN: bigN, MaxMR: maxMR, Counted: countedCalls,
		Kernel: kernelRelease(), CPU: cpuModel(), Clocksource: readTrim("/sys/devices/system/clocksource/clocksource0/current_clocksource")}
	if p.cpu >= 0 {
		// The thread is the main goroutine's, locked in init: the pin
		// holds for every measurement, and the runtime's other threads
		// stay where the scheduler puts them.
		var set unix.CPUSet
		set.Set(p.cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("pinning the measuring thread to CPU %d: %w", p.cpu, err)
		}
		rep.Pinned = fmt.Sprintf("cpu %d", p.cpu)
	}
	b := newBench(rep, specs())
	b.counted = countedCalls
	b.verbose = progress
	dev, err := uverbs.DeviceByName(name)
	if err != nil {
		return nil, err
	}
	rep.Driver = dev.Driver.String()
	b.measureFloor()
	// The counting pass, then the timing pass (see bench).
	rep.Counter = "none: " + noPerf
	if noPerf == "" {
		if ctr, err := openSysCounter(); err != nil {
			rep.Counter = "none: " + err.Error()
		} else {
			rep.Counter = "perf:raw_syscalls:sys_enter"
			b.ctr = ctr
		}
	}
	b.countPass = true
	counting := p
	counting.overhead = false
	err = b.pass(dev, counting, stderr)
	if b.ctr != nil {
		b.ctr.Close()
		b.ctr = nil
	}
	b.countPass = false
	if err != nil {
		b.finish()
		return rep, err
	}
	err = b.pass(dev, p, stderr)
	b.finish()
	return rep, err
}

// pass runs the workload once.
func (b *bench) pass(dev uverbs.Device, p plan, stderr io.Writer) error {
	w := &workload{b: b, dev: dev, n: p.n, bigN: p.bigN, maxMR: p.maxMR, gidIndex: p.gid, overheadOn: p.overhead, stderr: stderr}
	defer func() {
		if w.pd != nil {
			w.pd.Close()
		}
		if w.ctx != nil {
			w.ctx.Close()
		}
	}()
	if err := w.slowPath(); err != nil {
		b.skipRest("", "not reached: "+err.Error())
		return err
	}
	if !p.fast {
		b.skipRest("fast", notMeasured)
	} else if why := w.fastPath(); why != "" {
		b.rep.FastPath = why
		b.skipRest("fast", "no fast path (see fast_path)")
	}
	if !p.cm {
		b.skipRest("cm", notMeasured)
	} else if err := w.cmRows(); err != nil {
		b.skipRest("cm", "not reached: "+err.Error())
	}
	return nil
}

// tcgPerf is why -perf is off by default under QEMU TCG.
const tcgPerf = "off under QEMU TCG unless -perf is given: registering the syscall tracepoint patches kernel text, " +
	"and a syscall entering on another vCPU meanwhile can hit a stale int3 (soft lockup, oops); " +
	"register it first from a single-threaded holder (test/cost/verbs_cost -H), then pass -perf"

// flagSet reports whether the command line set the named flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// cpuModel is /proc/cpuinfo's first "model name".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
