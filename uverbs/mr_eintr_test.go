package uverbs_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestRegMRRetriesEINTR: a REG_MR the kernel answers with EINTR (a signal
// interrupted the registration, which registered nothing) is sent again,
// up to RegMRTries times in all; past that the EINTR is RegMR's error.
func TestRegMRRetriesEINTR(t *testing.T) {
	for _, tc := range []struct {
		name     string
		eintr    int
		wantErr  bool
		wantSent int
	}{
		{"none", 0, false, 1},
		{"interrupted twice", 2, false, 3},
		{"interrupted every time", uverbs.RegMRTries, true, uverbs.RegMRTries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent func() int
			c := openFakeOpen(t, uverbs.DriverRXE, func(asyncFd int) (k kernel.Kernel) {
				k, sent = uverbs.NewEINTRKernel(asyncFd, tc.eintr)
				return k
			})
			defer c.Close()
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			buf, err := mmap.Anonymous(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
			if tc.wantErr {
				if !errors.Is(err, unix.EINTR) {
					t.Errorf("RegMR = %v, want EINTR", err)
				}
			} else if err != nil {
				t.Errorf("RegMR: %v", err)
			} else {
				mr.Close()
			}
			if got := sent(); got != tc.wantSent {
				t.Errorf("REG_MR sent %d times, want %d", got, tc.wantSent)
			}
		})
	}
}
