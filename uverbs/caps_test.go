package uverbs_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// TestCapabilityChecksQueryOnce: a capability check (here OpenXRCD's, on a
// fake device without XRC) queries the device the first time only; later
// checks, and checks after the program's own QueryDevice, read the kept
// attributes and make no syscall, as libibverbs' checks of the attributes
// its providers read at open make none.
func TestCapabilityChecksQueryOnce(t *testing.T) {
	for _, queryFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "checks only", true: "QueryDevice first"}[queryFirst], func(t *testing.T) {
			c := openAllocs(t, uverbs.DriverRXE)
			want := uint64(1) // the first check's QUERY_DEVICE
			if queryFirst {
				if _, err := c.QueryDevice(); err != nil {
					t.Fatal(err)
				}
				want = 0
			}
			for i := range 3 {
				before := c.Syscalls()
				if _, err := c.OpenXRCD(uverbs.XRCDOptions{}); !errors.Is(err, uverbs.ErrNotSupported) {
					t.Fatalf("OpenXRCD on a device without XRC: %v, want ErrNotSupported", err)
				}
				if n := c.Syscalls() - before; n != want {
					t.Errorf("check %d: %d syscalls, want %d", i, n, want)
				}
				want = 0
			}
		})
	}
}
