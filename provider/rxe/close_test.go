package rxe

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// TestFastPathAfterClose: Poll, Arm, PostSend, PostRecv and SRQ PostRecv on
// closed objects return errors wrapping provider.ErrClosed, and a second
// Close is a no-op.
func TestFastPathAfterClose(t *testing.T) {
	fk, c := testContext(t)
	cq, _ := testCQ(t, fk, c, 8, 7)
	qp := testQP(t, fk, c, qpSpec{})
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Errorf("second CQ Close: %v", err)
	}
	var wc [2]provider.WorkCompletion
	if _, err := cq.Poll(wc[:]); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := cq.Arm(false); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Arm after Close: %v", err)
	}
	if len(fk.notifies) != 0 {
		t.Errorf("Arm after Close reached the kernel: %v", fk.notifies)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := qp.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostSend after Close: %v", err)
	}
	plain := []provider.SendWR{{Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}}
	if !qp.sq.isPlain(&plain[0]) {
		t.Fatal("the plain WRITE is not plain on this QP")
	}
	if _, err := qp.PostSend(plain); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostSend of a plain WR after Close: %v", err)
	}
	if _, err := qp.PostRecv([]provider.RecvWR{{}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostRecv after Close: %v", err)
	}
	qp.Modified(provider.QPStateInit)
	if _, err := qp.PostSend([]provider.SendWR{{Opcode: provider.WRSend}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostSend after Close, QP state INIT: %v", err)
	}
	st, err := c.CreateSRQ(provider.SRQAttr{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	putMI(out, fk.addQueue(8, 6))
	ps, err := st.Complete(provider.SRQCreated{MaxWR: 7, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps.Close()
	if _, err := ps.PostRecv([]provider.RecvWR{{}}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("SRQ PostRecv after Close: %v", err)
	}
}

// TestPollRacesClose polls a CQ the fake keeps filling while another
// goroutine closes it, many times (run with -race): Poll never faults,
// never returns a completion that was not written, and returns ErrClosed
// once Close returned.
func TestPollRacesClose(t *testing.T) {
	fk, c := testContext(t)
	for round := 0; round < 200; round++ {
		cq, kq := testCQ(t, fk, c, 64, 7)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the kernel: completions with IDs 1, 2, 3...
			defer wg.Done()
			id := uint64(1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if (kq.prod.Load()+1)&kq.mask != kq.cons.Load() {
					putWC(kq, abi.IbUverbsWc{WrId: id})
					id++
				}
			}
		}()
		polled := make(chan struct{})
		go func() { // the poller
			defer close(polled)
			var wc [8]provider.WorkCompletion
			next := uint64(1)
			for {
				n, err := cq.Poll(wc[:])
				if err != nil {
					if !errors.Is(err, provider.ErrClosed) {
						t.Errorf("Poll: %v", err)
					}
					return
				}
				for _, w := range wc[:n] {
					if w.ID != next {
						t.Errorf("completion %d, want %d", w.ID, next)
						return
					}
					next++
				}
			}
		}()
		time.Sleep(time.Duration(round%7) * 50 * time.Microsecond)
		if err := cq.Close(); err != nil {
			t.Fatal(err)
		}
		<-polled // the poller saw ErrClosed
		close(stop)
		wg.Wait()
		var wc [1]provider.WorkCompletion
		if _, err := cq.Poll(wc[:]); !errors.Is(err, provider.ErrClosed) {
			t.Fatalf("Poll after Close: %v", err)
		}
		if t.Failed() {
			return
		}
	}
}

// TestReleaseWaitsForPoll: Close and Resize unmap the old queue only once
// the Poll inside the old state's gate has left, and a Poll that loads a
// state already replaced leaves without staying in its gate.
func TestReleaseWaitsForPoll(t *testing.T) {
	fk, c := testContext(t)
	for _, resize := range []bool{false, true} {
		cq, _ := testCQ(t, fk, c, 8, 7)
		s := cq.st.Load()
		q := s.q
		s.gate.Enter() // a Poll between its state check and its last read
		var held atomic.Bool
		held.Store(true)
		leave := func() { // the Poll leaves, once
			if held.Swap(false) {
				s.gate.Leave()
			}
		}
		// On a failure below the reader must still leave, or the CQ's
		// Close (testCQ's cleanup, run after this one) waits for ever.
		t.Cleanup(leave)
		done := make(chan error, 1)
		go func() {
			if !resize {
				done <- cq.Close()
				return
			}
			st, err := cq.Resize(15)
			if err != nil {
				done <- err
				return
			}
			_, out := st.Udata()
			putMI(out, fk.addQueue(16, 7))
			_, err = st.Complete(15)
			done <- err
		}()
		// The swap comes first, then the wait; how soon the goroutine
		// gets there depends on the machine (under -race in a TCG guest,
		// 20 ms was once not enough), so wait for the swap itself.
		for deadline := time.Now().Add(10 * time.Second); cq.st.Load() == s; {
			select {
			case err := <-done:
				t.Fatalf("resize %v: returned (%v) while a Poll was reading", resize, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("resize %v: the state was not replaced in 10 s", resize)
			}
			time.Sleep(time.Millisecond)
		}
		select {
		case err := <-done:
			t.Fatalf("resize %v: returned (%v) while a Poll was reading", resize, err)
		case <-time.After(20 * time.Millisecond):
		}
		if q.mem == nil {
			t.Fatalf("resize %v: the queue was unmapped under a reader", resize)
		}
		var wc [1]provider.WorkCompletion
		if _, err := cq.Poll(wc[:]); resize != (err == nil) {
			t.Errorf("resize %v: a Poll during the wait: %v", resize, err)
		}
		leave()
		if err := <-done; err != nil {
			t.Fatalf("resize %v: %v", resize, err)
		}
		if q.mem != nil || s.gate.Busy() {
			t.Errorf("resize %v: after the wait, queue mapped %v, gate busy %v", resize, q.mem != nil, s.gate.Busy())
		}
	}
}

// TestCQResizeRemapFails: the kernel switched the CQ to a new queue that
// cannot be mapped. Poll must then say so (not ErrClosed, not a nil
// dereference, not silence), and a later successful resize recovers.
func TestCQResizeRemapFails(t *testing.T) {
	fk, c := testContext(t)
	cq, kq := testCQ(t, fk, c, 4, 7)
	putWC(kq, abi.IbUverbsWc{WrId: 1})
	st, err := cq.Resize(30)
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	putMI(out, abi.Mminfo{Offset: 0x7fff0000, Size: 4096}) // nothing the fake can map
	if _, err := st.Complete(31); err == nil {
		t.Fatal("Complete mapped a queue that does not exist")
	}
	var wc [8]provider.WorkCompletion
	n, err := cq.Poll(wc[:])
	if n != 0 || err == nil || errors.Is(err, provider.ErrClosed) {
		t.Errorf("Poll after a failed remap = %d, %v; want the remap error", n, err)
	}
	if err := cq.Arm(false); err == nil {
		t.Errorf("Arm after a failed remap succeeded")
	}
	st, err = cq.Resize(30)
	if err != nil {
		t.Fatal(err)
	}
	_, out = st.Udata()
	mi := fk.addQueue(32, 7)
	putMI(out, mi)
	putWC(fk.queueAt(mi), abi.IbUverbsWc{WrId: 1})
	if _, err := st.Complete(31); err != nil {
		t.Fatal(err)
	}
	if n, err := cq.Poll(wc[:]); n != 1 || err != nil || wc[0].ID != 1 {
		t.Errorf("after a second resize: %d, %v", n, err)
	}
}

// TestPostRecvRefusesBadLists: a receive list with a bad request anywhere
// (too many SGEs, more than 2^31 bytes, more requests than room) leaves the
// receive queue and the SRQ exactly as they were, and the error names the
// request and wraps the errno.
func TestPostRecvRefusesBadLists(t *testing.T) {
	good := provider.RecvWR{ID: 1, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	for _, c := range []struct {
		name  string
		list  []provider.RecvWR
		index int
		errno error
	}{
		{"too many SGEs", []provider.RecvWR{good, {SGL: make([]provider.SGE, 3)}}, 1, unix.EINVAL},
		{"over 2 GiB", []provider.RecvWR{good, good, {SGL: []provider.SGE{{Length: 1 << 31}, {Length: 1}}}, good}, 2, unix.EINVAL},
		{"longer than the queue", []provider.RecvWR{good, good, good, good, good, good, good, good}, 7, unix.ENOMEM},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk, ctx := testContext(t)
			qp := testQP(t, fk, ctx, qpSpec{rqSlots: 8, rqLog2: 7, cap: provider.QPCap{MaxSendSGE: 1, MaxRecvSGE: 2, MaxInlineData: 16}})
			if qp.rq.maxSGE != 2 {
				t.Fatalf("receive queue takes %d SGEs, want 2", qp.rq.maxSGE)
			}
			q := qp.rq.q
			for i := queueHdrSize; i < len(q.mem); i++ {
				q.mem[i] = 0x5a
			}
			before := append([]byte(nil), q.mem...)
			n, err := qp.PostRecv(c.list)
			var we *provider.WRError
			if !errors.As(err, &we) || n != c.index || we.Index != c.index || we.Verb != "PostRecv" || !errors.Is(err, c.errno) {
				t.Fatalf("PostRecv = %d, %v; want index %d and %v", n, err, c.index, c.errno)
			}
			if !bytes.Equal(before, q.mem) {
				t.Errorf("the receive queue changed although the list was refused")
			}
			if n, err := qp.PostRecv([]provider.RecvWR{good}); n != 1 || err != nil || q.prod.Load() != 1 {
				t.Errorf("good PostRecv after a refused one = %d, %v (producer %d)", n, err, q.prod.Load())
			}
		})
	}
}

// TestDoorbellRawOnlyForSmallLists: a request that sends at most
// writedoorbell.RawMax bytes rings the raw doorbell; a larger one (whose
// requester run on Linux 6.1 happens inside the write) rings a regular
// write, which lets the GC stop the world meanwhile. One doorbell each.
func TestDoorbellRawOnlyForSmallLists(t *testing.T) {
	fk, c := testContext(t)
	qp := testQP(t, fk, c, qpSpec{})
	sq := qp.sq.q
	fk.onDoorbell = func(uint32) { sq.cons.Store(sq.prod.Load()) }
	for _, tc := range []struct {
		wr  provider.SendWR
		raw bool
	}{
		{provider.SendWR{Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}, true},
		{provider.SendWR{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: writedoorbell.RawMax, LKey: 1}}}, true},
		{provider.SendWR{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: writedoorbell.RawMax + 1, LKey: 1}}}, false},
		{provider.SendWR{Opcode: provider.WRRDMARead, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: 1 << 20, LKey: 1}}}, true},
	} {
		db, raw := fk.doorbells.Load(), fk.raw.Load()
		if _, err := qp.PostSend([]provider.SendWR{tc.wr}); err != nil {
			t.Fatal(err)
		}
		if fk.doorbells.Load() != db+1 || (fk.raw.Load() == raw+1) != tc.raw {
			t.Errorf("%v of %d bytes: %d doorbells, %d raw; want 1, raw %v", tc.wr.Opcode, tc.wr.SGL[0].Length,
				fk.doorbells.Load()-db, fk.raw.Load()-raw, tc.raw)
		}
	}
}

// TestDoorbellLongListInParts: a list that sends more than
// writedoorbell.RawMax bytes is rung in parts of at most RawMax, each a raw
// doorbell whose published producer index ends its part (an RDMA READ
// sends nothing, a single larger request is a part of its own and rings a
// regular write when it is the last); a failed part's doorbell leaves the
// whole list posted.
func TestDoorbellLongListInParts(t *testing.T) {
	const max = writedoorbell.RawMax
	write := func(n uint32) provider.SendWR {
		return provider.SendWR{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: n, LKey: 1}}}
	}
	read := provider.SendWR{Opcode: provider.WRRDMARead, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: 1 << 20, LKey: 1}}}
	list := func(k int, wr provider.SendWR) []provider.SendWR {
		l := make([]provider.SendWR, k)
		for i := range l {
			l[i] = wr
		}
		return l
	}
	for _, tc := range []struct {
		name string
		wrs  []provider.SendWR
		at   []uint32 // the producer index at each doorbell (from 0)
		raw  int
	}{
		{"16 of RawMax", list(16, write(max)), []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 16},
		{"20 of RawMax/16", list(20, write(max/16)), []uint32{16, 20}, 2},
		{"RawMax/2, READs, RawMax/2", append(append([]provider.SendWR{write(max / 2)}, list(8, read)...), write(max/2)), []uint32{10}, 1},
		{"RawMax/2 then a larger one", []provider.SendWR{write(max / 2), write(max + 1)}, []uint32{1, 2}, 1},
		{"a larger one then RawMax/2", []provider.SendWR{write(max + 1), write(max / 2)}, []uint32{1, 2}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk, c := testContext(t)
			qp := testQP(t, fk, c, qpSpec{sqSlots: 32, sqLog2: 8, cap: provider.QPCap{MaxSendWR: 31, MaxRecvWR: 15, MaxSendSGE: 1, MaxRecvSGE: 1}})
			sq := qp.sq.q
			var at []uint32
			fk.onDoorbell = func(uint32) {
				at = append(at, sq.prod.Load())
				sq.cons.Store(sq.prod.Load())
			}
			if n, err := qp.PostSend(tc.wrs); n != len(tc.wrs) || err != nil {
				t.Fatalf("PostSend = %d, %v", n, err)
			}
			if !slices.Equal(at, tc.at) || int(fk.raw.Load()) != tc.raw {
				t.Errorf("doorbells at producer %v, %d raw; want %v, %d raw", at, fk.raw.Load(), tc.at, tc.raw)
			}
		})
	}
	t.Run("a part refused", func(t *testing.T) {
		fk, c := testContext(t)
		qp := testQP(t, fk, c, qpSpec{})
		fk.dbErr = unix.EIO
		wrs := list(4, write(max))
		n, err := qp.PostSend(wrs)
		var de *DoorbellError
		if n != len(wrs) || !errors.As(err, &de) || de.Posted != len(wrs) || !errors.Is(err, unix.EIO) {
			t.Fatalf("PostSend = %d, %v; want %d and a DoorbellError (EIO) with all posted", n, err, len(wrs))
		}
		if p := qp.sq.q.prod.Load(); p != uint32(len(wrs)) || fk.doorbells.Load() != 1 {
			t.Errorf("producer %d after %d doorbells; want %d after 1 (no more after the refused part)", p, fk.doorbells.Load(), len(wrs))
		}
	})
}
