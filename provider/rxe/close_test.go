package rxe

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
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
