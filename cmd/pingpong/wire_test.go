package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/getopt"
	"github.com/goverbs/goverbs/uverbs"
)

func gidOf(t *testing.T, s string) [16]byte {
	t.Helper()
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("bad address %q", s)
	}
	var g [16]byte
	copy(g[:], ip.To16())
	return g
}

// The message is what sprintf("%04x:%06x:%06x:%s") and gid_to_wire_gid
// make, NUL-padded to sizeof the template (52 bytes).
func TestDestEncode(t *testing.T) {
	d := dest{lid: 0, qpn: 0x11, psn: 0xabcdef, gid: gidOf(t, "::ffff:10.0.2.15")}
	want := "0000:000011:abcdef:00000000000000000000ffff0a00020f\x00"
	if got := string(d.encode()); got != want {
		t.Errorf("encode = %q, want %q", got, want)
	}
	if len(want) != msgSize {
		t.Fatalf("msgSize %d, template %d", msgSize, len(want))
	}
	d = dest{lid: 0xbeef, qpn: 0xffffff, psn: 1, gid: gidOf(t, "fe80::200:aff:fe63:1")}
	want = "beef:ffffff:000001:fe8000000000000002000afffe630001\x00"
	if got := string(d.encode()); got != want {
		t.Errorf("encode = %q, want %q", got, want)
	}
	back, err := decodeDest(d.encode())
	if err != nil || back != d {
		t.Errorf("decode(encode(%+v)) = %+v, %v", d, back, err)
	}
}

func TestDestDecode(t *testing.T) {
	// sscanf("%x") takes any number of hex digits, upper case too.
	d, err := decodeDest([]byte("1:A:ff:00000000000000000000FFFF0A00020F\x00junk"))
	if err != nil {
		t.Fatal(err)
	}
	if d.lid != 1 || d.qpn != 0xa || d.psn != 0xff || d.gid != gidOf(t, "::ffff:10.0.2.15") {
		t.Errorf("decoded %+v", d)
	}
	for _, bad := range []string{"", "0000:000011:abcdef", "0000:0000zz:abcdef:00000000000000000000ffff0a00020f",
		"10000:000011:abcdef:00000000000000000000ffff0a00020f", "0000:000011:abcdef:00ff"} {
		if _, err := decodeDest([]byte(bad)); err == nil {
			t.Errorf("decodeDest(%q) succeeded", bad)
		}
	}
}

func TestHasInterfaceID(t *testing.T) {
	if (dest{}).hasInterfaceID() {
		t.Error("zero GID has an interface id")
	}
	if !(dest{gid: gidOf(t, "::ffff:10.0.2.15")}).hasInterfaceID() {
		t.Error("RoCEv2 IPv4 GID has no interface id")
	}
	if (dest{gid: gidOf(t, "fe80::")}).hasInterfaceID() {
		t.Error("fe80:: has an interface id")
	}
}

// The exchange over a real socket: one server, one client, n messages each
// way, the server's QPs connected before it answers, then "done".
func TestExchange(t *testing.T) {
	for _, n := range []int{1, maxQP} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		mk := func(base uint32) []dest {
			ds := make([]dest, n)
			for i := range ds {
				ds[i] = dest{lid: uint16(i), qpn: base + uint32(i), psn: 0x123456, gid: gidOf(t, "::ffff:10.99.0.2")}
			}
			return ds
		}
		srvDests, cliDests := mk(0x100), mk(0x900)
		var wg sync.WaitGroup
		var srvGot, cliGot []dest
		var srvConn, cliConn, connectConn net.Conn
		var srvErr, cliErr error
		connected := false
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvGot, srvConn, srvErr = exchangeServer(port, srvDests, func(c net.Conn, r []dest) error {
				connected, connectConn = len(r) == n, c
				return nil
			})
		}()
		// The client retries until the server listens (the test's race, not
		// the program's: rdma-core's client does not retry either).
		for i := 0; i < 200; i++ {
			cliGot, cliConn, cliErr = exchangeClient("127.0.0.1", port, cliDests)
			if cliErr == nil || !strings.Contains(cliErr.Error(), "Couldn't connect") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		if srvErr != nil || cliErr != nil {
			t.Fatalf("n=%d: server %v, client %v", n, srvErr, cliErr)
		}
		if !connected || connectConn != srvConn {
			t.Errorf("n=%d: connect was not called with the client's addresses and the returned connection", n)
		}
		// Both connections come back open (the caller closes them after
		// its loop).
		if _, err := cliConn.Write([]byte{7}); err != nil {
			t.Fatalf("n=%d: client's connection after the exchange: %v", n, err)
		}
		var b [1]byte
		if _, err := io.ReadFull(srvConn, b[:]); err != nil || b[0] != 7 {
			t.Fatalf("n=%d: server's connection after the exchange: %v %v", n, b, err)
		}
		cliConn.Close()
		srvConn.Close()
		for i := range n {
			if srvGot[i] != cliDests[i] || cliGot[i] != srvDests[i] {
				t.Fatalf("n=%d: message %d: server got %+v, client got %+v", n, i, srvGot[i], cliGot[i])
			}
		}
	}
}

// A server whose connect fails answers nothing, and the client fails.
func TestExchangeConnectFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	errc := make(chan error, 1)
	go func() {
		_, c, err := exchangeServer(port, []dest{{qpn: 1}}, func(net.Conn, []dest) error { return errors.New("no") })
		if c != nil {
			err = errors.New("a connection returned with the error")
		}
		errc <- err
	}()
	var cliErr error
	for i := 0; i < 200; i++ {
		_, _, cliErr = exchangeClient("127.0.0.1", port, []dest{{qpn: 2}})
		if cliErr == nil || !strings.Contains(cliErr.Error(), "Couldn't connect") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cliErr == nil {
		t.Error("client succeeded against a server that could not connect")
	}
	if err := <-errc; err == nil || err.Error() != "no" {
		t.Errorf("server: %v", err)
	}
}

// TestOptionTables: each mode accepts its own rdma-core example's options
// (internal/getopt's tests cover the parse itself).
func TestOptionTables(t *testing.T) {
	// ud has no -m, srq has -q.
	if _, err := getopt.Parse([]string{"-m", "1024"}, options[modeUD], false); err == nil {
		t.Error("ud accepted -m")
	}
	if _, err := getopt.Parse([]string{"-q", "4"}, options[modeSRQ], false); err != nil {
		t.Errorf("srq refused -q: %v", err)
	}
	// uc: rc's options without rc's extensions (uc_pingpong's getopt string
	// is "p:d:i:s:m:r:n:l:eg:c").
	if _, err := getopt.Parse([]string{"-p", "1", "-d", "x", "-i", "1", "-s", "1", "-m", "1024", "-r", "1", "-n", "1",
		"-l", "1", "-e", "-g", "1", "-c"}, options[modeUC], false); err != nil {
		t.Errorf("uc refused one of its options: %v", err)
	}
	for _, o := range []string{"-o", "-O", "-P", "-t", "-j", "-N", "-q1"} {
		if _, err := getopt.Parse([]string{o}, options[modeUC], false); err == nil {
			t.Errorf("uc accepted %s", o)
		}
	}
}

func TestParseArgs(t *testing.T) {
	c, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.mode != modeRC || c.tcpPort != 18515 || c.ibPort != 1 || c.size != 4096 || c.mtu != uverbs.MTU1024 ||
		c.rxDepth != 500 || c.iters != 1000 || c.gidx != -1 || c.server != "" || c.events || c.validate {
		t.Errorf("rc defaults %+v", c)
	}
	if c, _ := parseArgs([]string{"ud"}); c.mode != modeUD || c.size != 1024 {
		t.Errorf("ud defaults %+v", c)
	}
	if c, _ := parseArgs([]string{"srq"}); c.mode != modeSRQ || c.numQP != 16 || c.size != 4096 {
		t.Errorf("srq defaults %+v", c)
	}
	if c, _ := parseArgs([]string{"uc"}); c.mode != modeUC || c.size != 4096 || c.mtu != uverbs.MTU1024 || c.rxDepth != 500 {
		t.Errorf("uc defaults %+v", c)
	}
	c, err = parseArgs([]string{"srq", "-d", "rxea", "-i", "1", "-g", "1", "-s", "0x40", "-n", "010", "-r", "64", "-q", "8",
		"-m", "2048", "-l", "3", "-p", "20000", "-e", "-c", "10.99.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	want := config{mode: modeSRQ, tcpPort: 20000, ibDev: "rxea", ibPort: 1, size: 64, mtu: uverbs.MTU2048, rxDepth: 64,
		iters: 8, sl: 3, events: true, gidx: 1, numQP: 8, clients: 1, validate: true, server: "10.99.0.2"}
	if c != want {
		t.Errorf("parsed %+v\nwant   %+v", c, want)
	}
	// xsrq: -c is --clients (an argument), -n is --num_tests (default 5).
	if c, _ := parseArgs([]string{"xsrq"}); c.mode != modeXSRQ || c.iters != 5 || c.clients != 1 || c.size != 4096 {
		t.Errorf("xsrq defaults %+v", c)
	}
	c, err = parseArgs([]string{"xsrq", "-c", "3", "-n", "7", "-e", "-g", "1"})
	if err != nil || c.clients != 3 || c.iters != 7 || !c.events || c.validate || c.gidx != 1 {
		t.Errorf("xsrq -c 3 -n 7 -e -g 1: %+v, %v", c, err)
	}
	if _, err := parseArgs([]string{"xsrq", "-o"}); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("xsrq -o: %v", err)
	}
	if _, err := parseArgs([]string{"xsrq", "-q", "2"}); err == nil {
		t.Errorf("xsrq -q (srq's option) was accepted")
	}
	for _, bad := range [][]string{{"-m", "1000"}, {"-p", "70000"}, {"-i", "0"}, {"a", "b"}, {"-n", "x"}} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) succeeded", bad)
		} else if _, ok := err.(getopt.UsageError); !ok {
			t.Errorf("parseArgs(%q): %v is not a usage error", bad, err)
		}
	}
	if _, err := parseArgs([]string{"srq", "-q", "32", "-r", "16"}); err == nil || !strings.Contains(err.Error(), "rx_depth 16 is too small for 32 QPs") {
		t.Errorf("srq -q 32 -r 16: %v", err)
	}
	if _, err := parseArgs([]string{"srq", "-q", "256", "-r", "1000"}); err == nil || !strings.Contains(err.Error(), "must be less than 255") {
		t.Errorf("srq -q 256: %v", err)
	}
	if _, err := parseArgs([]string{"-o"}); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("-o: %v", err)
	}
}

// A usage error prints the usage text and exits 1 before touching a device.
func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"ud", "-m", "1024"}, &out, &errb); rc != 1 {
		t.Errorf("exit %d", rc)
	}
	if !strings.Contains(out.String(), "Usage:") || !strings.Contains(out.String(), "pingpong ud <host>") {
		t.Errorf("usage text:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "invalid option -- 'm'") {
		t.Errorf("stderr: %s", errb.String())
	}
}
