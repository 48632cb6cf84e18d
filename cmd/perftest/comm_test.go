package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// A message as perftest 4.5's sprintf(KEY_PRINT_FMT_GID) writes it.
const perftestMsgGID = "0000:0080:000011:b5bbb6:00000452:000055a6f9ff1000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:02:0f:00000000:"

func TestDestWire(t *testing.T) {
	d := dest{lid: 0, outReads: 128, qpn: 0x11, psn: 0xb5bbb6, rkey: 0x452, vaddr: 0x55a6f9ff1000,
		gid: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 0, 14: 2, 15: 15}}
	b := d.encode(true)
	if len(b) != 108 || string(b[:107]) != perftestMsgGID || b[107] != 0 {
		t.Fatalf("encode with GID = %q (%d bytes), want perftest's %q and a NUL (108 bytes)", b, len(b), perftestMsgGID)
	}
	got, err := decodeDest(b, true)
	if err != nil || got != d {
		t.Fatalf("decode(encode(d)) = %+v, %v; want %+v", got, err, d)
	}
	d.gid = [16]byte{}
	b = d.encode(false)
	want := "0000:0080:000011:b5bbb6:00000452:000055a6f9ff1000:00000000"
	if len(b) != 59 || string(b[:58]) != want || b[58] != 0 {
		t.Fatalf("encode without GID = %q (%d bytes), want %q and a NUL (59 bytes)", b, len(b), want)
	}
	if got, err := decodeDest(b, false); err != nil || got != d {
		t.Fatalf("decode(encode(d)) = %+v, %v; want %+v", got, err, d)
	}
	// One side with -x and the other without: a clear error, not garbage.
	if _, err := decodeDest(d.encode(false), true); err == nil || !strings.Contains(err.Error(), "-x") {
		t.Errorf("a GID-less message read as one with a GID: err %v, want one naming -x", err)
	}
	if _, err := decodeDest([]byte("zz:"), false); err == nil {
		t.Error("decodeDest accepted garbage")
	}
}

// TestExchange runs the whole start of the exchange between a client and
// a server comm over a real loopback socket: versions, sizes, MTU, one
// address each way, the reports, the close.
func TestExchange(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer l.Close()
	type result struct {
		ver       string
		cycle, cl int
		mtu       int
		peer      dest
		rep       bwReport
		err       error
	}
	side := func(c *comm, cycle, line, mtu int, mine dest, rep bwReport) (r result) {
		if r.ver, r.err = c.versions(); r.err != nil {
			return
		}
		if r.cycle, r.cl, r.err = c.sysData(cycle, line); r.err != nil {
			return
		}
		if r.mtu, r.err = c.mtu(mtu); r.err != nil {
			return
		}
		if r.peer, r.err = c.handshake(mine); r.err != nil {
			return
		}
		if r.rep, r.err = c.bwReports(rep); r.err != nil {
			return
		}
		r.err = c.closeConn(mine)
		return
	}
	sd := dest{qpn: 7, psn: 0x123456, rkey: 9, vaddr: 1 << 40, gid: [16]byte{15: 1}}
	cd := dest{qpn: 8, psn: 0x654321, rkey: 10, vaddr: 1 << 41, gid: [16]byte{15: 2}}
	crep := bwReport{size: 65536, iters: 5000, peak: 1.5, avg: 1.25, msgRateMpps: 0.002}
	done := make(chan result)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- side(&comm{conn: c, withGID: true}, 4096, 64, 3, sd, bwReport{})
	}()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cr := side(&comm{conn: c, client: true, withGID: true}, 16384, 128, 5, cd, crep)
	sr := <-done
	if cr.err != nil || sr.err != nil {
		t.Fatalf("client: %v, server: %v", cr.err, sr.err)
	}
	want := result{ver: "6.06", cycle: 16384, cl: 128, mtu: 3}
	for _, r := range []struct {
		name string
		got  result
		peer dest
		rep  bwReport
	}{{"client", cr, sd, bwReport{}}, {"server", sr, cd, crep}} {
		w := want
		w.peer, w.rep = r.peer, r.rep
		if g, ws := fmt.Sprintf("%+v", r.got), fmt.Sprintf("%+v", w); g != ws {
			t.Errorf("%s got\n%s\nwant\n%s", r.name, g, ws)
		}
	}
}

func TestCHex(t *testing.T) {
	for _, tc := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0xaf417, 6, "0xaf417"}, {0x55a6f9ff1000, 16, "0x0055a6f9ff1000"}, {0x80, 4, "0x80"}} {
		if got := cHex(tc.v, tc.width); got != tc.want {
			t.Errorf("cHex(%#x, %d) = %q, want %q (C's %%#0%dx)", tc.v, tc.width, got, tc.want, tc.width)
		}
	}
}

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		rest int
	}{
		{[]string{"/usr/bin/ib_write_bw", "-s", "8"}, "write_bw", 2},
		{[]string{"gv_ib_read_lat"}, "read_lat", 0},
		{[]string{"perftest", "send_lat", "-n", "5"}, "send_lat", 2},
		{[]string{"perftest", "ib_atomic_bw"}, "atomic_bw", 0},
	} {
		got, rest, err := pick(tc.args)
		if err != nil || got.name != tc.want || len(rest) != tc.rest {
			t.Errorf("pick(%q) = %q, %q, %v; want %q with %d arguments left", tc.args, got.name, rest, err, tc.want, tc.rest)
		}
	}
	if _, _, err := pick([]string{"perftest", "nonsense"}); err == nil {
		t.Error("pick accepted an unknown test")
	}
}

func TestParseDependencies(t *testing.T) {
	c, err := parse(tests[4], []string{"-l", "16", "-s", "64", "-n", "160"}) // write_bw
	if err != nil {
		t.Fatal(err)
	}
	if c.cqMod != 16 || c.txDepth != 128 || c.postList != 16 || c.size != 64 {
		t.Errorf("write_bw -l 16 -s 64 -n 160: cq_mod %d tx_depth %d post_list %d size %d; want 16, 128, 16, 64", c.cqMod, c.txDepth, c.postList, c.size)
	}
	c, err = parse(tests[0], nil) // send_lat defaults
	if err != nil || c.size != 2 || c.iters != 1000 || c.txDepth != 1 || c.cqMod != 1 || c.rxDepth != 512 {
		t.Errorf("send_lat defaults: %+v, %v", c, err)
	}
	c, err = parse(tests[3], []string{"-s", "65536"}) // send_bw, large: cq_mod off
	if err != nil || c.cqMod != 1 || !c.noPeak {
		t.Errorf("send_bw server -s 65536: cq_mod %d noPeak %v, %v; want 1 and true", c.cqMod, c.noPeak, err)
	}
	for _, bad := range [][]string{{"-R", "-c", "UC"}, {"-R", "-c", "UD"}, {"-D", "5", "-e"}, {"-D", "5", "-a"}, {"-D", "2", "-f", "1"}, {"-c", "XRC"}, {"-n", "2"}, {"-m", "1000"}, {"a", "b"}} {
		if _, err := parse(tests[0], bad); err == nil {
			t.Errorf("parse(%q) accepted it", bad)
		}
	}
	if c, err := parse(tests[3], []string{"-D", "5", "-s", "64"}); err != nil || c.margin != 1 || !c.noPeak || c.txDepth != 128 {
		t.Errorf("send_bw -D 5: margin %d noPeak %v tx_depth %d, %v; want perftest's duration/4 = 1, no peak, tx_depth unclamped 128", c.margin, c.noPeak, c.txDepth, err)
	}
	if c, err := parse(tests[0], []string{"-D", "3", "-f", "0"}); err != nil || c.margin != 0 {
		t.Errorf("send_lat -D 3 -f 0: margin %d, %v; want 0", c.margin, err)
	}
	if c, err := parse(tests[0], []string{"-R"}); err != nil || !c.rdmaCM || !c.commCM {
		t.Errorf("send_lat -R: rdmaCM %v commCM %v, %v; want both", c.rdmaCM, c.commCM, err)
	}
	if c, err := parse(tests[0], []string{"-z"}); err != nil || c.rdmaCM || !c.commCM {
		t.Errorf("send_lat -z: rdmaCM %v commCM %v, %v; want commCM only", c.rdmaCM, c.commCM, err)
	}
	if _, err := parse(tests[4], []string{"-e"}); err == nil || !strings.Contains(err.Error(), "WRITE") {
		t.Errorf("write_bw -e: %v, want perftest's refusal of events on WRITE", err)
	}
	if _, err := parse(tests[4], []string{"-l", "16", "-n", "100"}); err == nil {
		t.Error("write_bw -l 16 -n 100 accepted: perftest wants iterations a multiple of the post list")
	}
}

// TestResultLines: the rig tests' patterns read perftest's result lines
// as perftest prints them (padding, inf from a failed calibration) and as
// goverbs prints them.
func TestResultLines(t *testing.T) {
	for _, l := range []string{
		" 8       200          37.21          899.02       38.46    \t       57.88       \t84.00  \t\t884.36  \t\t899.02 \n",
		" 2       200          inf            inf          inf      \t       inf         \t-nan   \t\tinf     \t\tinf    \n",
	} {
		if !latLine.MatchString(l) {
			t.Errorf("latLine does not match perftest's %q", l)
		}
	}
	if l := " 65536      100              11.01              3.39   \t\t   0.000054\n"; !bwLine.MatchString(l) {
		t.Errorf("bwLine does not match perftest's %q", l)
	}
	var out strings.Builder
	s := &session{out: &out, posted: []int64{0, 2000, 4000, 6500, 9000, 11000, 13000}}
	s.printLat(2, 2)
	if !latLine.MatchString(out.String()) {
		t.Errorf("latLine does not match goverbs' %q", out.String())
	}
	out.Reset()
	s.printBW(bwReport{size: 64, iters: 1000, peak: 1.5, avg: 1.25, msgRateMpps: 0.02})
	if !bwLine.MatchString(out.String()) {
		t.Errorf("bwLine does not match goverbs' %q", out.String())
	}
}

// TestBinaryDest checks rdma_write_keys' layout: struct pingpong_dest,
// every field big-endian, vaddr at 24 after 4 bytes of padding.
func TestBinaryDest(t *testing.T) {
	d := dest{lid: 0x1234, outReads: 16, qpn: 0x11, psn: 0xabcdef, rkey: 0xdeadbeef, vaddr: 0x0102030405060708, srqn: 7}
	for i := range d.gid {
		d.gid[i] = byte(0xf0 + i)
	}
	b := d.encodeBinary(1)
	want := []byte{0, 0, 0x12, 0x34, 0, 0, 0, 16, 0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0,
		1, 2, 3, 4, 5, 6, 7, 8}
	if len(b) != cmMsg || string(b[:32]) != string(want) || b[32] != 0xf0 || b[47] != 0xff || b[51] != 7 || b[55] != 1 {
		t.Fatalf("encodeBinary: % x", b)
	}
	got, err := decodeBinary(b)
	d.srqn = 0 // perftest does not read it
	if err != nil || got != d {
		t.Errorf("decodeBinary: %+v, %v; want %+v", got, err, d)
	}
	if _, err := decodeBinary(b[:40]); err == nil {
		t.Error("decodeBinary accepted 40 bytes")
	}
}
