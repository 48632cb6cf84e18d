package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestXRCDRig: rxe and siw have no XRC (their capability flags lack
// IB_DEVICE_XRC, and their kernel drivers have no alloc_xrcd), so
// OpenXRCD is refused with ErrNotSupported before any command; sent
// anyway, OPEN_XRCD is refused by the kernel itself (ib_alloc_xrcd_user:
// EOPNOTSUPP without the driver op), and the context goes on working.
func TestXRCDRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c := openRig(t, name, PolicyAuto)
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			if a.CapFlags&DeviceXRC != 0 {
				t.Fatalf("%s reports XRC (%v): this kernel has it; the test expects none", name, a.CapFlags)
			}
			before := c.Syscalls()
			if _, err := c.OpenXRCD(XRCDOptions{}); !errors.Is(err, ErrNotSupported) {
				t.Errorf("OpenXRCD on %s: %v, want ErrNotSupported", name, err)
			} else {
				t.Logf("OpenXRCD refused: %v (%d syscalls: its check read the attributes the QueryDevice above kept)", err, c.Syscalls()-before)
			}
			c.skipCapChecks = true
			x, err := c.OpenXRCD(XRCDOptions{})
			c.skipCapChecks = false
			if err == nil {
				x.Close()
				t.Fatalf("%s's kernel opened an XRC domain", name)
			}
			if !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("OPEN_XRCD on %s: %v, want the kernel's EOPNOTSUPP", name, err)
			} else {
				t.Logf("the kernel's answer: %v", err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatalf("AllocPD after the refusal: %v", err)
			}
			pd.Close()
		})
	}
}
