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
// the type of service.
package main

import (
	"fmt"
	"os"
	"strconv"
)

func usage() {
	fmt.Printf("%s -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n", "rping")
	fmt.Printf("%s -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n", "rping")
	fmt.Printf("\t-c\t\tclient side\n")
	fmt.Printf("\t-I\t\tSource address to bind to for client.\n")
	fmt.Printf("\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n")
	fmt.Printf("\t-v\t\tdisplay ping data to stdout\n")
	fmt.Printf("\t-V\t\tvalidate ping data\n")
	fmt.Printf("\t-d\t\tdebug printfs\n")
	fmt.Printf("\t-S size \tping data size\n")
	fmt.Printf("\t-C count\tping count times\n")
	fmt.Printf("\t-a addr\t\taddress\n")
	fmt.Printf("\t-p port\t\tport\n")
	fmt.Printf("\t-P\t\tpersistent server mode allowing multiple connections\n")
	fmt.Printf("\t-q\t\tuse self-created, self-modified QP\n")
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// getopt parses short options like getopt(3) with optstring
// "a:I:Pp:C:S:t:scvVdq": flags may be grouped (-vV), values attached
// (-S100) or separate (-S 100); "--" ends the options.
func getopt(args []string, withArg, flags string, f func(op byte, val string) error) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			op := a[j]
			switch {
			case contains(withArg, op):
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return fmt.Errorf("option requires an argument -- '%c'", op)
					}
					i++
					val = args[i]
				}
				if err := f(op, val); err != nil {
					return err
				}
				j = len(a)
			case contains(flags, op):
				if err := f(op, ""); err != nil {
					return err
				}
			default:
				return fmt.Errorf("invalid option -- '%c'", op)
			}
		}
	}
	return nil
}

func contains(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// minSize is RPING_MIN_BUFSIZE: sizeof "2147483647" plus sizeof "rdma-ping-%d: ".
const (
	minSize = 11 + 15
	maxSize = 64*1024 - 1
)

func run(args []string) int {
	o := options{size: 64, port: 7174, server: -1}
	err := getopt(args, "aIpCSt", "PscvVdq", func(op byte, val string) error {
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
				fmt.Fprintf(os.Stderr, "Invalid size %d (valid range is %d to %d)\n", o.size, minSize, maxSize+1)
				return errInvalid
			}
		case 'C':
			o.count, err = strconv.Atoi(val)
			if err == nil && o.count < 0 {
				fmt.Fprintf(os.Stderr, "Invalid count %d\n", o.count)
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
			fmt.Fprintf(os.Stderr, "rping: %v\n", err)
			usage()
		}
		return 22 // EINVAL
	}
	if o.server == -1 {
		usage()
		return 22
	}
	if o.server == 1 {
		err = runServer(&o)
	} else {
		err = runClient(&o)
	}
	if err != nil {
		if err != errReported {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	}
	return 0
}
