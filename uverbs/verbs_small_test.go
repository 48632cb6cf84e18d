package uverbs

import (
	"errors"
	"strings"
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

// TestModerateCQRig: rxe reports no CQ moderation (cq_moderation_caps 0),
// so Moderate refuses with ErrNotSupported before any command; the command
// itself, sent anyway, reaches the kernel's rdma_set_cq_moderation, which
// answers EOPNOTSUPP because rxe has no modify_cq (a malformed command
// would be EINVAL: zero attr_mask, reserved bits, a bad handle).
func TestModerateCQRig(t *testing.T) {
	rigtest.Require(t)
	c := openRig(t, "rxe0", PolicyAuto)
	cq, err := c.CreateCQ(16, CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	before := c.Syscalls()
	if err := cq.Moderate(8, 16); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Moderate on rxe: %v, want ErrNotSupported", err)
	}
	if err := cq.modify(8, 16); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("MODIFY_CQ on rxe: %v, want the kernel's EOPNOTSUPP", err)
	}
	t.Logf("%d syscalls (QUERY_DEVICE_EX, then MODIFY_CQ)", c.Syscalls()-before)
}

// TestCQTimestampsRig: rxe reports no completion clock, so CreateCQ with
// timestamps is refused with ErrNotSupported before any command; sent
// anyway, the CREATE_CQ with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION is
// refused by rxe_create_cq itself (EOPNOTSUPP for any attr->flags; 5.10's
// rxe_create_cq answers EINVAL, seen in the rig on 5.10.262), and the
// context goes on working.
func TestCQTimestampsRig(t *testing.T) {
	rigtest.Require(t)
	c := openRig(t, "rxe0", PolicyAuto)
	if _, err := c.CreateCQ(16, CQOptions{Timestamps: true}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreateCQ with timestamps on rxe: %v, want ErrNotSupported", err)
	}
	c.skipCapChecks = true
	cq, err := c.CreateCQ(16, CQOptions{Timestamps: true})
	if err == nil {
		cq.Close()
		t.Fatal("rxe's kernel created a CQ with the timestamp flag")
	}
	want := unix.EOPNOTSUPP
	if strings.HasPrefix(rigtest.Kernel(), "5.10.") {
		want = unix.EINVAL
	}
	if !errors.Is(err, want) {
		t.Errorf("CREATE_CQ with the timestamp flag on rxe (kernel %s): %v, want the kernel's %v", rigtest.Kernel(), err, want)
	}
	c.skipCapChecks = false
	cq, err = c.CreateCQ(16, CQOptions{})
	if err != nil {
		t.Fatalf("CreateCQ after the refusal: %v", err)
	}
	cq.Close()
}
