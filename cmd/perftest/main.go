package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/goverbs/goverbs/internal/cpuprofile"
	"github.com/goverbs/goverbs/internal/cstdio"
	"github.com/goverbs/goverbs/internal/getopt"
)

func main() { os.Exit(program(os.Args)) }

// program is the whole program (the rig tests run it too, as it ships):
// one P, stdout buffered as C's stdio, an optional CPU profile.
func program(args []string) int {
	oneP()
	return cpuprofile.Run(func() int {
		return cstdio.Run(func(out io.Writer) int { return run(args, out, os.Stderr) })
	})
}

// oneP runs the program on one P (GOMAXPROCS 1) unless the environment
// sets GOMAXPROCS: perftest is one thread, and its loops spin on one
// goroutine. With a second P, the Go scheduler's idle P lets the runtime
// wake and park further threads around the loop's syscalls, and on the
// rig's 2 vCPUs (two spinning sides and rxe's kernel work) those threads
// take CPU from the spinners: on a loaded host send_lat's t_typical went
// from 91 µs (GOMAXPROCS 1) to 3-4 ms (2), with 1.2 futex and 1.2
// epoll_pwait calls and 1.7 voluntary context switches per iteration
// (test/perf/counts.sh). Nothing may wait on a Go timer while a loop spins:
// on one P it fires only when the runtime preempts the loop, and never
// while the loop sits in a raw syscall (duration.go's clock).
func oneP() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// verb is what a test measures, as perftest's testsStr names it.
type verb int

const (
	verbSend verb = iota
	verbWrite
	verbRead
	verbAtomic
)

func (v verb) String() string {
	return [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[v]
}

// kind is latency or bandwidth.
type kind int

const (
	lat kind = iota
	bw
)

// test is one of perftest's programs.
type test struct {
	name string // "send_lat": ib_send_lat without its prefix
	verb verb
	kind kind
}

var tests = []test{
	{"send_lat", verbSend, lat}, {"write_lat", verbWrite, lat}, {"read_lat", verbRead, lat},
	{"send_bw", verbSend, bw}, {"write_bw", verbWrite, bw}, {"read_bw", verbRead, bw},
	{"atomic_lat", verbAtomic, lat}, {"atomic_bw", verbAtomic, bw},
}

// connType is -c.
type connType int

const (
	connRC connType = iota
	connUC
	connUD
)

func (c connType) String() string { return [...]string{"RC", "UC", "UD"}[c] }

// config is the command line with perftest's defaults and dependencies
// applied.
type config struct {
	test
	port        int    // -p: TCP port of the exchange
	ibDev       string // -d
	ibPort      int    // -i
	size        int    // -s
	sizeSet     bool
	all         bool // -a: sizes 2 .. 2^23
	iters       int  // -n
	duration    int  // -D: seconds (0: iterations)
	margin      int  // -f: seconds at each end of a -D run not counted (-1: duration/4)
	gidx        int  // -x (-1: LID routing)
	mtu         int  // -m in bytes (0: the port's active MTU)
	numQP       int  // -q
	txDepth     int  // -t
	rxDepth     int  // -r
	postList    int  // -l
	cqMod       int  // -Q
	cqModSet    bool
	conn        connType // -c
	events      bool     // -e
	gbits       bool     // --report_gbits
	inline      int      // -I (-1: the default for the device)
	outReads    int      // -o (0: the device's maximum)
	noPeak      bool     // -N
	atomicCAS   bool     // -A CMP_AND_SWAP (default FETCH_AND_ADD)
	sl          int      // -S
	server      string   // the server to connect to ("": be the server)
	rdmaCM      bool     // -R: the test's QPs connected through rdma_cm (implies commCM)
	commCM      bool     // -z: the exchange over an rdma_cm connection instead of TCP
	sourceIP    string   // --source_ip: the rdma_cm source (client) or bound address (server)
	cpuFreqWarn bool     // -F
	notes       []string // perftest's remarks on the options, printed first
}

// options is perftest's getopt_long table, as far as goverbs reads it;
// long-only options get runes above 0x1000.
const (
	optReportGbits = 0x1000 + iota
	optRunInfinitely
	optUseSRQ
	optOutput
	optDontXchg
	optSourceIP
)

var options = []getopt.Option{
	{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
	{Short: 'm', Long: "mtu", Arg: true}, {Short: 's', Long: "size", Arg: true}, {Short: 'n', Long: "iters", Arg: true},
	{Short: 't', Long: "tx-depth", Arg: true}, {Short: 'u', Long: "qp-timeout", Arg: true}, {Short: 'S', Long: "sl", Arg: true},
	{Short: 'x', Long: "gid-index", Arg: true}, {Short: 'a', Long: "all"}, {Short: 'F', Long: "CPU-freq"},
	{Short: 'c', Long: "connection", Arg: true}, {Short: 'q', Long: "qp", Arg: true}, {Short: 'e', Long: "events"},
	{Short: 'I', Long: "inline_size", Arg: true}, {Short: 'o', Long: "outs", Arg: true}, {Short: 'R', Long: "rdma_cm"},
	{Short: 'z', Long: "comm_rdma_cm"}, {Short: 'h', Long: "help"}, {Short: 'r', Long: "rx-depth", Arg: true},
	{Short: 'b', Long: "bidirectional"}, {Short: 'Q', Long: "cq-mod", Arg: true}, {Short: 'N', Long: "noPeak"},
	{Short: 'V', Long: "version"}, {Short: 'A', Long: "atomic_type", Arg: true}, {Short: 'l', Long: "post_list", Arg: true},
	{Short: 'D', Long: "duration", Arg: true}, {Short: 'f', Long: "margin", Arg: true}, {Short: 'C', Long: "report-cycles"}, {Short: 'H', Long: "report-histogrm"},
	{Short: 'U', Long: "report-unsorted"}, {Short: 'g', Long: "mcg"}, {Short: 'O', Long: "dualport"},
	{Short: 'X', Long: "vector", Arg: true}, {Short: 'T', Long: "tos", Arg: true}, {Short: optReportGbits, Long: "report_gbits"},
	{Short: optRunInfinitely, Long: "run_infinitely"}, {Short: optUseSRQ, Long: "use-srq"}, {Short: optOutput, Long: "output", Arg: true},
	{Short: optDontXchg, Long: "dont_xchg_versions"}, {Short: optSourceIP, Long: "source_ip", Arg: true},
}

// unsupported options are recognised and refused, never silently ignored.
var unsupported = map[rune]string{
	'b': "-b (bidirectional) is not supported by goverbs' perftest",
	'C': "-C (report cycles) is not supported: goverbs measures in nanoseconds",
	'H': "-H (histogram) is not supported by goverbs' perftest", 'U': "-U (unsorted) is not supported by goverbs' perftest",
	'g': "-g (multicast) is not supported by goverbs' perftest", 'O': "-O (dual port) is not supported by goverbs' perftest",
	'X': "-X (completion vector) is not supported by goverbs' perftest", 'T': "-T (ToS, rdma_cm only) is not supported by goverbs' perftest",
	optRunInfinitely: "--run_infinitely is not supported by goverbs' perftest", optUseSRQ: "--use-srq is not supported by goverbs' perftest",
	optOutput: "--output is not supported by goverbs' perftest", optDontXchg: "--dont_xchg_versions is not supported by goverbs' perftest",
}

// pick finds the test from the program's name (ib_send_lat, or any name
// ending in send_lat) or, failing that, its first argument.
func pick(args []string) (test, []string, error) {
	base := filepath.Base(args[0])
	for _, t := range tests {
		if strings.HasSuffix(base, t.name) {
			return t, args[1:], nil
		}
	}
	if len(args) > 1 {
		name := strings.TrimPrefix(args[1], "ib_")
		for _, t := range tests {
			if name == t.name {
				return t, args[2:], nil
			}
		}
	}
	var names []string
	for _, t := range tests {
		names = append(names, t.name)
	}
	return test{}, nil, failf("usage: %s TEST [options] [server]\n  TEST: %s (or run it as ib_TEST)", base, strings.Join(names, ", "))
}

func run(args []string, stdout, stderr io.Writer) int {
	t, rest, err := pick(args)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	c, err := parse(t, rest)
	if errors.Is(err, errExit) {
		fmt.Fprintf(stdout, "Version: %s (goverbs)\n", ptVersion)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, " %v\n", err)
		return 1
	}
	if err := perftest(c, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, " %v\n", err)
		return 1
	}
	return 0
}

// errExit is -V: print the version and stop.
var errExit = errors.New("exit")

func parse(t test, args []string) (config, error) {
	c := config{test: t, port: 18515, ibPort: 1, gidx: -1, numQP: 1, postList: 1, inline: -1, cqMod: 100, margin: -1}
	c.size = 2
	c.iters = 1000
	c.txDepth = 1
	c.rxDepth = 1
	if t.kind == bw {
		c.size = 65536
		c.txDepth = 128
		if t.verb == verbWrite {
			c.iters = 5000
		}
	}
	if t.verb == verbSend {
		c.rxDepth = 512
	}
	if t.verb == verbAtomic {
		c.size = 8
	}
	p, err := getopt.Parse(args, options, false) // perftest's own parser never read POSIXLY_CORRECT
	if err != nil {
		return c, err
	}
	txSet, rxSet := false, false
	for _, o := range p.Options {
		if msg, ok := unsupported[o.Short]; ok {
			return c, failure(msg)
		}
		num := func(lo, hi int64, what string) (int, error) {
			v, err := getopt.Number(o.Arg)
			if err != nil || v < lo || v > hi {
				return 0, failf("%s should be between %d and %d (got %q)", what, lo, hi, o.Arg)
			}
			return int(v), nil
		}
		switch o.Short {
		case 'p':
			c.port, err = num(1, 65535, "Port")
		case 'd':
			c.ibDev = o.Arg
		case 'i':
			c.ibPort, err = num(1, 255, "IB port")
		case 'm':
			c.mtu, err = num(256, 4096, "MTU")
			if err == nil && c.mtu&(c.mtu-1) != 0 {
				err = failf("invalid MTU %d: 256, 512, 1024, 2048 or 4096", c.mtu)
			}
		case 's':
			c.size, err = num(1, 1<<31-1, "Message size")
			c.sizeSet = true
		case 'n':
			c.iters, err = num(5, 100000000, "Iteration num")
		case 't':
			c.txDepth, err = num(1, 15000, "Tx depth")
			txSet = true
		case 'r':
			c.rxDepth, err = num(1, 16384, "Rx depth")
			rxSet = true
		case 'u':
			_, err = num(0, 31, "QP timeout")
		case 'S':
			c.sl, err = num(0, 15, "SL")
		case optSourceIP:
			c.sourceIP = o.Arg
		case 'R':
			c.rdmaCM, c.commCM = true, true
		case 'z':
			c.commCM = true
		case 'x':
			c.gidx, err = num(0, 64, "Gid index")
		case 'a':
			c.all = true
		case 'F':
			c.cpuFreqWarn = true
		case 'c':
			switch o.Arg {
			case "RC":
				c.conn = connRC
			case "UC":
				c.conn = connUC
			case "UD":
				c.conn = connUD
			default:
				err = failf("connection type %q: goverbs' perftest runs RC, UC and UD", o.Arg)
			}
		case 'q':
			c.numQP, err = num(1, 16384, "Num of QPs")
		case 'e':
			c.events = true
		case 'I':
			c.inline, err = num(0, 912, "Max inline")
		case 'o':
			c.outReads, err = num(1, 1024, "Outstanding reads")
		case 'h':
			return c, failure(usage(t))
		case 'Q':
			c.cqMod, err = num(1, 1024, "CQ moderation")
			c.cqModSet = true
		case 'N':
			c.noPeak = true
		case 'V':
			return c, errExit
		case 'A':
			switch o.Arg {
			case "CMP_AND_SWAP":
				c.atomicCAS = true
			case "FETCH_AND_ADD":
			default:
				err = failf("invalid atomic type %q: CMP_AND_SWAP or FETCH_AND_ADD", o.Arg)
			}
		case 'l':
			c.postList, err = num(1, 1<<20, "Post list")
		case 'D':
			c.duration, err = num(1, 1<<20, "Duration")
		case 'f':
			c.margin, err = num(0, 1<<20, "Margin")
		case optReportGbits:
			c.gbits = true
		}
		if err != nil {
			return c, err
		}
	}
	switch len(p.Operands) {
	case 0:
	case 1:
		c.server = p.Operands[0]
	default:
		return c, failf("more than one server name: %q", p.Operands)
	}
	return c, c.dependencies(txSet, rxSet)
}

// dependencies is perftest's force_dependecies for what goverbs runs.
func (c *config) dependencies(txSet, rxSet bool) error {
	_ = rxSet
	if c.verb != verbSend && c.conn == connUD {
		return failf("%s does not run on UD QPs", c.verb)
	}
	if (c.verb == verbRead || c.verb == verbAtomic) && c.conn == connUC {
		return failf("%s does not run on UC QPs", c.verb)
	}
	if c.rdmaCM && c.conn == connUC {
		return failure(" UC is not supported in librdmacm") // perftest's words
	}
	if c.rdmaCM && c.conn == connUD {
		return failure("-R with UD (the QPN and AH from the CM's UD parameters) is not supported by goverbs' perftest yet")
	}
	if c.kind == lat && c.postList > 1 {
		return failure("post list is for bandwidth tests")
	}
	if c.verb == verbWrite && c.events {
		return failure("Events feature not available on WRITE verb")
	}
	if c.duration > 0 {
		// perftest's words for what it refuses in duration mode.
		if c.events {
			return failure("Duration mode doesn't work with events.")
		}
		if c.all {
			return failure("Duration mode currently doesn't support running on all sizes.")
		}
		if c.margin < 0 {
			c.margin = c.duration / 4
		}
		if c.duration <= 2*c.margin {
			return failure("please check that DURATION > 2*MARGIN")
		}
		c.noPeak = true
	}
	if c.verb == verbAtomic && c.size != 8 {
		return failure("message size must be 8 bytes for atomic tests")
	}
	if c.duration == 0 {
		c.txDepth = min(c.txDepth, c.iters)
		if c.verb == verbSend {
			c.rxDepth = min(c.rxDepth, c.iters)
		}
	}
	if c.postList > 1 && c.kind == bw {
		if c.duration == 0 && c.iters%c.postList != 0 {
			return failure("Number of iterations must be a multiple of post list size")
		}
		if !c.cqModSet {
			c.notes = append(c.notes, "Post List requested - CQ moderation will be the size of the post list")
			c.cqMod = c.postList
		} else if c.postList%c.cqMod != 0 {
			return failure("post list size must be a multiple of CQ moderation")
		}
		if c.txDepth < c.postList {
			if txSet {
				return failure("tx depth must be at least the post list")
			}
			c.txDepth = c.postList
		}
	}
	if c.size > 8192 && c.conn != connUD && !c.all && !c.events && !c.cqModSet {
		c.cqMod = 1
	}
	c.cqMod = min(c.cqMod, c.txDepth)
	if c.kind == bw && c.duration == 0 && c.iters > 20000 {
		c.noPeak = true
	}
	if c.verb == verbSend && c.kind == bw && c.server == "" {
		c.noPeak = true
	}
	if c.all {
		c.size = 1 << 23
	}
	return nil
}

func usage(t test) string {
	return fmt.Sprintf(`Usage:
  ib_%[1]s            start a server and wait for connection
  ib_%[1]s <host>     connect to server at <host>
 (goverbs' perftest; also run as "perftest %[1]s ...")
Options:
  -p, --port=<port>  Listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)
  -i, --ib-port=<port>  Use port <port> of IB device (default 1)
  -m, --mtu=<mtu>  MTU size : 256 - 4096 (default port mtu)
  -s, --size=<size>  Size of message to exchange
  -a, --all  Run sizes from 2 till 2^23
  -n, --iters=<iters>  Number of exchanges (at least 5)
  -D, --duration  Run test for a customized period of seconds
  -f, --margin  measure results within margins. (default=duration/4)
  -x, --gid-index=<index>  Test uses GID with GID index
  -q, --qp=<num of qp's>  Num of qp's
  -t, --tx-depth=<dep>  Size of tx queue
  -r, --rx-depth=<dep>  Rx queue size (send tests)
  -l, --post_list=<list size>  Post list of send WQEs
  -Q, --cq-mod  Generate Cqe only after <--cq-mod> completion
  -c, --connection=<RC/UC/UD>  Connection type
  -e, --events  Sleep on CQ events
  -I, --inline_size=<size>  Max size of message to be sent in inline
  -o, --outs=<num>  Number of outstanding read/atom
  -A, --atomic_type=<type>  CMP_AND_SWAP or FETCH_AND_ADD
  -N, --noPeak  Cancel peak-bw calculation
  -F, --CPU-freq  Do not fail even if cpufreq_ondemand module is loaded
  -V, --version  Display version number
      --report_gbits  Report Max/Average BW of test in Gbit/sec
  -R, --rdma_cm  Connect QPs with rdma_cm and run test on those QPs
  -z, --comm_rdma_cm  Communicate with rdma_cm module to exchange data - use regular QPs
      --source_ip  Source IP of the interface used for connection establishment. By default taken from routing table.`, t.name)
}
