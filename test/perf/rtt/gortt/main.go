// Command gortt is an rsocket ping-pong with every round trip timed, the
// twin of crtt.c beside it (librdmacm's rsocket): the same exchange, the
// same clock (three CLOCK_MONOTONIC reads a round trip, through the vDSO, a
// syscall on a guest whose clocksource is hpet), the same output line, so that
// test/perf/rtt.sh can print the two distributions side by side. A
// blocked Read or Write spins in CQ.Wait up to its cap (1 ms by default)
// before it parks; crtt spins without end, as rstream's default mode does.
//
//	gortt ADDR:PORT server     # serve
//	gortt ADDR:PORT [N [SIZE]] # client: N round trips (5000) of SIZE bytes (64)
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/rsocket"
	"github.com/goverbs/goverbs/test/perf/internal/dbtime"
)

// epoch is mono's zero.
var epoch = time.Now()

// mono reads CLOCK_MONOTONIC once, through the vDSO as crtt.c's libc call
// does (time.Since of a time with a monotonic reading reads only that
// clock; under an hpet clocksource the vDSO makes the syscall itself).
// unix.ClockGettime would be a Syscall, which marks the goroutine's P as in
// a syscall: one that outlasts sysmon's 20 µs tick (a clock read under TCG
// can) lets sysmon hand the P off to another thread and resets sysmon to
// its shortest sleep, a cost of the probe that crtt does not pay; and on a
// guest with a vDSO clock it would be a kernel entry that crtt's is not.
func mono() int64 { return int64(time.Since(epoch)) }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gortt ADDR:PORT server | gortt ADDR:PORT [N [SIZE]]")
		os.Exit(2)
	}
	addr := os.Args[1]
	server := len(os.Args) > 2 && os.Args[2] == "server"
	n, size := 5000, 64
	if !server && len(os.Args) > 2 {
		n, _ = strconv.Atoi(os.Args[2])
	}
	if !server && len(os.Args) > 3 {
		size, _ = strconv.Atoi(os.Args[3])
	}
	if n < 1 || size < 1 {
		os.Exit(2)
	}
	// rstream's buffers (-B 512 KiB, doubled) and inline size.
	cfg := rsocket.Config{SendBuffer: 1 << 20, RecvBuffer: 1 << 20, Inline: 64}
	buf := make([]byte, size)
	if server {
		serve(addr, cfg, buf)
		return
	}
	d := rsocket.Dialer{Config: cfg}
	var c net.Conn
	var err error
	for i := 0; ; i++ { // the server may not listen yet: retry for 10 s
		if c, err = d.DialContext(context.Background(), "tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gortt:", err)
		os.Exit(1)
	}
	ts := make([]int64, n)
	ws := make([]int64, n) // each round trip's Write
	var sum int64
	warm(os.Getenv("RTT_WARM_US"))
	dbtime.Reset()
	r0 := rusage()
	t0 := mono()
	for i := range ts {
		st := mono()
		if _, err := c.Write(buf); err != nil {
			fmt.Fprintln(os.Stderr, "gortt:", err)
			os.Exit(1)
		}
		ws[i] = mono() - st
		if err := readFull(c, buf); err != nil {
			fmt.Fprintln(os.Stderr, "gortt:", err)
			os.Exit(1)
		}
		ts[i] = mono() - st
		sum += ts[i]
	}
	wall := mono() - t0
	dbtime.Report(os.Stdout, "goverbs  ")
	cpu(os.Stdout, "goverbs  ", r0, n)
	c.Close()
	split("goverbs  ", ts, ws)
	tenths("goverbs  ", ts)
	slices.Sort(ts)
	over := 0
	for _, t := range ts {
		if t > 100_000 {
			over++
		}
	}
	us := func(v int64) float64 { return float64(v) / 1e3 }
	fmt.Printf("goverbs   n %d mean %.1f us (wall %.1f) min %.1f p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f over100us %d\n",
		n, us(sum)/float64(n), us(wall)/float64(n), us(ts[0]), us(ts[n/10]), us(ts[n/2]),
		us(ts[n*9/10]), us(ts[n*99/100]), us(ts[n-1]), over)
}

// warm spins for us microseconds (RTT_WARM_US; crtt.c reads it too)
// between the connect and the first timed round trip: what the run's
// start costs apart from the round trips themselves.
func warm(us string) {
	n, _ := strconv.Atoi(us)
	for end := mono() + int64(n)*1e3; mono() < end; {
	}
}

// tenths prints, for each tenth of the run in order, how many round trips
// took over 100 µs and the tenth's time (ms): whether a run's slow round
// trips come at its start or throughout. crtt.c prints the same line.
// split prints the medians and means of each round trip's two parts: the
// Write (the post and its doorbell) and the rest (the wait for the reply
// and its Read), as crtt.c does: which part a gap is in.
func split(label string, ts, ws []int64) {
	n := len(ts)
	rs := make([]int64, n)
	var wsum, rsum int64
	for i := range ts {
		rs[i] = ts[i] - ws[i]
		wsum += ws[i]
		rsum += rs[i]
	}
	w, r := slices.Clone(ws), rs
	slices.Sort(w)
	slices.Sort(r)
	fmt.Printf("%s split write p50 %.2f mean %.2f read p50 %.2f mean %.2f us\n", label,
		float64(w[n/2])/1e3, float64(wsum)/1e3/float64(n), float64(r[n/2])/1e3, float64(rsum)/1e3/float64(n))
}

func tenths(label string, ts []int64) {
	var over [10]int
	var ms [10]float64
	for i, t := range ts {
		k := i * 10 / len(ts)
		if t > 100_000 {
			over[k]++
		}
		ms[k] += float64(t) / 1e6
	}
	fmt.Printf("%s tenths over100us", label)
	for _, o := range over {
		fmt.Printf(" %d", o)
	}
	fmt.Printf(" ms")
	for _, m := range ms {
		fmt.Printf(" %.1f", m)
	}
	fmt.Println()
}

// serve answers one connection's messages until the client closes it.
func serve(addr string, cfg rsocket.Config, buf []byte) {
	lc := rsocket.ListenConfig{Config: cfg, ReuseAddr: true}
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gortt:", err)
		os.Exit(1)
	}
	defer l.Close()
	c, err := l.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gortt:", err)
		os.Exit(1)
	}
	defer c.Close()
	r0 := rusage()
	served := 0
	for {
		if err := readFull(c, buf); err != nil {
			break
		}
		if _, err := c.Write(buf); err != nil {
			break
		}
		served++
	}
	cpu(os.Stderr, "goverbs   srv", r0, served) // from the accept to the client's close
}

// rusage is the process's resource usage, all its threads.
func rusage() syscall.Rusage {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r) //nolint:errcheck // RUSAGE_SELF cannot fail
	return r
}

// cpu prints the process's CPU time (all its threads) and context switches
// since r0, per round trip, as crtt.c does: where a side's time goes, user
// code or kernel.
func cpu(w *os.File, who string, r0 syscall.Rusage, n int) {
	r := rusage()
	us := func(a, b syscall.Timeval) float64 { return float64(a.Nano()-b.Nano()) / 1e3 / float64(max(n, 1)) }
	fmt.Fprintf(w, "%s cpu n %d user %.1f sys %.1f us/rt nvcsw %d nivcsw %d\n", who, n,
		us(r.Utime, r0.Utime), us(r.Stime, r0.Stime), r.Nvcsw-r0.Nvcsw, r.Nivcsw-r0.Nivcsw)
}

// readFull reads len(b) bytes, as rrecv's loop in crtt.c does (io.ReadFull
// would convert the net.Conn to an io.Reader: a run-time itab lookup a
// call).
func readFull(c net.Conn, b []byte) error {
	for n := 0; n < len(b); {
		k, err := c.Read(b[n:])
		if err != nil {
			return err
		}
		n += k
	}
	return nil
}
