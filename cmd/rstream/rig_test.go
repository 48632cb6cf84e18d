package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// syncBuffer is an io.Writer safe for the goroutine that runs a side.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goSide runs goverbs' rstream with args in this process.
func goSide(args ...string) (code int, out string) {
	var b syncBuffer
	code = run(append([]string{"rstream"}, args...), &b, &b)
	return code, b.String()
}

func rdmaCore(t *testing.T) string {
	p, err := exec.LookPath("rstream")
	if err != nil {
		if rigtest.InRig() {
			t.Fatal("no rdma-core rstream in PATH")
		}
		t.Skip("no rstream")
	}
	return p
}

// result checks one rstream output: a header and one result line.
func result(t *testing.T, who, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "name      bytes   xfers") || !strings.HasPrefix(lines[len(lines)-1], "custom") {
		t.Errorf("%s's output is not rstream's header and a result:\n%s", who, out)
	}
}

// ifaces are the rig's paths between two rstreams: server bind address,
// client source address.
var ifaces = []struct{ name, server, client string }{
	{"rxe0", "10.0.2.15", ""},
	{"veth", "10.99.0.1", "10.99.0.2"},
	{"siw0", "10.0.3.15", ""}, // iWARP: rsocket's message variant
}

// interopSizes are transfer sizes and counts (-S, -C): 1 byte to 16 MiB.
var interopSizes = []struct{ size, count int }{
	{1, 100}, {64, 100}, {4096, 100}, {65536, 50}, {1 << 20, 10}, {16 << 20, 2},
}

// TestRigInteropRDMACoreServer: rdma-core's rstream serves, goverbs'
// dials; -T v checks every byte on both sides.
func TestRigInteropRDMACoreServer(t *testing.T) {
	rigtest.Require(t)
	bin := rdmaCore(t)
	port := 7600
	for _, p := range ifaces {
		for _, s := range interopSizes {
			port++
			t.Run(fmt.Sprintf("%s/%d", p.name, s.size), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				size, count := fmt.Sprint(s.size), fmt.Sprint(s.count)
				srv := exec.CommandContext(ctx, bin, "-b", p.server, "-p", fmt.Sprint(port), "-S", size, "-C", count, "-T", "b", "-T", "v")
				var sout bytes.Buffer
				srv.Stdout, srv.Stderr = &sout, &sout
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
				defer srv.Process.Kill()
				args := []string{"-s", p.server, "-p", fmt.Sprint(port), "-S", size, "-C", count, "-T", "v"}
				if p.client != "" {
					args = append(args, "-b", p.client)
				}
				var code int
				var out string
				for try := 0; try < 50; try++ {
					if code, out = goSide(args...); code == 0 || !strings.Contains(out, "rconnect") {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if code != 0 {
					t.Errorf("goverbs rstream %v: exit %d\n%s", args, code, out)
				}
				err := srv.Wait()
				if err != nil {
					t.Errorf("rdma-core rstream server: %v\n%s", err, sout.String())
				}
				result(t, "goverbs client", out)
				result(t, "rdma-core server", sout.String())
			})
		}
	}
}

// TestRigInteropRDMACoreClient: goverbs' rstream serves, rdma-core's
// dials.
func TestRigInteropRDMACoreClient(t *testing.T) {
	rigtest.Require(t)
	bin := rdmaCore(t)
	port := 7700
	for _, p := range ifaces {
		for _, s := range interopSizes {
			port++
			t.Run(fmt.Sprintf("%s/%d", p.name, s.size), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				size, count := fmt.Sprint(s.size), fmt.Sprint(s.count)
				type res struct {
					code int
					out  string
				}
				done := make(chan res, 1)
				go func() {
					c, o := goSide("-b", p.server, "-p", fmt.Sprint(port), "-S", size, "-C", count, "-T", "v")
					done <- res{c, o}
				}()
				args := []string{"-s", p.server, "-p", fmt.Sprint(port), "-S", size, "-C", count, "-T", "b", "-T", "v"}
				if p.client != "" {
					args = append(args, "-b", p.client)
				}
				var out []byte
				var err error
				for try := 0; try < 50; try++ {
					out, err = exec.CommandContext(ctx, bin, args...).CombinedOutput()
					if err == nil || !strings.Contains(string(out), "rconnect") {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					t.Errorf("rdma-core rstream %v: %v\n%s", args, err, out)
				}
				select {
				case r := <-done:
					if r.code != 0 {
						t.Errorf("goverbs rstream server: exit %d\n%s", r.code, r.out)
					}
					result(t, "goverbs server", r.out)
				case <-ctx.Done():
					t.Fatal("goverbs rstream server did not finish")
				}
				result(t, "rdma-core client", string(out))
			})
		}
	}
}
