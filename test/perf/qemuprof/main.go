// Command qemuprof cuts a host profile of the rig's emulator into the runs
// of the guest programs it was running, for test/perf/qemuprof.sh.
//
//	qemuprof stamp < console > lines
//	perf script -F tid,time,period,ip,sym,dso | qemuprof report [-by sym|dso|thread] [-top N] LINES
//
// stamp copies its input, each line prefixed with the host's
// CLOCK_MONOTONIC in seconds: the clock `perf record -k CLOCK_MONOTONIC`
// stamps its samples with, so that a guest's console line and a sample of
// the emulator can be set on one time line.
//
// report reads the stamped console and its marks,
//
//	QMARK start LABEL ROUND UNITS
//	QMARK end LABEL ROUND
//
// where LABEL names a program (a side: "go", "c", ...) and UNITS the work
// its run did (iterations, calls). Each sample of `perf script` between a
// run's marks is the emulator's host CPU time (the sample's period, in ns
// of cpu-clock) spent for that run, on any of its threads. A side run at
// one size is reported per unit, its rounds summed; a side run at two sizes
// (slowloop's N1 and N2) per unit of the difference, so that what a
// process pays once (exec, the runtime's start, the device's open) cancels.
// The rows are the host CPU time per unit by the key chosen (the
// emulator's function, the guest's translated code as one row "[guest
// code]"; its shared object; or its thread), largest difference from the
// first side first.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "stamp":
		err = stamp(os.Stdin, os.Stdout)
	case "report":
		err = reportCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "qemuprof:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: qemuprof stamp < console > lines\n"+
		"       perf script -F tid,time,period,ip,sym,dso | qemuprof report [-by sym|dso|thread] [-top N] LINES")
	os.Exit(2)
}

// stamp prefixes each line of r with CLOCK_MONOTONIC's seconds, carriage
// returns dropped, and flushes each line: the stamp must be the line's
// arrival, not a buffer's.
func stamp(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ts unix.Timespec
	for sc.Scan() {
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return err
		}
		line := strings.ReplaceAll(sc.Text(), "\r", "")
		if _, err := fmt.Fprintf(w, "%d.%06d %s\n", ts.Sec, ts.Nsec/1000, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	by := fs.String("by", "sym", "row key: sym, dso or thread")
	top := fs.Int("top", 40, "rows to print")
	fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	runs, err := parseMarks(f)
	f.Close()
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("no QMARK runs in %s", fs.Arg(0))
	}
	if err := addSamples(os.Stdin, runs, *by); err != nil {
		return err
	}
	return printReport(os.Stdout, runs, *top)
}
