// Command rstream is rdma-core's rstream in Go, on goverbs' rsocket
// package: the same flags, test sizes and output, and rsocket's wire
// protocol, so either side can be rdma-core's rstream.
//
//	rstream [-s server_address] [-b bind_address] [-f ip] [-B buffer_size]
//	        [-i inline_size] [-I iterations] [-C transfer_count]
//	        [-S transfer_size|all] [-p port] [-k keepalive_time] [-T test_option]
//
// Without -s it is the server. Without -I, -C or -S (a size) it runs the
// latency tests (inline_size inline, one transfer each way per iteration)
// on one connection, then the bandwidth tests (no inline, many transfers
// each way) on a second; -S all adds the sizes between the powers of two.
// Test options (-T): s use TCP sockets (Go's net package), v verify the
// data, b blocking and n nonblocking (goverbs' calls always block on the
// runtime poller; both are accepted), a async (the same), r resolve
// (accepted; addresses are IP). f (fork) is refused. Port 7471 by default.
//
// Like rstream it asks for 512 KiB send and receive buffers (-B to change;
// rsocket doubles SO_SNDBUF/SO_RCVBUF values, so the buffers are 1 MiB).
//
// figures.sh, beside this file, runs it against rdma-core's rstream (its
// spinning default and -T b) and TCP (-T s) in one rig boot
// (test/perf/figures.sh builds and boots it). On Linux 6.1
// under TCG (docs/COST.md, session 41), against the spinning rstream on
// rxe: round trips 1.24-1.29x at 64 B, 0.98x at 4 KiB, 0.79x at 64 KiB,
// 0.96x at 1 MiB; streams 0.96-1.02x at 64 B, 1.39x at 4 KiB, 1.30x at
// 64 KiB, 1.02x at 1 MiB. Against -T b (both park when nothing is there)
// it is ahead in every row. On siw it leads both on round trips up to 4
// KiB (session 24).
// The 64 B round trip's gap is mostly a tail: timed one by one
// (test/perf/rtt.sh), the median round trip is in librdmacm's range, and
// 1.2-4.7x as many take over 100 µs.
//
// GOVERBS_CPUPROFILE=file writes a CPU profile of the run into file
// (runtime/pprof; test/perf/pgo.sh takes the compared commands' profiles
// in one boot).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/cpuprofile"
	"github.com/goverbs/goverbs/internal/cstdio"
	"github.com/goverbs/goverbs/internal/getopt"
	"github.com/goverbs/goverbs/rsocket"
)

func main() {
	os.Exit(cpuprofile.Run(func() int {
		return cstdio.Run(func(out io.Writer) int { return run(os.Args, out, os.Stderr) })
	}))
}

type testSize struct{ size, option int }

var testSizes = []testSize{
	{1 << 6, 0},
	{1 << 7, 1}, {1<<7 + 1<<6, 1},
	{1 << 8, 1}, {1<<8 + 1<<7, 1},
	{1 << 9, 1}, {1<<9 + 1<<8, 1},
	{1 << 10, 1}, {1<<10 + 1<<9, 1},
	{1 << 11, 1}, {1<<11 + 1<<10, 1},
	{1 << 12, 0}, {1<<12 + 1<<11, 1},
	{1 << 13, 1}, {1<<13 + 1<<12, 1},
	{1 << 14, 1}, {1<<14 + 1<<13, 1},
	{1 << 15, 1}, {1<<15 + 1<<14, 1},
	{1 << 16, 0}, {1<<16 + 1<<15, 1},
	{1 << 17, 1}, {1<<17 + 1<<16, 1},
	{1 << 18, 1}, {1<<18 + 1<<17, 1},
	{1 << 19, 1}, {1<<19 + 1<<18, 1},
	{1 << 20, 0}, {1<<20 + 1<<19, 1},
	{1 << 21, 1}, {1<<21 + 1<<20, 1},
	{1 << 22, 1}, {1<<22 + 1<<21, 1},
}

type options struct {
	dst, src    string
	port        string
	bufferSize  int
	inlineSize  int
	iterations  int
	count       int
	size        int
	custom      bool
	fresh       bool // a connection just accepted: its first sync is syncFirst
	sizeOption  int
	keepalive   int
	useTCP      bool
	verify      bool
	testName    string
	out, errOut io.Writer
	buf         []byte
	fmtData     byte // format_buf's running byte
	verData     byte // verify_buf's running byte
	verTotal    int64
	received    int64 // bytes received by recvXfer, for an error's report
	opt         int   // rstream's optimization: optMixed (custom runs), optLatency, optBandwidth
	listener    net.Listener
	conn        net.Conn
	start, stop time.Time
}

// rstream's optimizations: custom runs keep rsocket's default inline size
// (64), latency runs set inline_size, bandwidth runs 0.
const (
	optMixed = iota
	optLatency
	optBandwidth
)

func usage(w io.Writer, argv0 string) {
	fmt.Fprintf(w, "usage: %s\n", argv0)
	fmt.Fprintf(w, "\t[-s server_address]\n")
	fmt.Fprintf(w, "\t[-b bind_address]\n")
	fmt.Fprintf(w, "\t[-f address_format]\n")
	fmt.Fprintf(w, "\t    name, ip, ipv6, or gid\n")
	fmt.Fprintf(w, "\t[-B buffer_size]\n")
	fmt.Fprintf(w, "\t[-i inline_size]\n")
	fmt.Fprintf(w, "\t[-I iterations]\n")
	fmt.Fprintf(w, "\t[-C transfer_count]\n")
	fmt.Fprintf(w, "\t[-S transfer_size or all]\n")
	fmt.Fprintf(w, "\t[-p port_number]\n")
	fmt.Fprintf(w, "\t[-k keepalive_time]\n")
	fmt.Fprintf(w, "\t[-T test_option]\n")
	fmt.Fprintf(w, "\t    s|sockets - use standard tcp/ip sockets\n")
	fmt.Fprintf(w, "\t    a|async - asynchronous operation (use poll)\n")
	fmt.Fprintf(w, "\t    b|blocking - use blocking calls\n")
	fmt.Fprintf(w, "\t    f|fork - fork server processing\n")
	fmt.Fprintf(w, "\t    n|nonblocking - use nonblocking calls\n")
	fmt.Fprintf(w, "\t    r|resolve - use rdma cm to resolve address\n")
	fmt.Fprintf(w, "\t    v|verify - verify data\n")
}

// setTestOpt is rstream's set_test_opt: one letter or a word.
func (o *options) setTestOpt(arg string) bool {
	if len(arg) == 1 {
		switch arg[0] {
		case 's':
			o.useTCP = true
		case 'a', 'b', 'n', 'r':
		case 'v':
			o.verify = true
		default: // 'f' too: goverbs does not fork
			return false
		}
		return true
	}
	a := strings.ToLower(arg)
	switch {
	case strings.HasPrefix(a, "socket"):
		o.useTCP = true
	case strings.HasPrefix(a, "async"), strings.HasPrefix(a, "block"),
		strings.HasPrefix(a, "nonblock"), strings.HasPrefix(a, "resolve"):
	case strings.HasPrefix(a, "verify"):
		o.verify = true
	default:
		return false
	}
	return true
}

func run(args []string, out, errOut io.Writer) int {
	o := &options{port: "7471", inlineSize: 64, iterations: 1, count: 1000, size: 1000, testName: "custom", out: out, errOut: errOut}
	g := getopt.New(args, "s:b:f:B:i:I:C:S:p:k:T:", nil, true, func(s string) { fmt.Fprintln(errOut, s) })
	for {
		op, arg := g.Next()
		if op == 0 {
			break
		}
		switch op {
		case 's':
			o.dst = arg
		case 'b':
			o.src = arg
		case 'f':
			if !strings.HasPrefix(strings.ToLower(arg), "ip") {
				fmt.Fprintf(errOut, "Warning: unknown address format\n")
			}
		case 'B':
			o.bufferSize = atoi(arg)
		case 'i':
			o.inlineSize = atoi(arg)
		case 'I':
			o.custom = true
			o.iterations = atoi(arg)
		case 'C':
			o.custom = true
			o.count = atoi(arg)
		case 'S':
			if strings.HasPrefix(strings.ToLower(arg), "all") {
				o.sizeOption = 1
			} else {
				o.custom = true
				o.size = atoi(arg)
			}
		case 'p':
			o.port = arg
		case 'k':
			o.keepalive = atoi(arg)
		case 'T':
			if o.setTestOpt(arg) {
				break
			}
			fallthrough
		default:
			usage(out, args[0])
			return 1
		}
	}
	if err := o.run(); err != nil {
		return 255 // rstream returns -1 from main
	}
	return 0
}

// atoi is C's atoi: leading digits, 0 when there are none.
func atoi(s string) int {
	s = strings.TrimSpace(s)
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, _ := strconv.Atoi(s[:i])
	return n
}

func (o *options) perror(what string, err error) {
	fmt.Fprintf(o.errOut, "%s: %v\n", what, err)
}

func (o *options) config() rsocket.Config {
	b := 1 << 19
	if o.bufferSize != 0 {
		b = o.bufferSize
	}
	c := rsocket.Config{SendBuffer: 2 * b, RecvBuffer: 2 * b}
	switch o.opt {
	case optLatency:
		c.Inline = o.inlineSize
		if c.Inline == 0 {
			c.Inline = -1
		}
	case optBandwidth:
		c.Inline = -1
	}
	return c
}

func (o *options) run() error {
	if o.custom {
		// rstream mallocs transfer_size bytes and its sync exchange moves
		// 16 from them (malloc's minimum chunk hides the overrun).
		o.buf = make([]byte, max(o.size, 16))
	} else {
		o.buf = make([]byte, testSizes[len(testSizes)-1].size)
	}
	if o.dst == "" {
		if err := o.serverListen(); err != nil {
			return err
		}
		defer o.listener.Close()
	}
	fmt.Fprintf(o.out, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
	if !o.custom {
		o.opt = optLatency
		if err := o.connect(); err != nil {
			return err
		}
		for _, t := range testSizes {
			if t.option > o.sizeOption {
				continue
			}
			o.initLatency(t.size)
			o.runTest() //nolint:errcheck // rstream goes on with the next size
		}
		o.closeConn()
		o.opt = optBandwidth
		if err := o.connect(); err != nil {
			return err
		}
		for _, t := range testSizes {
			if t.option > o.sizeOption {
				continue
			}
			o.initBandwidth(t.size)
			o.runTest() //nolint:errcheck
		}
		o.closeConn()
		return nil
	}
	if err := o.connect(); err != nil {
		return err
	}
	err := o.runTest()
	o.closeConn()
	return err
}

func (o *options) connect() error {
	if o.dst == "" {
		return o.serverConnect()
	}
	return o.clientConnect()
}

func (o *options) closeConn() {
	if c, ok := o.conn.(interface{ CloseWrite() error }); ok {
		c.CloseWrite() //nolint:errcheck // shutdown(SHUT_RDWR), then close
	}
	o.conn.Close()
	o.conn = nil
}

func (o *options) serverListen() error {
	addr := net.JoinHostPort(o.src, o.port)
	var err error
	if o.useTCP {
		lc := net.ListenConfig{}
		o.listener, err = lc.Listen(context.Background(), "tcp", addr)
	} else {
		// The QPs of accepted connections get the listener's inline size.
		lc := rsocket.ListenConfig{ReuseAddr: true, Backlog: 1, Config: rsocket.Config{Inline: max(o.inlineSize, 64)}}
		o.listener, err = lc.Listen(context.Background(), "tcp", addr)
	}
	if err != nil {
		o.perror("rlisten", err)
	}
	return err
}

func (o *options) serverConnect() error {
	var err error
	if l, ok := o.listener.(*rsocket.Listener); ok {
		cfg := o.config()
		o.conn, err = l.AcceptConfig(&cfg)
	} else {
		o.conn, err = o.listener.Accept()
	}
	if err != nil {
		o.perror("raccept", err)
		return err
	}
	o.setOptions()
	o.fresh = true
	return nil
}

func (o *options) clientConnect() error {
	addr := net.JoinHostPort(o.dst, o.port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if o.useTCP {
		d := net.Dialer{}
		if o.src != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.src)}
		}
		o.conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		d := rsocket.Dialer{Config: o.config()}
		if o.src != "" {
			if d.Source, err = netip.ParseAddr(o.src); err != nil {
				o.perror("getaddrinfo src_addr", err)
				return err
			}
		}
		o.conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		o.perror("rconnect", err)
		return err
	}
	o.setOptions()
	return nil
}

func (o *options) setOptions() {
	if tc, ok := o.conn.(*net.TCPConn); ok {
		b := 1 << 19
		if o.bufferSize != 0 {
			b = o.bufferSize
		}
		tc.SetNoDelay(true)  //nolint:errcheck
		tc.SetReadBuffer(b)  //nolint:errcheck
		tc.SetWriteBuffer(b) //nolint:errcheck
	}
	if o.keepalive == 0 {
		return
	}
	switch c := o.conn.(type) {
	case *net.TCPConn:
		c.SetKeepAlive(true)                                           //nolint:errcheck
		c.SetKeepAlivePeriod(time.Duration(o.keepalive) * time.Second) //nolint:errcheck
	case *rsocket.Conn:
		c.SetKeepAlive(true)                                           //nolint:errcheck
		c.SetKeepAlivePeriod(time.Duration(o.keepalive) * time.Second) //nolint:errcheck
	}
	fmt.Fprintf(o.out, "Keepalive: %s\n", "ON")
	fmt.Fprintf(o.out, "  time: %d\n", o.keepalive)
}

func (o *options) initLatency(size int) {
	o.testName = sizeStr(int64(size))
	if len(o.testName) > 4 {
		o.testName = o.testName[:4] // rstream's 5-byte buffer
	}
	o.testName += "_lat"
	o.count = 1
	o.size = size
	o.iterations = sizeToCount(size)
}

func (o *options) initBandwidth(size int) {
	o.testName = sizeStr(int64(size))
	if len(o.testName) > 4 {
		o.testName = o.testName[:4]
	}
	o.testName += "_bw"
	o.iterations = 1
	o.size = size
	o.count = sizeToCount(size)
}

func sizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	default:
		return 100000
	}
}

func (o *options) sendXfer(size int) error {
	b := o.buf[:size]
	if o.verify {
		for i := range b {
			b[i] = o.fmtData
			o.fmtData++
		}
	}
	if _, err := o.conn.Write(b); err != nil {
		o.perror("rsend", err)
		return err
	}
	return nil
}

func (o *options) recvXfer(size int) error {
	b := o.buf[:size]
	n, err := o.readFull(b)
	o.received += int64(n)
	if err != nil {
		return o.recvErr(err)
	}
	return o.check(b)
}

// readFull is io.ReadFull(o.conn, b), looping on Read as rstream's
// recv_xfer loops on rrecv: io.ReadFull's conversion of the net.Conn to an
// io.Reader looks the method table up at run time, ~80 instructions a
// transfer (callgrind, 64 B round trips).
func (o *options) readFull(b []byte) (int, error) {
	n := 0
	var err error
	for n < len(b) && err == nil {
		var k int
		k, err = o.conn.Read(b[n:])
		n += k
	}
	switch {
	case n == len(b):
		err = nil
	case n > 0 && err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (o *options) recvErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("connection closed by the peer")
	}
	// rstream says only strerror; the bytes received so far tell a
	// connection that broke mid-run from one whose last transfer was lost.
	o.perror("rrecv", fmt.Errorf("%w (%d bytes received before)", err, o.received))
	return err
}

// check verifies received bytes (-T v).
func (o *options) check(b []byte) error {
	if o.verify {
		for i := range b {
			if b[i] != o.verData {
				fmt.Fprintf(o.out, "data verification failed byte %d\n", o.verTotal)
				return errors.New("verification failed")
			}
			o.verData++
			o.verTotal++
		}
	}
	return nil
}

// earlyAfter is how long a server waits for a fresh connection's first
// sync message before it sends its own first (the exchange is symmetric:
// its message does not depend on the client's). siw's accept (siw_accept
// in Linux's siw_cm.c, 6.1 to 7.x) sends the MPA reply before the QP owns
// the socket's receive callback; the client's first messages can arrive in
// between and stay unread in the server's socket until more data comes,
// and rdma-core's rstream client then waits for the answer forever (1
// connect in 60 on Linux 7.3). With the answer in hand it sends its test
// data, whose arrival makes the QP read what was stuck. rsocket's
// listener cannot do this itself (rsocket's nudgeEvery); it lets an
// accepted connection send once a second has passed. GOVERBS_SIW_NUDGE=0
// turns it off (the rig's tests show the hang with it); =log has the
// server say on stderr when it answered early.
const earlyAfter = time.Second

// syncFirst is the server's first sync on a fresh connection: the
// client's 16 bytes, and its own sent early if those are earlyAfter late.
func (o *options) syncFirst() error {
	b := o.buf[:16]
	o.conn.SetReadDeadline(time.Now().Add(earlyAfter)) //nolint:errcheck // a conn without deadlines reads on
	n, err := io.ReadFull(o.conn, b)
	o.conn.SetReadDeadline(time.Time{}) //nolint:errcheck
	sent := false
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if n == 0 {
			if err := o.sendXfer(16); err != nil {
				return err
			}
			sent = true
			if os.Getenv("GOVERBS_SIW_NUDGE") == "log" {
				fmt.Fprintln(o.errOut, "goverbs: the client's first sync is late: answered early")
			}
		}
		var m int
		m, err = io.ReadFull(o.conn, b[n:])
		n += m
	}
	if err != nil {
		return o.recvErr(err)
	}
	if err := o.check(b[:n]); err != nil {
		return err
	}
	if sent {
		return nil
	}
	return o.sendXfer(16)
}

func (o *options) syncTest() error {
	client := o.dst != ""
	if !client && o.fresh {
		o.fresh = false
		if os.Getenv("GOVERBS_SIW_NUDGE") != "0" {
			return o.syncFirst()
		}
	}
	var err error
	if client {
		err = o.sendXfer(16)
	} else {
		err = o.recvXfer(16)
	}
	if err != nil {
		return err
	}
	if client {
		return o.recvXfer(16)
	}
	return o.sendXfer(16)
}

func (o *options) runTest() error {
	if err := o.syncTest(); err != nil {
		return err
	}
	client := o.dst != ""
	o.start = time.Now()
	for i := 0; i < o.iterations; i++ {
		for t := 0; t < o.count; t++ {
			var err error
			if client {
				err = o.sendXfer(o.size)
			} else {
				err = o.recvXfer(o.size)
			}
			if err != nil {
				return err
			}
		}
		for t := 0; t < o.count; t++ {
			var err error
			if client {
				err = o.recvXfer(o.size)
			} else {
				err = o.sendXfer(o.size)
			}
			if err != nil {
				return err
			}
		}
	}
	o.stop = time.Now()
	o.showPerf()
	return nil
}

// showPerf prints a result line as rstream's show_perf does.
func (o *options) showPerf() {
	usec := float64(o.stop.Sub(o.start).Microseconds())
	bytes := int64(o.iterations) * int64(o.count) * int64(o.size) * 2
	fmt.Fprintf(o.out, "%-10s", o.testName)
	fmt.Fprintf(o.out, "%-8s", sizeStr(int64(o.size)))
	fmt.Fprintf(o.out, "%-8s", cntStr(int64(o.count)))
	fmt.Fprintf(o.out, "%-8s", cntStr(int64(o.iterations)))
	fmt.Fprintf(o.out, "%-8s", sizeStr(bytes))
	fmt.Fprintf(o.out, "%8.2fs%10.2f%11.2f\n", usec/1000000., float64(bytes*8)/(1000.*usec),
		(usec/float64(o.iterations))/float64(o.count*2))
}

// sizeStr is rdma-core's size_str: 1.5k, 64k, 1m, 3g.
func sizeStr(size int64) string {
	var base int64 = 1
	mag := ""
	switch {
	case size >= 1<<30:
		base, mag = 1<<30, "g"
	case size >= 1<<20:
		base, mag = 1<<20, "m"
	case size >= 1<<10:
		base, mag = 1<<10, "k"
	}
	var fraction int64
	if size/base < 10 {
		fraction = (size % base) * 10 / base
	}
	if fraction != 0 {
		return fmt.Sprintf("%d.%d%s", size/base, fraction, mag)
	}
	return fmt.Sprintf("%d%s", size/base, mag)
}

// cntStr is rdma-core's cnt_str: 100k, 1m, 1b.
func cntStr(cnt int64) string {
	switch {
	case cnt >= 1000000000:
		return fmt.Sprintf("%db", cnt/1000000000)
	case cnt >= 1000000:
		return fmt.Sprintf("%dm", cnt/1000000)
	case cnt >= 1000:
		return fmt.Sprintf("%dk", cnt/1000)
	}
	return fmt.Sprintf("%d", cnt)
}
