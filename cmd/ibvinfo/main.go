package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/goverbs/goverbs/internal/cstdio"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(cstdio.Run(func(out io.Writer) int {
		return run(os.Args, out, os.Stderr, os.Getenv("POSIXLY_CORRECT") != "")
	}))
}

// prog is one run of ibvinfo.
type prog struct {
	argv0   string
	out     io.Writer // stdout, buffered as C's stdio buffers it
	errw    io.Writer // stderr, unbuffered
	verbose bool
	jsonOut bool
	extra   bool
	sysfs   string // sysfs mount point, for board_id

	report Report // what -json prints
}

// run is the program: parse args as ibv_devinfo does, then print. It
// returns the exit status, ibv_devinfo's: 0; 255 (its -1) for a bad
// option, an unknown device or no device; 1 for a bad -i; else the OR of
// the per-device codes (1 open failed, 2 query failed, 3 close failed, 4
// no such port, or the errno of a failed port query).
func run(args []string, out io.Writer, errw io.Writer, posix bool) int {
	if len(args) == 0 {
		args = []string{"ibvinfo"}
	}
	args, jsonOut, extra := takeExtensions(args, posix)
	p := &prog{argv0: args[0], out: out, errw: errw, jsonOut: jsonOut, extra: extra, sysfs: "/sys"}
	g := newGetopt(args, posix, func(s string) { io.WriteString(errw, s) })
	devName, haveDev, ibPort := "", false, 0
	for {
		c, arg := g.Next()
		if c == 0 {
			break
		}
		switch c {
		case 'd':
			devName, haveDev = cString(arg), true
		case 'i':
			// int ib_port = strtol(optarg, NULL, 0): a long truncated to int.
			v := int32(cStrtol(arg))
			if v <= 0 {
				p.usage()
				return 1
			}
			ibPort = int(v)
		case 'v':
			p.verbose = true
		case 'l':
			return p.list()
		default:
			p.usage()
			return 255
		}
	}
	devs, err := p.devices()
	if err != nil {
		printf(errw, "Failed to get IB devices list: %s\n", strerror(err))
		return 255
	}
	ret := 0
	if haveDev {
		var dev *uverbs.Device
		for i := range devs {
			if devs[i].Name == devName {
				dev = &devs[i]
				break
			}
		}
		if dev == nil {
			printf(errw, "IB device '%s' wasn't found\n", devName)
			return 255
		}
		ret |= p.printHCA(*dev, uint8(ibPort))
	} else {
		if len(devs) == 0 {
			printf(errw, "No IB devices found\n")
			return 255
		}
		for _, d := range devs {
			ret |= p.printHCA(d, uint8(ibPort))
		}
	}
	if p.jsonOut {
		p.writeJSON(&p.report)
	}
	return ret & 0xff
}

// cString is what C sees of an argument: the bytes before the first NUL.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// devices lists devices as ibv_get_device_list does. With no device at
// all it tells "no RDMA stack" (rdma-core's ENOSYS: no RDMA netlink and no
// class/infiniband_verbs) from "no device" (an empty list).
func (p *prog) devices() ([]uverbs.Device, error) {
	p.memlockWarning()
	devs, err := uverbs.Devices()
	if err != nil {
		var e unix.Errno
		if !errors.As(err, &e) {
			err = unix.ENOSYS
		}
		return nil, err
	}
	if len(devs) == 0 {
		_, e1 := os.Stat(p.sysfs + "/class/infiniband")
		_, e2 := os.Stat(p.sysfs + "/class/infiniband_verbs")
		if errors.Is(e1, fs.ErrNotExist) && errors.Is(e2, fs.ErrNotExist) {
			return nil, unix.ENOSYS
		}
	}
	return devs, nil
}

// memlockWarning is libibverbs' check at its first device list: a
// non-root user whose RLIMIT_MEMLOCK is 32 KiB or less is warned on stderr.
func (p *prog) memlockWarning() {
	if os.Geteuid() == 0 {
		return
	}
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &l); err != nil {
		printf(p.errw, "libibverbs: Warning: getrlimit(RLIMIT_MEMLOCK) failed.")
		return
	}
	if l.Cur <= 32768 {
		printf(p.errw, "libibverbs: Warning: RLIMIT_MEMLOCK is %d bytes.\n    This will severely limit memory registrations.\n", l.Cur)
	}
}

// usage is ibv_devinfo's, naming the program as it was called.
func (p *prog) usage() {
	printf(p.out, "Usage: %s             print the ca attributes\n", p.argv0)
	printf(p.out, "\n")
	printf(p.out, "Options:\n")
	printf(p.out, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	printf(p.out, "  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n")
	printf(p.out, "  -l, --list             print only the IB devices names\n")
	printf(p.out, "  -v, --verbose          print all the attributes of the IB device(s)\n")
}

// list is -l: the device names.
func (p *prog) list() int {
	devs, err := p.devices()
	if err != nil {
		printf(p.errw, "Failed to get IB devices list: %s\n", strerror(err))
		return 255
	}
	if p.jsonOut {
		l := List{HCAs: []string{}}
		for _, d := range devs {
			l.HCAs = append(l.HCAs, d.Name)
		}
		p.writeJSON(l)
		return 0
	}
	s := "s"
	if len(devs) == 1 {
		s = ""
	}
	printf(p.out, "%d HCA%s found:\n", len(devs), s)
	for _, d := range devs {
		printf(p.out, "\t%s\n", d.Name)
	}
	printf(p.out, "\n")
	return 0
}

func (p *prog) writeJSON(v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		printf(p.errw, "ibvinfo: %v\n", err)
		return
	}
	p.out.Write(append(b, '\n'))
}
