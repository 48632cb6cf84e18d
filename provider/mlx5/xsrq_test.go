package mlx5_test

import (
	"bytes"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/xsrq"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestXSRQPingpong runs cmd/pingpong's xsrq mode (ibv_xsrq_pingpong's
// protocol) with both sides on the model: a server serving two clients on
// one device (whose contexts share the file's XRC domain, as two processes
// of one host do), and a server and client on two devices of a fabric.
// Every side must print its address lines, each remote line equal to the
// peer's local one, and "success".
func TestXSRQPingpong(t *testing.T) {
	for _, tc := range []struct {
		name    string
		twoDevs bool
		clients int
		events  bool
	}{{"one-device-2-clients", false, 2, false}, {"two-devices-events", true, 1, true}, {"one-device-1", false, 1, false}, {"two-devices-2", true, 2, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := model.NewFabric()
			_, devA := newModel(t, f, model.Options{})
			devB := devA
			if tc.twoDevs {
				_, devB = newModel(t, f, model.Options{})
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			dir := t.TempDir()
			cfg := func(dev uverbs.Device, server string) xsrq.Config {
				return xsrq.Config{TCPPort: port, IBPort: 1, Size: 4096, MTU: uverbs.MTU1024, Clients: tc.clients, NumTests: 20,
					GIDIndex: -1, Server: server, Events: tc.events, XRCDPath: filepath.Join(dir, "xrc_domain"),
					Open: func() (*uverbs.Context, error) { return uverbs.Open(dev) }}
			}
			outs := make([]bytes.Buffer, 1+tc.clients)
			errs := make([]error, 1+tc.clients)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); errs[0] = xsrq.Run(cfg(devA, ""), &outs[0]) }()
			for i := 1; i <= tc.clients; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for try := 0; ; try++ {
						outs[i].Reset()
						errs[i] = xsrq.Run(cfg(devB, "127.0.0.1"), &outs[i])
						if errs[i] == nil || try == 50 || !strings.Contains(errs[i].Error(), "Couldn't connect") {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("side %d: %v\n%s", i, err, outs[i].String())
				}
				if !strings.HasSuffix(outs[i].String(), "success\n") {
					t.Errorf("side %d did not print success:\n%s", i, outs[i].String())
				}
			}
			// Every client's remote line is one of the server's local lines
			// and the other way round.
			line := regexp.MustCompile(`(?m)^ *(local|remote): (LID .*)$`)
			lines := func(s, which string) []string {
				var r []string
				for _, m := range line.FindAllStringSubmatch(s, -1) {
					if m[1] == which {
						r = append(r, m[2])
					}
				}
				return r
			}
			server := outs[0].String()
			for i := 1; i <= tc.clients; i++ {
				c := outs[i].String()
				if !contains(lines(server, "local"), lines(c, "remote")) || !contains(lines(server, "remote"), lines(c, "local")) {
					t.Errorf("client %d's address lines do not match the server's:\nserver:\n%s\nclient:\n%s", i, server, c)
				}
			}
			if n := len(lines(server, "local")); n != tc.clients {
				t.Errorf("the server printed %d local lines, want %d", n, tc.clients)
			}
		})
	}
}

func contains(all, some []string) bool {
	if len(some) != 1 {
		return false
	}
	for _, a := range all {
		if a == some[0] {
			return true
		}
	}
	return false
}
