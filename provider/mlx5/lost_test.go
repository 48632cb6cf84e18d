package mlx5_test

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestDisassociate: the device goes away under an open context (the model
// stops, revokes the UAR mappings, answers EIO to every command and raises
// DEVICE_FATAL). The program hears DEVICE_FATAL; from then on the fast
// path fails with EIO (no fault, no doorbell store into revoked pages),
// commands fail with EIO, and closing everything still works.
func TestDisassociate(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(64, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))
	srq, err := n.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	send := []uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}}
	recv := []uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{n.sge(4096, 64)}}}
	if _, err := b.PostRecv(recv); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend(send); err != nil {
		t.Fatal(err)
	}
	poll(t, cq, 2)

	d.Disassociate()
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	ev, err := n.ctx.NextAsyncEvent(ctx)
	if err != nil || ev.Type != uverbs.EventDeviceFatal {
		t.Fatalf("NextAsyncEvent = %+v, %v; want DEVICE_FATAL", ev, err)
	}
	wc := make([]uverbs.WorkCompletion, 4)
	eio := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, unix.EIO) {
			t.Errorf("%s after disassociation: %v; want EIO", what, err)
		}
	}
	_, err = a.PostSend(send)
	eio("PostSend", err)
	_, err = b.PostRecv(recv)
	eio("PostRecv", err)
	_, err = srq.PostRecv(recv)
	eio("SRQ PostRecv", err)
	_, err = cq.Poll(wc)
	eio("Poll", err)
	eio("ReqNotify", cq.ReqNotify(false))
	eio("Modify", a.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState))
	if _, err := n.ctx.CreateCQ(4, uverbs.CQOptions{}); !errors.Is(err, unix.EIO) {
		t.Errorf("CreateCQ after disassociation: %v; want EIO", err)
	}
	if err := n.ctx.Close(); err != nil {
		t.Errorf("Context.Close after disassociation: %v", err)
	}
	if s := d.Stats(); s.Contexts != 0 || s.UARMappings != 0 {
		t.Errorf("after Close: %d contexts, %d UAR mappings left", s.Contexts, s.UARMappings)
	}
}
