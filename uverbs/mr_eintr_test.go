package uverbs_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestODPCommandsRetryEINTR: a REG_MR or ADVISE_MR the kernel answers with
// EINTR (a signal interrupted the process's first ODP mapping, which
// then made nothing) is sent again, up to ODPTries times in all; past
// that the EINTR is the verb's error.
func TestODPCommandsRetryEINTR(t *testing.T) {
	for _, tc := range []struct {
		name     string
		eintr    int
		wantErr  bool
		wantSent int
	}{
		{"none", 0, false, 1},
		{"interrupted twice", 2, false, 3},
		{"interrupted every time", uverbs.ODPTries, true, uverbs.ODPTries},
	} {
		for _, verb := range []string{"RegMR", "AdviseMR"} {
			t.Run(verb+"/"+tc.name, func(t *testing.T) {
				var fake uverbs.EINTRKernel
				c := openFakeOpen(t, uverbs.DriverRXE, func(asyncFd int) (k kernel.Kernel) {
					k, fake = uverbs.NewEINTRKernel(asyncFd)
					return k
				})
				defer c.Close()
				uverbs.SkipCapChecks(c)
				pd, err := c.AllocPD()
				if err != nil {
					t.Fatal(err)
				}
				buf, err := mmap.Anonymous(4096)
				if err != nil {
					t.Fatal(err)
				}
				defer buf.Close()
				var mr *uverbs.MR
				if verb == "AdviseMR" {
					if mr, err = pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessOnDemand); err != nil {
						t.Fatal(err)
					}
					defer mr.Close()
				}
				regMRs0, advises0 := fake.Sent()
				fake.Interrupt(tc.eintr)
				if verb == "RegMR" {
					mr, err = pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessOnDemand)
					if err == nil {
						mr.Close()
					}
				} else {
					err = pd.AdviseMR(uverbs.AdvicePrefetchWrite, uverbs.AdviseFlush,
						[]uverbs.SGE{{Addr: mr.Addr(), Length: 4096, LKey: mr.LKey()}})
				}
				if tc.wantErr {
					if !errors.Is(err, unix.EINTR) {
						t.Errorf("%s = %v, want EINTR", verb, err)
					}
				} else if err != nil {
					t.Errorf("%s: %v", verb, err)
				}
				regMRs, advises := fake.Sent()
				n := regMRs - regMRs0
				if verb == "AdviseMR" {
					n = advises - advises0
				}
				if n != tc.wantSent {
					t.Errorf("%s's command sent %d times, want %d", verb, n, tc.wantSent)
				}
			})
		}
	}
}
