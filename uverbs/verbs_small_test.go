package uverbs

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"golang.org/x/sys/unix"
)

// TestIncRKey: ibv_inc_rkey (verbs.h) adds one to the key's low byte,
// wrapping within it, and keeps the upper 24 bits.
func TestIncRKey(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{
		{0, 1}, {0x1234_5600, 0x1234_5601}, {0x1234_56fe, 0x1234_56ff}, {0x1234_56ff, 0x1234_5600}, {0xffff_ffff, 0xffff_ff00},
	} {
		if got := IncRKey(c.in); got != c.want {
			t.Errorf("IncRKey(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// TestPKeyIndexRig: rxe's P_Key table holds the default full-membership
// key 0xffff at index 0 and nothing else (rxe_query_pkey); a key it does
// not hold is ENOENT, a port it does not have an error of its own.
func TestPKeyIndexRig(t *testing.T) {
	rigtest.Require(t)
	c := openRig(t, "rxe0", PolicyAuto)
	if i, err := c.PKeyIndex(1, 0xffff); i != 0 || err != nil {
		t.Errorf("PKeyIndex(1, 0xffff) = %d, %v; want 0", i, err)
	}
	if i, err := c.PKeyIndex(1, 0x7fff); i != -1 || !errors.Is(err, unix.ENOENT) {
		t.Errorf("PKeyIndex(1, 0x7fff) = %d, %v; want -1 and ENOENT (the limited-membership key is another key)", i, err)
	}
	if _, err := c.PKeyIndex(2, 0xffff); err == nil || errors.Is(err, unix.ENOENT) {
		t.Errorf("PKeyIndex of port 2 (rxe has one port): %v, want an error other than ENOENT", err)
	}
}
