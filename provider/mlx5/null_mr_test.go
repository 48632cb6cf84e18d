package mlx5_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestNullMR: the null MR is the kernel's dump-fill mkey: a receive's bytes
// scattered through it are dropped (the next SGE gets what follows), a send
// gathers zeroes from it, a READ into it lands nowhere; a device without
// the mkey refuses AllocNullMR.
func TestNullMR(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	null, err := n.pd.AllocNullMR()
	if err != nil {
		t.Fatalf("AllocNullMR: %v", err)
	}
	defer null.Close()
	if null.LKey() == n.mr.LKey() {
		t.Fatalf("the null MR has a registered MR's key %#x", null.LKey())
	}
	cq := n.cq(32, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), lidTo(d))
	connect(t, b, a.QPN(), lidTo(d))
	buf := n.buf.Bytes()
	for i := 0; i < 32; i++ {
		buf[i] = byte(0x40 + i)
	}
	for i := 4096; i < 4096+64; i++ {
		buf[i] = 0xee
	}
	// Receive: 16 bytes into the null MR, then 16 into the buffer.
	if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{null.SGE(16), n.sge(4096, 16)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 32)}}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range poll(t, cq, 2) {
		if w.Status != uverbs.WCSuccess {
			t.Fatalf("completion %+v", w)
		}
	}
	if !bytes.Equal(buf[4096:4112], buf[16:32]) || buf[4112] != 0xee {
		t.Errorf("after 16 bytes into the null MR the buffer got % x, want % x", buf[4096:4113], buf[16:32])
	}
	// Send: 8 zeroes from the null MR, then 8 real bytes.
	if _, err := b.PostRecv([]uverbs.RecvWR{{ID: 3, SGL: []uverbs.SGE{n.sge(8192, 64)}}}); err != nil {
		t.Fatal(err)
	}
	for i := 8192; i < 8192+16; i++ {
		buf[i] = 0xee
	}
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{null.SGE(8), n.sge(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range poll(t, cq, 2) {
		if w.Status != uverbs.WCSuccess || w.ID == 3 && w.ByteLen != 16 {
			t.Fatalf("completion %+v", w)
		}
	}
	if !bytes.Equal(buf[8192:8200], make([]byte, 8)) || !bytes.Equal(buf[8200:8208], buf[0:8]) {
		t.Errorf("received % x, want 8 zeroes then % x", buf[8192:8208], buf[0:8])
	}
	// READ into the null MR: succeeds, writes nothing.
	before := append([]byte(nil), buf...)
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 5, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: n.addr(0), RKey: n.mr.RKey(), SGL: []uverbs.SGE{null.SGE(64)}}}); err != nil {
		t.Fatal(err)
	}
	ok(t, poll(t, cq, 1)[0], 5, uverbs.WCRDMARead)
	if !bytes.Equal(before, buf) {
		t.Errorf("a READ into the null MR changed registered memory")
	}

	nd, ndev := newModel(t, nil, model.Options{NoDumpFill: true})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	if _, err := nn.pd.AllocNullMR(); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("AllocNullMR without a dump-fill mkey: %v, want ErrNotSupported", err)
	}
}
