package mlx5_test

import (
	"bytes"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/lifetest"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestHandleReuse runs the handle-reuse lifetime test on the device model
// (the rig runs it on the real kernel with rxe and siw).
func TestHandleReuse(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	ah := lidTo(d)
	lifetest.HandleReuse(t, dev, lifetest.Options{AH: &ah})
}

// TestRegMRGoMemory registers Go heap memory: the MR keeps it alive and in
// place through GC cycles while the device writes into it, and lets it go
// once closed.
func TestRegMRGoMemory(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(32, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))

	var collected atomic.Bool
	heap := make([]byte, 1<<16)
	runtime.AddCleanup(&heap[0], func(*atomic.Bool) { collected.Store(true) }, &collected)
	mr, err := n.pd.RegMR(heap, allAccess)
	if err != nil {
		t.Fatal(err)
	}
	addr, rkey := mr.Addr(), mr.RKey()
	heap = nil // only the MR holds the memory now
	copy(n.buf.Bytes(), bytes.Repeat([]byte("pinned"), 1000))
	for i := 0; i < 8; i++ {
		runtime.GC()
		if _, err := a.PostSend([]uverbs.SendWR{{ID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: addr + uint64(i)*6000, RKey: rkey, SGL: []uverbs.SGE{n.sge(0, 6000)}}}); err != nil {
			t.Fatal(err)
		}
		ok(t, poll(t, cq, 1)[0], uint64(i), uverbs.WCRDMAWrite)
	}
	// Read it back through the device: an RDMA READ into the mmap buffer.
	if _, err := a.PostSend([]uverbs.SendWR{{ID: 99, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		RemoteAddr: addr + 7*6000, RKey: rkey, SGL: []uverbs.SGE{n.sge(1<<19, 6000)}}}); err != nil {
		t.Fatal(err)
	}
	ok(t, poll(t, cq, 1)[0], 99, uverbs.WCRDMARead)
	if !bytes.Equal(n.buf.Bytes()[1<<19:1<<19+6000], n.buf.Bytes()[:6000]) {
		t.Error("the device read back something else than it wrote into the pinned Go memory")
	}
	if collected.Load() {
		t.Fatal("Go memory registered with RegMR was collected while the MR was open")
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && !collected.Load(); i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if !collected.Load() {
		t.Error("the MR's Close did not unpin its memory (still not collected)")
	}
}

// TestRegMRStackSlice registers a slice of a local array: the compiler must
// have put it on the heap (RegMR keeps it), so growing the goroutine's
// stack does not move the registered memory.
func TestRegMRStackSlice(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	var local [4096]byte
	mr, err := n.pd.RegMR(local[:], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	grow(2000)
	if now := addrOf(local[:]); now != mr.Addr() {
		t.Fatalf("the registered array moved from %#x to %#x when the stack grew", mr.Addr(), now)
	}
}

//go:noinline
func grow(n int) int {
	var pad [256]byte
	if n == 0 {
		return int(pad[0])
	}
	return grow(n-1) + int(pad[n%256])
}

// TestCloseAfterContextClose: Close of every object after Context.Close
// returns nil, every time, and pinned memory is released.
func TestCloseAfterContextClose(t *testing.T) {
	_, dev := newModel(t, nil, model.Options{})
	c, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := mr.Close(); err != nil {
			t.Errorf("MR.Close #%d after Context.Close: %v", i, err)
		}
		if err := pd.Close(); err != nil {
			t.Errorf("PD.Close #%d after Context.Close: %v", i, err)
		}
	}
	if _, err := pd.AllocMW(uverbs.MWType2); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocMW after Context.Close = %v", err)
	}
}
