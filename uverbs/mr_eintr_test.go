package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// TestRegMRRetriesEINTR: a REG_MR the kernel answers with EINTR (a signal
// interrupted the registration, which registered nothing) is sent again,
// up to regMRTries times in all; past that the EINTR is RegMR's error.
func TestRegMRRetriesEINTR(t *testing.T) {
	for _, tc := range []struct {
		name     string
		eintr    int
		wantErr  bool
		wantSent int
	}{
		{"none", 0, false, 1},
		{"interrupted twice", 2, false, 3},
		{"interrupted every time", regMRTries, true, regMRTries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pipe [2]int
			if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pipe[1])
			k := &ioctlKernel{asyncFd: pipe[0], eintr: tc.eintr}
			path := "/dev/infiniband/uverbs-eintr"
			defer kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, k, nil })()
			c, err := Open(Device{Name: "eintr0", CharDev: path, Driver: DriverRXE})
			if err != nil {
				t.Fatal(err)
			}
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
			mr, err := pd.RegMR(buf.Bytes(), AccessLocalWrite)
			if tc.wantErr {
				if !errors.Is(err, unix.EINTR) {
					t.Errorf("RegMR = %v, want EINTR", err)
				}
			} else if err != nil {
				t.Errorf("RegMR: %v", err)
			} else {
				mr.Close()
			}
			if k.regMRs != tc.wantSent {
				t.Errorf("REG_MR sent %d times, want %d", k.regMRs, tc.wantSent)
			}
		})
	}
}
