package main

import (
	"fmt"
	"io"
	"os"

	"github.com/goverbs/goverbs/internal/cpuprofile"
	"github.com/goverbs/goverbs/internal/cstdio"
	"github.com/goverbs/goverbs/internal/getopt"
	"github.com/goverbs/goverbs/uverbs"
)

func main() {
	os.Exit(cpuprofile.Run(func() int {
		return cstdio.Run(func(out io.Writer) int { return run(os.Args[1:], out, os.Stderr) })
	}))
}

// mode is which of rdma-core's examples the program speaks as.
type mode int

const (
	modeRC   mode = iota // ibv_rc_pingpong
	modeUD               // ibv_ud_pingpong
	modeSRQ              // ibv_srq_pingpong
	modeUC               // ibv_uc_pingpong
	modeXSRQ             // ibv_xsrq_pingpong (package internal/xsrq)
)

var modeNames = map[string]mode{"rc": modeRC, "ud": modeUD, "srq": modeSRQ, "uc": modeUC, "xsrq": modeXSRQ}

func (m mode) String() string {
	return [...]string{"rc", "ud", "srq", "uc", "xsrq"}[m]
}

// config is the command line, with rdma-core's defaults.
type config struct {
	mode     mode
	tcpPort  int        // -p: TCP port of the address exchange
	ibDev    string     // -d: device name ("" = the first one)
	ibPort   int        // -i: device port
	size     int        // -s: message size
	mtu      uverbs.MTU // -m: path MTU (rc, srq)
	rxDepth  int        // -r: receives posted at a time
	iters    int        // -n: exchanges
	sl       int        // -l: service level
	events   bool       // -e: sleep on CQ events instead of polling
	gidx     int        // -g: local GID index (-1: none, LID routing)
	numQP    int        // -q: QPs (srq)
	clients  int        // -c: clients the server serves (xsrq)
	validate bool       // -c: check the received payload
	server   string     // the server to connect to; "" runs a server
}

// options are each mode's options, as its getopt_long table has them.
var options = map[mode][]getopt.Option{
	modeRC: {
		{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
		{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'r', Long: "rx-depth", Arg: true},
		{Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true}, {Short: 'e', Long: "events"},
		{Short: 'g', Long: "gid-idx", Arg: true}, {Short: 'o', Long: "odp"}, {Short: 'O', Long: "iodp"},
		{Short: 'P', Long: "prefetch"}, {Short: 't', Long: "ts"}, {Short: 'c', Long: "chk"},
		{Short: 'j', Long: "dm"}, {Short: 'N', Long: "new_send"},
	},
	modeUD: {
		{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
		{Short: 's', Long: "size", Arg: true}, {Short: 'r', Long: "rx-depth", Arg: true}, {Short: 'n', Long: "iters", Arg: true},
		{Short: 'l', Long: "sl", Arg: true}, {Short: 'e', Long: "events"}, {Short: 'g', Long: "gid-idx", Arg: true},
		{Short: 'c', Long: "chk"},
	},
	modeSRQ: {
		{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
		{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'q', Long: "num-qp", Arg: true},
		{Short: 'r', Long: "rx-depth", Arg: true}, {Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true},
		{Short: 'e', Long: "events"}, {Short: 'o', Long: "odp"}, {Short: 'g', Long: "gid-idx", Arg: true},
		{Short: 'c', Long: "chk"},
	},
	modeXSRQ: {
		{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
		{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'c', Long: "clients", Arg: true},
		{Short: 'n', Long: "num_tests", Arg: true}, {Short: 'l', Long: "sl", Arg: true}, {Short: 'e', Long: "events"},
		{Short: 'o', Long: "odp"}, {Short: 'g', Long: "gid-idx", Arg: true},
	},
	modeUC: {
		{Short: 'p', Long: "port", Arg: true}, {Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true},
		{Short: 's', Long: "size", Arg: true}, {Short: 'm', Long: "mtu", Arg: true}, {Short: 'r', Long: "rx-depth", Arg: true},
		{Short: 'n', Long: "iters", Arg: true}, {Short: 'l', Long: "sl", Arg: true}, {Short: 'e', Long: "events"},
		{Short: 'g', Long: "gid-idx", Arg: true}, {Short: 'c', Long: "chk"},
	},
}

// unsupported are rdma-core options goverbs does not implement: they are
// recognized and refused, never silently ignored.
var unsupported = map[rune]string{
	'o': "on-demand paging", 'O': "implicit on-demand paging", 'P': "ODP prefetch",
	't': "completion timestamps", 'j': "device memory", 'N': "the new post send API",
}

// usage prints what rdma-core's usage() prints, for our command line.
func usage(w io.Writer, m mode) {
	if m == modeXSRQ {
		usageXSRQ(w)
		return
	}
	argv0 := "pingpong " + m.String()
	size := map[mode]int{modeRC: 4096, modeUD: 2048, modeSRQ: 4096, modeUC: 4096}[m] // ud's text says 2048; its default is 1024
	fmt.Fprintf(w, "Usage:\n")
	fmt.Fprintf(w, "  %s            start a server and wait for connection\n", argv0)
	fmt.Fprintf(w, "  %s <host>     connect to server at <host>\n", argv0)
	fmt.Fprintf(w, "\nOptions:\n")
	fmt.Fprintf(w, "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n")
	fmt.Fprintf(w, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(w, "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n")
	fmt.Fprintf(w, "  -s, --size=<size>      size of message to exchange (default %d)\n", size)
	if m != modeUD {
		fmt.Fprintf(w, "  -m, --mtu=<size>       path MTU (default 1024)\n")
	}
	if m == modeSRQ {
		fmt.Fprintf(w, "  -q, --num-qp=<num>     number of QPs to use (default 16)\n")
	}
	fmt.Fprintf(w, "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n")
	if m == modeSRQ {
		fmt.Fprintf(w, "  -n, --iters=<iters>    number of exchanges per QP(default 1000)\n")
	} else {
		fmt.Fprintf(w, "  -n, --iters=<iters>    number of exchanges (default 1000)\n")
	}
	if m == modeUD {
		fmt.Fprintf(w, "  -l, --sl=<SL>          send messages with service level <SL> (default 0)\n")
	} else {
		fmt.Fprintf(w, "  -l, --sl=<sl>          service level value\n")
	}
	fmt.Fprintf(w, "  -e, --events           sleep on CQ events (default poll)\n")
	fmt.Fprintf(w, "  -g, --gid-idx=<gid index> local port gid index\n")
	fmt.Fprintf(w, "  -c, --chk              validate received buffer\n")
	fmt.Fprintf(w, "\nThe mode (rc, ud, srq, uc or xsrq; default rc) selects which of rdma-core's\n")
	fmt.Fprintf(w, "ibv_rc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong, ibv_uc_pingpong and ibv_xsrq_pingpong\n")
	fmt.Fprintf(w, "this speaks to.\n")
}

// parseArgs reads "[rc|ud|srq|uc] [options] [host]". An error of type
// getopt.UsageError means: print the usage text.
func parseArgs(args []string) (config, error) {
	c := config{mode: modeRC, tcpPort: 18515, ibPort: 1, size: 4096, mtu: uverbs.MTU1024,
		rxDepth: 500, iters: 1000, gidx: -1, numQP: 16, clients: 1}
	if len(args) > 0 {
		if m, ok := modeNames[args[0]]; ok {
			c.mode = m
			args = args[1:]
		}
	}
	if c.mode == modeUD {
		c.size = 1024
	}
	if c.mode == modeXSRQ {
		c.iters = 5 // num_tests
	}
	p, err := getopt.Parse(args, options[c.mode], os.Getenv("POSIXLY_CORRECT") != "")
	if err != nil {
		return c, err
	}
	for _, o := range p.Options {
		if what, ok := unsupported[o.Short]; ok {
			return c, fmt.Errorf("-%c (%s) is not supported by goverbs", o.Short, what)
		}
		if o.Short == 'd' {
			c.ibDev = o.Arg
			continue
		}
		if o.Short == 'e' || o.Short == 'c' && c.mode != modeXSRQ {
			c.events = c.events || o.Short == 'e'
			c.validate = c.validate || o.Short == 'c'
			continue
		}
		v, err := getopt.Number(o.Arg)
		if err != nil {
			return c, getopt.UsageError{Msg: fmt.Sprintf("-%c: %v", o.Short, err)}
		}
		bad := false
		switch o.Short {
		case 'p':
			c.tcpPort, bad = int(v), v < 0 || v > 65535
		case 'i':
			c.ibPort, bad = int(v), v < 1 || v > 255
		case 's':
			c.size, bad = int(v), v < 0 || v > 1<<31-1 || (c.mode == modeSRQ && v < 1)
		case 'm':
			c.mtu = mtuOf(v)
			bad = c.mtu == 0
		case 'r':
			c.rxDepth, bad = int(v), v < 1 || v > 1<<24
		case 'n':
			c.iters, bad = int(v), v < 0 || v > 1<<31-1
		case 'l':
			c.sl, bad = int(v), v < 0 || v > 15
		case 'g':
			c.gidx, bad = int(v), v > 255
		case 'q':
			c.numQP, bad = int(v), v < 1
		case 'c':
			c.clients, bad = int(v), v < 1 || v > 1<<16
		}
		if bad {
			return c, getopt.UsageError{Msg: fmt.Sprintf("-%c %s: out of range", o.Short, o.Arg)}
		}
	}
	switch len(p.Operands) {
	case 0:
	case 1:
		c.server = p.Operands[0]
	default:
		return c, getopt.UsageError{Msg: "more than one server host"}
	}
	if c.mode == modeSRQ {
		if c.numQP > c.rxDepth {
			return c, failf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", c.rxDepth, c.numQP)
		}
		if c.numQP >= maxQP {
			return c, failf("num_qp %d must be less than %d", c.numQP, maxQP-1)
		}
	}
	return c, nil
}

// mtuOf is pp_mtu_to_enum: 256 … 4096, or 0 for anything else.
func mtuOf(v int64) uverbs.MTU {
	for m := uverbs.MTU256; m <= uverbs.MTU4096; m++ {
		if int64(m.Bytes()) == v {
			return m
		}
	}
	return 0
}

// run is the program: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args)
	if err != nil {
		if _, ok := err.(getopt.UsageError); ok {
			fmt.Fprintf(stderr, "pingpong: %v\n", err)
			usage(stdout, c.mode)
		} else {
			fmt.Fprintf(stderr, "%v\n", err)
		}
		return 1
	}
	if c.mode == modeXSRQ {
		err = runXSRQ(c, stdout)
	} else {
		err = pingpong(c, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
	return 0
}
