package rsocket_test

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// ownMRs counts this process's memory regions on device dev (rdma res
// show mr: one line per MR, naming its device and the pid of the thread
// that registered it, a task of this process's).
func ownMRs(t *testing.T, dev string) int {
	t.Helper()
	out := rigtest.Command(t, "rdma", "res", "show", "mr")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "dev" || f[1] != dev {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "pid" {
				if _, err := os.Stat("/proc/self/task/" + f[i+1]); err == nil {
					n++
				}
				break
			}
		}
	}
	return n
}

// TestRigAcceptReadyBeforeWait: on a listener bound to one device's
// address, a waiting Accept has its next connection's two MRs (send side,
// receive side) registered already; Close while it waits returns nil (the
// MRs are gone before the listener's PD closes), the Accept returns
// net.ErrClosed, and the MRs are gone. A connection accepted after that
// wait works (it uses the ready memory).
func TestRigAcceptReadyBeforeWait(t *testing.T) {
	rigtest.Require(t)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			rigtest.Device(t, p.listenOn)
			before := ownMRs(t, p.listenOn)
			lc := rsocket.ListenConfig{}
			l, err := lc.Listen(t.Context(), "tcp", p.listen.String()+":0")
			if err != nil {
				t.Fatal(err)
			}
			accepted := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err == nil {
					c.Close()
				}
				accepted <- err
			}()
			deadline := time.Now().Add(20 * time.Second)
			for ownMRs(t, p.listenOn) != before+2 {
				if time.Now().After(deadline) {
					t.Fatalf("waiting Accept: %d MRs of this process (pid %d) on %s; want %d\n%s", ownMRs(t, p.listenOn), os.Getpid(), p.listenOn, before+2, rigtest.Command(t, "rdma", "res", "show", "mr"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close while Accept waits: %v", err)
			}
			if err := <-accepted; !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close: %v; want net.ErrClosed", err)
			}
			if n := ownMRs(t, p.listenOn); n != before {
				t.Errorf("after Close: %d MRs of this process on %s; want %d", n, p.listenOn, before)
			}

			// A connection on memory made ready before the wait.
			client, server := pair(t, p, rsocket.Config{})
			if _, err := client.Write([]byte("ready")); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 5)
			if _, err := server.Read(b); err != nil || string(b) != "ready" {
				t.Fatalf("read %q, %v", b, err)
			}
		})
	}
}
