package mlx5_test

import (
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// TestAllocsFastPath: on the device model, through uverbs, posting (one
// plain WR, a list, one receive, a list of receives) and polling allocate
// nothing. The model is paused while a post is counted, so the counts are
// the program's own.
func TestAllocsFastPath(t *testing.T) {
	p := newBenchPair(t)
	n := p.n
	write := uverbs.SendWR{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: n.addr(65536), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}
	inline := write
	inline.Flags |= uverbs.SendInline
	recv := uverbs.RecvWR{ID: 2, SGL: []uverbs.SGE{n.sge(4096, 64)}}
	// The lists are made here: a literal in the call would escape through
	// the provider's interface and count as the test's allocation.
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
		p.d.Resume()
	}
	// 51 single and 102 listed WRITEs completed on cqA: poll them one call at a time.
	wc := make([]uverbs.WorkCompletion, 4)
	want := 3 * 51
	seen := 0
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
