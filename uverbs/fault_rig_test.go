package uverbs

import (
	"errors"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestFDExhaustionRig opens contexts and completion channels with
// RLIMIT_NOFILE a few descriptors above what the process holds: the verb
// that runs out fails with EMFILE and advice, whatever step of Open it was
// at, and once everything is closed no descriptor, device mapping or kernel
// object is left.
func TestFDExhaustionRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			d := rigDevice(t, name)
			fds, devMaps := countFDs(t), deviceMappings(t)
			res := kernelResources(t, name)
			var old unix.Rlimit
			if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
				t.Fatal(err)
			}
			// Each headroom leaves Open (two descriptors) or a channel
			// (one) short at a different step.
			for headroom := 1; headroom <= 6; headroom++ {
				var ctxs []*Context
				var chans []*CompChannel
				low := unix.Rlimit{Cur: uint64(fds + headroom), Max: old.Max}
				if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
					t.Fatal(err)
				}
				var err error
				for i := 0; i < 10 && err == nil; i++ {
					var c *Context
					if c, err = Open(d); err == nil {
						ctxs = append(ctxs, c)
						var ch *CompChannel
						if ch, err = c.CreateCompChannel(); err == nil {
							chans = append(chans, ch)
						}
					}
				}
				if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
					t.Fatal(err)
				}
				var e *OpError
				switch {
				case err == nil:
					t.Errorf("headroom %d: no verb ran out of descriptors", headroom)
				case !errors.Is(err, unix.EMFILE):
					t.Errorf("headroom %d: err = %v, want EMFILE", headroom, err)
				case !errors.As(err, &e) || !strings.Contains(e.Advice, "ulimit -n"):
					t.Errorf("headroom %d: err = %v, want advice about RLIMIT_NOFILE", headroom, err)
				default:
					t.Logf("headroom %d: %d contexts, %d channels, then %v", headroom, len(ctxs), len(chans), err)
				}
				for _, ch := range chans {
					if err := ch.Close(); err != nil {
						t.Error(err)
					}
				}
				for _, c := range ctxs {
					if err := c.Close(); err != nil {
						t.Error(err)
					}
				}
				if got := countFDs(t); got != fds {
					t.Errorf("headroom %d: open fds %d → %d", headroom, fds, got)
				}
				if got := deviceMappings(t); got != devMaps {
					t.Errorf("headroom %d: device mappings %d → %d", headroom, devMaps, got)
				}
			}
			if got := kernelResources(t, name); got != res {
				t.Errorf("kernel resources %q → %q", res, got)
			}
		})
	}
}
