package mlx5_test

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// BenchmarkICountSlow is test/icount/icount.sh's harness for slow-path
// commands: with ICOUNT_SLOW=<Name> it runs that verb in icSlow, a loop
// callgrind counts alone, against the device model. The model's own
// instructions (its fake kernel's Ioctl and Write) are subtracted by the
// script, so the figure is goverbs' user-space instructions per command,
// without the syscall instruction itself.
func BenchmarkICountSlow(b *testing.B) {
	which := os.Getenv("ICOUNT_SLOW")
	if which == "" {
		b.Skip("ICOUNT_SLOW not set")
	}
	d, dev := newModel(b, nil, model.Options{})
	n := openNode(b, d, dev, uverbs.OpenOptions{})
	cq := n.cq(64, nil)
	qp := n.qp(uverbs.QPTypeRC, cq, uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	connect(b, qp, qp.QPN(), grhTo(d))
	buf := n.buf.Bytes()[:4096]
	var run func() error
	switch which {
	case "QueryDevice":
		run = func() error { _, err := n.ctx.QueryDevice(); return err }
	case "QueryPort":
		run = func() error { _, err := n.ctx.QueryPort(1); return err }
	case "QueryGID":
		run = func() error { _, err := n.ctx.QueryGID(1, 0); return err }
	case "AllocDeallocPD":
		run = func() error {
			pd, err := n.ctx.AllocPD()
			if err != nil {
				return err
			}
			return pd.Close()
		}
	case "RegDeregMR":
		run = func() error {
			mr, err := n.pd.RegMR(buf, allAccess)
			if err != nil {
				return err
			}
			return mr.Close()
		}
	case "ModifyQP":
		run = func() error {
			return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, MinRNRTimer: 12}, uverbs.QPAttrMinRNRTimer)
		}
	case "CreateDestroyAH":
		av := grhTo(d)
		run = func() error {
			ah, err := n.pd.CreateAH(av)
			if err != nil {
				return err
			}
			return ah.Close()
		}
	case "CreateDestroyCQ":
		run = func() error {
			c, err := n.ctx.CreateCQ(256, uverbs.CQOptions{})
			if err != nil {
				return err
			}
			return c.Close()
		}
	case "CreateDestroyQP":
		run = func() error {
			q, err := n.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
				Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				return err
			}
			return q.Close()
		}
	default:
		b.Fatalf("ICOUNT_SLOW=%s: no such case", which)
	}
	if err := icSlow(run, 16); err != nil { // warm: pools, caches
		b.Fatal(err)
	}
	if err := icSlow(run, icSlowCalls); err != nil {
		b.Fatal(err)
	}
}

// icSlowCalls is how many calls icSlow makes in the counted run
const icSlowCalls = 1000 // test/icount/slowpath.sh divides by these and the 16 warm-up calls

//go:noinline
func icSlow(run func() error, n int) error {
	for i := 0; i < n; i++ {
		if err := run(); err != nil {
			return err
		}
	}
	return nil
}
