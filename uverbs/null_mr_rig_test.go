package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestNullMRRig: rxe and siw have no null memory region (librxe and
// libsiw implement no alloc_null_mr: libibverbs answers EOPNOTSUPP), so
// AllocNullMR is refused with ErrNotSupported, without a syscall.
func TestNullMRRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c := openRig(t, name, PolicyAuto)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			before := c.Syscalls()
			if _, err := pd.AllocNullMR(); !errors.Is(err, ErrNotSupported) {
				t.Errorf("AllocNullMR on %s: %v, want ErrNotSupported", name, err)
			} else {
				t.Logf("%v", err)
			}
			if n := c.Syscalls() - before; n != 0 {
				t.Errorf("the refusal made %d syscalls", n)
			}
		})
	}
}
