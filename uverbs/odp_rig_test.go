package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// TestODPRig: on a device without on-demand paging (siw; rxe before Linux
// 6.4) RegMR with AccessOnDemand and AdviseMR are refused with
// ErrNotSupported before any command, and sent anyway the kernel refuses
// them itself: REG_MR with ON_DEMAND is EINVAL on 6.1 (ib_check_mr_access
// without IBK_ON_DEMAND_PAGING; newer kernels may say EOPNOTSUPP), and the
// ADVISE_MR method does not exist for a driver without advise_mr (the
// ioctl's EPROTONOSUPPORT, which AdviseMR reports as ErrNotSupported). Where
// the device reports ODP (rxe from 6.4), the ODP MR registers, and
// AdviseMR's prefetch either succeeds or is the kernel's EOPNOTSUPP (rxe
// got advise_mr later than ODP), which the test logs.
func TestODPRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c := openRig(t, name, PolicyAuto)
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			r, err := mmap.Anonymous(1 << 16)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			plain, err := pd.RegMR(r.Bytes(), AccessLocalWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			sge := []SGE{{Addr: plain.Addr(), Length: 4096, LKey: plain.LKey()}}
			t.Logf("%s ODP caps: general %v, RC %v", name, a.ODPCaps.General, a.ODPCaps.RC)
			if a.ODPCaps.General&ODPSupport != 0 {
				mr, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessOnDemand)
				if err != nil {
					t.Fatalf("RegMR(OnDemand) on a device with ODP: %v", err)
				}
				defer mr.Close()
				err = pd.AdviseMR(AdvicePrefetchWrite, AdviseFlush, []SGE{{Addr: mr.Addr(), Length: 1 << 16, LKey: mr.LKey()}})
				switch {
				case err == nil:
					t.Logf("AdviseMR(PREFETCH_WRITE, FLUSH) of the ODP MR: done")
				case errors.Is(err, unix.EOPNOTSUPP):
					t.Logf("AdviseMR: the kernel's driver has no advise_mr: %v", err)
				default:
					t.Errorf("AdviseMR of the ODP MR: %v", err)
				}
				return
			}
			if _, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessOnDemand); !errors.Is(err, ErrNotSupported) {
				t.Errorf("RegMR(OnDemand) on %s: %v, want ErrNotSupported", name, err)
			}
			if err := pd.AdviseMR(AdvicePrefetch, 0, sge); !errors.Is(err, ErrNotSupported) {
				t.Errorf("AdviseMR on %s: %v, want ErrNotSupported", name, err)
			}
			c.skipCapChecks = true
			defer func() { c.skipCapChecks = false }()
			mr, err := pd.RegMR(r.Bytes(), AccessLocalWrite|AccessOnDemand)
			if err == nil {
				mr.Close()
				t.Fatalf("%s's kernel registered an ODP MR without reporting ODP", name)
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("REG_MR with ON_DEMAND on %s: %v, want the kernel's EINVAL or EOPNOTSUPP", name, err)
			} else {
				t.Logf("the kernel's REG_MR answer: %v", err)
			}
			before := c.Syscalls()
			if err := pd.AdviseMR(AdvicePrefetch, 0, sge); !errors.Is(err, ErrNotSupported) {
				t.Errorf("ADVISE_MR on %s: %v, want ErrNotSupported (no such method)", name, err)
			} else {
				t.Logf("the kernel's ADVISE_MR answer (%d syscall): %v", c.Syscalls()-before, err)
			}
		})
	}
}
