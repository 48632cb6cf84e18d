package mlx5_test

import (
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// BenchmarkSlowPath times slow-path verbs that create nothing, against
// the device model playing the kernel: ns/op is goverbs' encoding and
// decoding plus the model's command handling, allocs/op both sides' (the
// encoding's own share is 0: TestAllocsSlowPathEncoding in package abi).
func BenchmarkSlowPath(b *testing.B) {
	d, dev := newModel(b, nil, model.Options{})
	n := openNode(b, d, dev, uverbs.OpenOptions{})
	cq := n.cq(64, nil)
	qp := n.qp(uverbs.QPTypeRC, cq, uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	connect(b, qp, qp.QPN(), grhTo(d))
	verbs := []struct {
		name string
		run  func() error
	}{
		{"QueryPort", func() error { _, err := n.ctx.QueryPort(1); return err }},
		{"QueryGID", func() error { _, err := n.ctx.QueryGID(1, 0); return err }},
		{"QueryDevice", func() error { _, err := n.ctx.QueryDevice(); return err }},
		{"QueryQP", func() error { _, _, err := qp.Query(uverbs.QPAttrState); return err }},
		{"ModifyQP", func() error {
			return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, MinRNRTimer: 12}, uverbs.QPAttrMinRNRTimer)
		}},
	}
	for _, v := range verbs {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := v.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
