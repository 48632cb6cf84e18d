package mlx5_test

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestAllocsFastPath: on the device model, through uverbs, posting (one
// plain WR, a list, one receive, a list of receives) and polling allocate
// nothing. The model is paused while a post or a poll is counted, so the
// counts are the program's own. So do the single-threaded queues'.
func TestAllocsFastPath(t *testing.T) {
	t.Run("locked", func(t *testing.T) { allocsFastPath(t, false) })
	t.Run("single", func(t *testing.T) { allocsFastPath(t, true) })
}

func allocsFastPath(t *testing.T, single bool) {
	p := newBenchPairThreads(t, single)
	n := p.n
	write := uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
	inline := write
	inline.Flags |= uverbs.SendInline
	recv := uverbs.RecvWR{ID: 2, SGL: []uverbs.SGE{n.sge(4096, 64)}}
	// The lists are made here (TestAllocsLiterals counts literals).
	sends, recvs := []uverbs.SendWR{write, inline}, []uverbs.RecvWR{recv, recv}
	for _, c := range []struct {
		name string
		post func() error
	}{
		{"PostSend of one plain WR", func() error { _, err := p.a.PostSend(sends[:1]); return err }},
		{"PostSend of a list", func() error { _, err := p.a.PostSend(sends); return err }},
		{"PostRecv of one", func() error { _, err := p.b.PostRecv(recvs[:1]); return err }},
		{"PostRecv of a list", func() error { _, err := p.b.PostRecv(recvs); return err }},
	} {
		p.d.Pause()
		if a := testing.AllocsPerRun(50, func() {
			if err := c.post(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}); a != 0 {
			t.Errorf("%s: %v allocations", c.name, a)
		}
	}
	// 51 single and 102 listed WRITEs completed on cqA: poll them one call at a time.
	wc := make([]uverbs.WorkCompletion, 4)
	want := 3 * 51
	seen := 0
	holdOnceWritten(t, p.d, want)
	defer p.d.Resume()
	if a := testing.AllocsPerRun(100, func() {
		k, err := p.cqA.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		seen += k
	}); a != 0 {
		t.Errorf("Poll: %v allocations", a)
	}
	p.drain(t, p.cqA, want-seen)
}

// TestAllocsLiterals: the way a program writes a post or a poll from the
// docs, a composite literal per call and a completion array on the stack,
// allocates nothing either. The slices reach the provider through an
// interface method, which escape analysis would take for an escape (two
// allocations a post, one a poll) if uverbs did not hide them from it.
func TestAllocsLiterals(t *testing.T) {
	p := newBenchPair(t)
	n := p.n
	addr, rkey, lkey := n.addr(65536), n.mr.RKey(), n.mr.LKey()
	src, dst := n.addr(0), n.addr(4096)
	p.d.Pause()
	if a := testing.AllocsPerRun(50, func() {
		if _, err := p.a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			RemoteAddr: addr, RKey: rkey, SGL: []uverbs.SGE{{Addr: src, Length: 8, LKey: lkey}}}}); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("PostSend of a literal: %v allocations", a)
	}
	if a := testing.AllocsPerRun(50, func() {
		if _, err := p.b.PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{{Addr: dst, Length: 64, LKey: lkey}}}}); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("PostRecv of a literal: %v allocations", a)
	}
	// 51 WRITEs completed on cqA: polled into an array on the stack.
	holdOnceWritten(t, p.d, 51)
	defer p.d.Resume()
	seen := 0
	if a := testing.AllocsPerRun(60, func() {
		var wc [4]uverbs.WorkCompletion
		k, err := p.cqA.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:k] {
			if w.Status != uverbs.WCSuccess || w.ID != 1 {
				t.Fatalf("completion %+v", w)
			}
		}
		seen += k
	}); a != 0 {
		t.Errorf("Poll into a stack array: %v allocations", a)
	}
	p.drain(t, p.cqA, 51-seen)
}

// TestEmptyLists: an empty or nil list posts nothing and a nil wc polls
// nothing, without an error (uverbs hands the provider such slices as nil).
func TestEmptyLists(t *testing.T) {
	p := newBenchPair(t)
	for _, wrs := range [][]uverbs.SendWR{nil, {}} {
		if n, err := p.a.PostSend(wrs); n != 0 || err != nil {
			t.Errorf("PostSend(%v) = %d, %v", wrs, n, err)
		}
	}
	for _, wrs := range [][]uverbs.RecvWR{nil, {}} {
		if n, err := p.b.PostRecv(wrs); n != 0 || err != nil {
			t.Errorf("PostRecv(%v) = %d, %v", wrs, n, err)
		}
	}
	if n, err := p.cqA.Poll(nil); n != 0 || err != nil {
		t.Errorf("Poll(nil) = %d, %v", n, err)
	}
}

// holdOnceWritten lets the paused model d run until it has written n more
// CQEs, then pauses it again: a Poll count then reads completions that
// exist, and the model, which allocates as it executes, is not counted
// with it (testing.AllocsPerRun counts the whole process).
func holdOnceWritten(t *testing.T, d *model.Device, n int) {
	t.Helper()
	c0 := d.Stats().CQEs
	d.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for d.Stats().CQEs-c0 < n {
		if time.Now().After(deadline) {
			t.Fatalf("the model wrote %d of %d CQEs in 10 s", d.Stats().CQEs-c0, n)
		}
		time.Sleep(time.Millisecond)
	}
	d.Pause()
}
