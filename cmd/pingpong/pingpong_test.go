package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// runEnv makes the test binary run the program instead of the tests, so
// the rig tests start "ours" as a process without a separately built
// binary: GOVERBS_PINGPONG_MAIN=1 ./cmd_pingpong.test rc -d rxe0 ...
const runEnv = "GOVERBS_PINGPONG_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// side is one process of a ping-pong: ours (this binary) or rdma-core's
// ibv_<mode>_pingpong, with its device and its extra flags.
type side struct {
	ours bool
	dev  string
}

func (s side) String() string {
	if s.ours {
		return "goverbs@" + s.dev
	}
	return "rdma-core@" + s.dev
}

// command builds the command line of one side. args are the flags both
// sides share; the client gets the server's host last.
func command(t *testing.T, ctx context.Context, mode string, s side, args []string, host string) *exec.Cmd {
	t.Helper()
	args = append([]string{"-d", s.dev}, args...)
	if host != "" {
		args = append(args, host)
	}
	if s.ours {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, self, append([]string{mode}, args...)...)
		cmd.Env = append(os.Environ(), runEnv+"=1")
		return cmd
	}
	tool := "ibv_" + mode + "_pingpong"
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is not in PATH: the rig has rdma-core's examples", tool)
	}
	return exec.CommandContext(ctx, path, args...)
}

var (
	bytesLine = regexp.MustCompile(`(?m)^(\d+) bytes in (\d+\.\d\d) seconds = (\d+\.\d\d) Mbit/sec$`)
	itersLine = regexp.MustCompile(`(?m)^(\d+) iters in (\d+\.\d\d) seconds = (\d+\.\d\d) usec/iter$`)
	addrLine  = regexp.MustCompile(`(?m)^  (local|remote) address: +(LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6})[:,] GID (\S+)$`)
)

// addresses returns a process's "local address" and "remote address"
// lines, normalized (ud_pingpong's local line has a colon before GID).
func addresses(out string) (local, remote []string) {
	for _, m := range addrLine.FindAllStringSubmatch(out, -1) {
		a := m[2] + ", GID " + m[3]
		if m[1] == "local" {
			local = append(local, a)
		} else {
			remote = append(remote, a)
		}
	}
	return local, remote
}

// pingpongCase runs one server and one client to completion and checks
// what both printed: exit 0, the summary lines with the right byte and
// iteration counts, no payload error, and each side's view of the other's
// addresses equal to what the other printed as its own (which also
// checks that our GID text is inet_ntop's).
func pingpongCase(t *testing.T, mode string, server, client side, host string, port int, flags []string, size, iters, qps int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"-p", strconv.Itoa(port), "-g", "1", "-c", "-n", strconv.Itoa(iters)}, flags...)
	srv := rigtest.Start(t, "server "+server.String(), command(t, ctx, mode, server, args, ""))
	rigtest.WaitTCPListen(t, srv, port, 30*time.Second)
	cli := rigtest.Start(t, "client "+client.String(), command(t, ctx, mode, client, args, host))
	cerr, serr := cli.Wait(), srv.Wait()
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v, server: %v\n%s%s", cerr, serr, srv.Output(), cli.Output())
	}
	figures := map[string]string{}
	for _, p := range []*rigtest.Proc{srv, cli} {
		out := p.Stdout.String()
		b, it := bytesLine.FindStringSubmatch(out), itersLine.FindStringSubmatch(out)
		if b == nil || it == nil {
			t.Fatalf("%s printed no summary lines\n%s", p.Name, p.Output())
		}
		if want := strconv.Itoa(size * iters * 2); b[1] != want {
			t.Errorf("%s: %s bytes, want %s", p.Name, b[1], want)
		}
		if it[1] != strconv.Itoa(iters) {
			t.Errorf("%s: %s iters, want %d", p.Name, it[1], iters)
		}
		if strings.Contains(out, "invalid data") {
			t.Errorf("%s: payload check failed\n%s", p.Name, p.Output())
		}
		figures[p.Name] = it[3]
	}
	sl, sr := addresses(srv.Stdout.String())
	cl, cr := addresses(cli.Stdout.String())
	if len(sl) != qps || len(cl) != qps || strings.Join(sl, "|") != strings.Join(cr, "|") || strings.Join(cl, "|") != strings.Join(sr, "|") {
		t.Errorf("address lines disagree (want %d each):\nserver local  %q\nclient remote %q\nclient local  %q\nserver remote %q",
			qps, sl, cr, cl, sr)
	}
	t.Logf("%s usec/iter: server %s %s, client %s %s; server's first local line: %s",
		mode, server, figures[srv.Name], client, figures[cli.Name], first(sl))
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// portSeq hands each case its own TCP port, so no case can meet another's
// socket.
var portSeq = struct {
	sync.Mutex
	next int
}{next: 18600}

func nextPort() int {
	portSeq.Lock()
	defer portSeq.Unlock()
	portSeq.next++
	return portSeq.next
}

// rigIters is the iterations of each interop case: the rig may run rxe
// under TCG, where an iteration costs milliseconds.
const rigIters = 200

// TestInteropRig runs goverbs' pingpong against rdma-core's examples in
// both roles (and against itself), in rc, ud, srq and uc modes, on rxe0 in
// loopback (server and client on 127.0.0.1) and across the veth pair
// (server on rxeb at 10.99.0.2, client on rxea), polling and, in
// loopback, sleeping on completion events (-e). Payloads are checked on
// both sides (-c).
func TestInteropRig(t *testing.T) {
	rigtest.Require(t)
	for _, d := range []string{"rxe0", "rxea", "rxeb"} {
		rigtest.Device(t, d)
	}
	type topo struct {
		name           string
		srvDev, cliDev string
		host           string
		events         []bool
	}
	topos := []topo{
		{"loopback", "rxe0", "rxe0", "127.0.0.1", []bool{false, true}},
		{"veth", "rxeb", "rxea", "10.99.0.2", []bool{false}},
	}
	modes := []struct {
		name      string
		size, qps int
	}{{"rc", 4096, 1}, {"ud", 1024, 1}, {"srq", 4096, 16}, {"uc", 4096, 1}}
	pairs := []struct {
		name             string
		srvOurs, cliOurs bool
	}{{"goverbs-server", true, false}, {"goverbs-client", false, true}, {"goverbs-both", true, true}}
	for _, tp := range topos {
		for _, m := range modes {
			for _, ev := range tp.events {
				for _, p := range pairs {
					name := fmt.Sprintf("%s/%s/%s", tp.name, m.name, p.name)
					var flags []string
					if ev {
						name += "/events"
						flags = append(flags, "-e")
					}
					t.Run(name, func(t *testing.T) {
						pingpongCase(t, m.name, side{p.srvOurs, tp.srvDev}, side{p.cliOurs, tp.cliDev}, tp.host, nextPort(),
							flags, m.size, rigIters, m.qps)
					})
				}
			}
		}
	}
}

// TestInteropLargeRig sends messages of several pages (many packets each,
// and -c checks every page) both ways between goverbs and rdma-core.
func TestInteropLargeRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	const size = 3*4096 + 100
	flags := []string{"-s", strconv.Itoa(size), "-r", "64"}
	t.Run("goverbs-server", func(t *testing.T) {
		pingpongCase(t, "rc", side{true, "rxe0"}, side{false, "rxe0"}, "127.0.0.1", nextPort(), flags, size, 200, 1)
	})
	t.Run("goverbs-client", func(t *testing.T) {
		pingpongCase(t, "rc", side{false, "rxe0"}, side{true, "rxe0"}, "127.0.0.1", nextPort(), flags, size, 200, 1)
	})
	t.Run("srq-4qps", func(t *testing.T) {
		f := []string{"-s", strconv.Itoa(size), "-q", "4", "-r", "32"}
		pingpongCase(t, "srq", side{false, "rxe0"}, side{true, "rxe0"}, "127.0.0.1", nextPort(), f, size, 200, 4)
	})
}

// TestPayloadMismatchRig: a client that sends a different payload (no -c
// on rdma-core's side: its buffer has no zeroed page starts) makes our
// server's check fail with rdma-core's message, and exit 1.
func TestPayloadMismatchRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := nextPort()
	common := []string{"-p", strconv.Itoa(port), "-g", "1", "-n", "10"}
	srv := rigtest.Start(t, "server", command(t, ctx, "rc", side{true, "rxe0"}, append(common, "-c"), ""))
	rigtest.WaitTCPListen(t, srv, port, 30*time.Second)
	cli := rigtest.Start(t, "client", command(t, ctx, "rc", side{false, "rxe0"}, common, "127.0.0.1"))
	if err := cli.Wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.Output())
	}
	err := srv.Wait()
	if err == nil || !strings.Contains(srv.Stdout.String(), "invalid data in page 0") {
		t.Errorf("server exit %v, want status 1 and \"invalid data in page 0\"\n%s", err, srv.Output())
	}
}

// TestXSRQRefusedRig: rxe has no XRC, so ibv_xsrq_pingpong and goverbs'
// xsrq mode both stop at the XRC domain ("Couldn't Open the XRC Domain"),
// with exit status 1, before any TCP exchange (goverbs: ErrNotSupported
// from the capability check).
func TestXSRQRefusedRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	for _, ours := range []bool{false, true} {
		s := side{ours, "rxe0"}
		t.Run(s.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := command(t, ctx, "xsrq", s, []string{"-p", strconv.Itoa(nextPort()), "-g", "1"}, "")
			out, err := cmd.CombinedOutput()
			if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "Couldn't Open the XRC Domain") {
				t.Fatalf("%v: exit %v, want status 1 at \"Couldn't Open the XRC Domain\"\n%s", s, err, out)
			}
			if ours && !strings.Contains(string(out), "not supported") {
				t.Errorf("goverbs' refusal does not say not supported:\n%s", out)
			}
			t.Logf("%v: %s", s, strings.TrimSpace(string(out)))
		})
	}
}
