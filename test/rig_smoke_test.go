package test

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestRigSmoke proves the rig end to end: every device the guest promises has
// a uverbs node a static Go binary can open, and rdma-core's own tool sees
// rxe0's port up. Outside the rig it skips.
func TestRigSmoke(t *testing.T) {
	rigtest.Require(t)
	t.Logf("kernel %s", rigtest.Kernel())
	for _, name := range []string{"rxe0", "siw0", "rxea", "rxeb"} {
		path := rigtest.Device(t, name)
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("%s: open %s: %v", name, path, err)
			continue
		}
		t.Logf("%s: %s opened", name, path)
		if err := unix.Close(fd); err != nil {
			t.Errorf("%s: close %s: %v", name, path, err)
		}
	}
	out := rigtest.Command(t, "ibv_devinfo", "-d", "rxe0")
	if !strings.Contains(out, "PORT_ACTIVE") {
		t.Errorf("ibv_devinfo -d rxe0: no PORT_ACTIVE in\n%s", out)
	}
}
