package rigtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Proc is a started process whose output is collected: a tool run beside
// goverbs in a rig test (rdma-core's, perftest's, or the test binary
// re-executed as a program).
type Proc struct {
	Name           string
	Cmd            *exec.Cmd
	Stdout, Stderr bytes.Buffer // read them after Done
	done           chan struct{}
	err            error
}

// Start starts cmd, collecting its output, or fails t.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.Stdout, &p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (cmd.Wait's error), once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Wait waits for the process to end (a command made with
// exec.CommandContext is killed when its context ends) and returns Err.
func (p *Proc) Wait() error { return p.Err() }

// Output is the command line and everything the process printed, for a
// failure message.
func (p *Proc) Output() string {
	return fmt.Sprintf("---- %s: %s\n%s---- stderr:\n%s", p.Name, strings.Join(p.Cmd.Args, " "), p.Stdout.String(), p.Stderr.String())
}

// WaitTCPListen waits until a TCP socket listens on port (read from
// /proc/net/tcp and tcp6: connecting to find out would be a server's one
// accepted client), or fails t when the server p ends first or timeout
// passes.
func WaitTCPListen(t testing.TB, p *Proc, port int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if TCPListening(port) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("the server ended before listening: %v\n%s", p.err, p.Output())
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on TCP port %d after %v\n%s", port, timeout, p.Output())
}

// TCPListening reports whether a TCP socket (IPv4 or IPv6) listens on port.
func TCPListening(port int) bool {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" { // TCP_LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
				return true
			}
		}
	}
	return false
}

// KernelState is what the guest's kernel shows of the RDMA connections for
// a case that hung: the rdma_cm IDs and QPs, the TCP sockets with their
// queues (siw's connections are kernel TCP sockets: a Recv-Q left unread on
// a connected one is an FPDU its QP's receive path was never told of) and
// the kernel log's last 30 lines.
func KernelState() string {
	var b strings.Builder
	for _, c := range [][]string{{"rdma", "resource", "show", "cm_id"}, {"rdma", "resource", "show", "qp"}, {"sh", "-c", "ss -tna 2>/dev/null || netstat -tn"}, {"dmesg"}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if c[0] == "dmesg" && len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "$ %s (%v)\n%s\n", strings.Join(c, " "), err, strings.Join(lines, "\n"))
	}
	return b.String()
}

// UnreadOn lists the established TCP connections on local port whose
// receive queue holds bytes nobody has read (from /proc/net/tcp), as
// "local remote bytes". On a siw connection that waits for its peer's
// first message this is the mark of siw_accept's race: the kernel sent the
// MPA reply before it gave the socket's receive callback to the QP, the
// peer's first FPDU arrived in between and stays unread until more data
// comes (Linux's siw_cm.c, 6.1 to 7.x).
func UnreadOn(port int) []string {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fs := strings.Fields(line)
		if len(fs) < 5 || fs[3] != "01" { // TCP_ESTABLISHED
			continue
		}
		_, hexPort, _ := strings.Cut(fs[1], ":")
		_, hexRx, _ := strings.Cut(fs[4], ":")
		p, err1 := strconv.ParseUint(hexPort, 16, 16)
		rx, err2 := strconv.ParseUint(hexRx, 16, 32)
		if err1 != nil || err2 != nil || int(p) != port || rx == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %d", hexAddr(fs[1]), hexAddr(fs[2]), rx))
	}
	return out
}

// hexAddr is /proc/net/tcp's "0F03000A:1F90" as "10.0.3.15:8080".
func hexAddr(s string) string {
	h, hp, _ := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(h, 16, 32)
	p, err2 := strconv.ParseUint(hp, 16, 16)
	if err1 != nil || err2 != nil || len(h) != 8 {
		return s
	}
	// the address is in network order, printed as a little-endian word
	return fmt.Sprintf("%d.%d.%d.%d:%d", a&0xff, a>>8&0xff, a>>16&0xff, a>>24, p)
}
