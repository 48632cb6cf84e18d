// Command rping is rdma-core's rping in Go, on goverbs' rdma_cm (package
// rdmacm): the same flags, output and wire protocol, so either side can be
// rdma-core's.
//
//	rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]
//	rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
//
// The client advertises its source buffer ({be64 addr, be32 rkey, be32
// size} in a 16-byte SEND); the server RDMA READs it, says go ahead, the
// client advertises its sink buffer, the server RDMA WRITEs the data back
// (strlen + 1 bytes) and says go ahead again. -V compares the buffers,
// -v prints each ping. Port 7174 by default. -q is accepted for
// compatibility (goverbs always creates and moves the QP itself); -t sets
// the type of service. A connection that goes down ends the run as
// rdma-core's rping ends it: "wait for <state> state 10" on stderr and exit
// status 0 (a server's normal end, after its client's last ping and
// disconnect, is "wait for RDMA_READ_ADV state 10").
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/goverbs/goverbs/internal/getopt"
)

func usage(w io.Writer) {
	fmt.Fprintf(w, "%s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n", "rping")
	fmt.Fprintf(w, "%s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n", "rping")
	fmt.Fprintf(w, "	-c\t\tclient side\n")
	fmt.Fprintf(w, "	-I\t\tSource address to bind to for client.\n")
	fmt.Fprintf(w, "	-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n")
	fmt.Fprintf(w, "	-v\t\tdisplay ping data to stdout\n")
	fmt.Fprintf(w, "	-V\t\tvalidate ping data\n")
	fmt.Fprintf(w, "	-d\t\tdebug printfs\n")
	fmt.Fprintf(w, "	-S size \tping data size\n")
	fmt.Fprintf(w, "	-C count\tping count times\n")
	fmt.Fprintf(w, "	-a addr\t\taddress\n")
	fmt.Fprintf(w, "	-p port\t\tport\n")
	fmt.Fprintf(w, "	-P\t\tpersistent server mode allowing multiple connections\n")
	fmt.Fprintf(w, "	-q\t\tuse self-created, self-modified QP\n")
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run is rping with args, on the process's stdout and stderr.
func run(args []string) int { return runTo(args, os.Stdout, os.Stderr) }

// rpingOptions is rping's getopt(3) string "a:I:Pp:C:S:t:scvVdq" as a
// table: rping has no long options, and glibc's getopt parses a short-only
// table exactly as getopt_long does.
var rpingOptions = []getopt.Option{
	{Short: 'a', Arg: true}, {Short: 'I', Arg: true}, {Short: 'P'},
	{Short: 'p', Arg: true}, {Short: 'C', Arg: true}, {Short: 'S', Arg: true},
	{Short: 't', Arg: true}, {Short: 's'}, {Short: 'c'}, {Short: 'v'},
	{Short: 'V'}, {Short: 'd'}, {Short: 'q'},
}

// minSize is RPING_MIN_BUFSIZE: sizeof "2147483647" plus sizeof "rdma-ping-%d: ".
const (
	minSize = 11 + 15
	maxSize = 64*1024 - 1
)

// parseArgs runs rping's command line through getopt, handing each option
// to f in command-line order; operands are ignored, as rping ignores them.
func parseArgs(args []string, f func(op rune, val string) error) error {
	p, err := getopt.Parse(args, rpingOptions, os.Getenv("POSIXLY_CORRECT") != "")
	if err != nil {
		return err
	}
	for _, o := range p.Options {
		if err := f(o.Short, o.Arg); err != nil {
			return err
		}
	}
	return nil
}

// runTo is rping with args, printing to stdout and stderr; it returns the
// exit status.
func runTo(args []string, stdout, stderr io.Writer) int {
	o := options{size: 64, port: 7174, server: -1, stdout: stdout, stderr: stderr}
	err := parseArgs(args, func(op rune, val string) error {
		var err error
		switch op {
		case 'a':
			o.addr = val
		case 'I':
			o.src = val
		case 'P':
			o.persistent = true
		case 'p':
			var p int
			p, err = strconv.Atoi(val)
			o.port = uint16(p)
		case 's':
			o.server = 1
		case 'c':
			o.server = 0
		case 'S':
			o.size, err = strconv.Atoi(val)
			if err == nil && (o.size < minSize || o.size > maxSize) {
				fmt.Fprintf(stderr, "Invalid size %d (valid range is %d to %d)\n", o.size, minSize, maxSize+1)
				return errInvalid
			}
		case 'C':
			o.count, err = strconv.Atoi(val)
			if err == nil && o.count < 0 {
				fmt.Fprintf(stderr, "Invalid count %d\n", o.count)
				return errInvalid
			}
		case 'v':
			o.verbose++
		case 'V':
			o.validate = true
		case 'd':
			o.debug = true
		case 'q':
		case 't':
			var v uint64
			v, err = strconv.ParseUint(val, 0, 8)
			o.tos, o.setTOS = uint8(v), true
		}
		return err
	})
	if err != nil {
		if err != errInvalid {
			fmt.Fprintf(stderr, "rping: %v\n", err)
			usage(stdout)
		}
		return 22 // EINVAL
	}
	if o.server == -1 {
		usage(stdout)
		return 22
	}
	if o.server == 1 {
		err = runServer(&o)
	} else {
		err = runClient(&o)
	}
	if err != nil {
		if err != errReported {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	return 0
}
