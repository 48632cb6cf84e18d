package mlx5_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// newModel models one device and returns it with the uverbs.Device that
// opens it.
func newModel(t testing.TB, f *model.Fabric, o model.Options) (*model.Device, uverbs.Device) {
	t.Helper()
	if f == nil {
		f = model.NewFabric()
	}
	d, err := f.Add(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v := d.Violations(); len(v) > 0 {
			t.Errorf("the device model saw protocol violations:\n%v", v)
		}
		d.Close()
	})
	return d, uverbs.Device{Name: d.Name(), Driver: uverbs.DriverMLX5, CharDev: d.CharDev(), NodeGUID: d.GUID()}
}

func TestSmokeSend(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	ctx, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	r, _ := mmap.Anonymous(1 << 16)
	defer r.Close()
	mr, err := pd.RegMR(r.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	cq, err := ctx.CreateCQ(64, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	mk := func() *uverbs.QP {
		qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	a, b := mk(), mk()
	defer a.Close()
	defer b.Close()
	connect := func(q *uverbs.QP, remote uint32) {
		if err := q.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead},
			uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		if err := q.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: uverbs.MTU1024, DestQPN: remote, MaxDestRDAtomic: 1, MinRNRTimer: 1,
			AH: uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: d.GID(1), SGIDIndex: 1, HopLimit: 64}}},
			uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRDAtomic|uverbs.QPAttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		if err := q.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
			uverbs.QPAttrState|uverbs.QPAttrSQPSN|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|uverbs.QPAttrRNRRetry|uverbs.QPAttrMaxQPRDAtomic); err != nil {
			t.Fatal(err)
		}
	}
	connect(a, b.QPN())
	connect(b, a.QPN())
	copy(r.Bytes(), "hello, mlx5 model")
	base := uint64(r.Addr())
	if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 7, SGL: []uverbs.SGE{{Addr: base + 4096, Length: 64, LKey: mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 9, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{{Addr: base, Length: 17, LKey: mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	var wc [4]uverbs.WorkCompletion
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got < 2 && time.Now().Before(deadline) {
		n, err := cq.Poll(wc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if got != 2 {
		t.Fatalf("%d completions, stats %+v", got, d.Stats())
	}
	t.Logf("%+v %+v", wc[0], wc[1])
	if !bytes.Equal(r.Bytes()[4096:4096+17], []byte("hello, mlx5 model")) {
		t.Errorf("data not received")
	}
	t.Logf("stats %+v", d.Stats())
}
