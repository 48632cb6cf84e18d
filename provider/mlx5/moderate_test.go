package mlx5_test

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestModerateCQ: mlx5 reports CQ moderation (MLX5_MAX_CQ_COUNT,
// MLX5_MAX_CQ_PERIOD), and CQ.Moderate's MODIFY_CQ reaches the device with
// both values for that CQ; values over the limits are refused before the
// kernel, and the device's own limit is the kernel's.
func TestModerateCQ(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	a, err := n.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a.CQModerationCaps.MaxCount != 0xffff || a.CQModerationCaps.MaxPeriod != 0xfff {
		t.Fatalf("CQ moderation caps %+v, want count 65535 and period 4095 (mlx5_ib_query_device)", a.CQModerationCaps)
	}
	before := d.CQNs()
	cq := n.cq(16, nil)
	var cqn uint32
	for _, x := range d.CQNs() {
		found := false
		for _, y := range before {
			found = found || x == y
		}
		if !found {
			cqn = x
		}
	}
	if err := cq.Moderate(32, 100); err != nil {
		t.Fatalf("Moderate: %v", err)
	}
	if c, p, ok := d.CQModeration(cqn); !ok || c != 32 || p != 100 {
		t.Errorf("the device's CQ %d moderation: %d completions, %d µs (%v); want 32, 100", cqn, c, p, ok)
	}
	if err := cq.Moderate(1, 4096); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Moderate with a 4096 µs period: %v, want EINVAL", err)
	}
	if c, p, _ := d.CQModeration(cqn); c != 32 || p != 100 {
		t.Errorf("a refused Moderate changed the CQ: %d, %d", c, p)
	}
	cq.Close()
	if err := cq.Moderate(1, 1); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Moderate after Close: %v, want ErrClosed", err)
	}
}
