package mlx5_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// errFull is a full queue's refusal, expected while posters race pollers.
var errFull = unix.ENOMEM

func wantClosed(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("%s: %v; want an error wrapping ErrClosed", what, err)
	}
}

// TestFastPathAfterClose: every fast-path method of a closed CQ, QP or SRQ,
// or of one whose context was closed, returns ErrClosed; none reads the
// unmapped rings or writes the unmapped doorbell pages (which would be a
// fatal fault, not a test failure).
func TestFastPathAfterClose(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	wc := make([]uverbs.WorkCompletion, 4)
	send := []uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{n.sge(0, 8)}}}
	recv := []uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{n.sge(0, 8)}}}

	cq := n.cq(16, nil)
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := cq.Poll(wc)
	wantClosed(t, "Poll after CQ.Close", err)
	wantClosed(t, "ReqNotify after CQ.Close", cq.ReqNotify(false))

	cq = n.cq(16, nil)
	qp := n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, qp, qp.QPN(), grhTo(d))
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = qp.PostSend(send)
	wantClosed(t, "PostSend after QP.Close", err)
	_, err = qp.PostRecv(recv)
	wantClosed(t, "PostRecv after QP.Close", err)

	srq, err := n.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srq.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = srq.PostRecv(recv)
	wantClosed(t, "SRQ PostRecv after SRQ.Close", err)

	// Everything open when the context closes.
	qp = n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, qp, qp.QPN(), grhTo(d))
	srq, err = n.pd.CreateSRQ(uverbs.SRQInit{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = cq.Poll(wc)
	wantClosed(t, "Poll after Context.Close", err)
	wantClosed(t, "ReqNotify after Context.Close", cq.ReqNotify(true))
	_, err = qp.PostSend(send)
	wantClosed(t, "PostSend after Context.Close", err)
	_, err = qp.PostRecv(recv)
	wantClosed(t, "PostRecv after Context.Close", err)
	_, err = srq.PostRecv(recv)
	wantClosed(t, "SRQ PostRecv after Context.Close", err)
}

// TestCloseRacesFastPath runs posters, pollers and armers on every queue
// while another goroutine closes the QP, the CQs or the whole context at a
// random moment: nothing faults (run it with -race too), and once the close
// returned every fast-path call fails with ErrClosed.
func TestCloseRacesFastPath(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	d, dev := newModel(t, nil, model.Options{})
	for r := 0; r < rounds; r++ {
		n := openNode(t, d, dev, uverbs.OpenOptions{})
		cqA, cqB := n.cq(256, nil), n.cq(256, nil)
		a, b := n.qp(uverbs.QPTypeRC, cqA, cap1), n.qp(uverbs.QPTypeRC, cqB, cap1)
		connect(t, a, b.QPN(), grhTo(d))
		connect(t, b, a.QPN(), grhTo(d))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		loop := func(f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := f(); err != nil && !errors.Is(err, uverbs.ErrClosed) && !errors.Is(err, errFull) {
						t.Errorf("fast path during close: %v", err)
						return
					}
				}
			}()
		}
		wcA, wcB := make([]uverbs.WorkCompletion, 8), make([]uverbs.WorkCompletion, 8)
		loop(func() error {
			_, err := a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{n.sge(0, 8)}}})
			return err
		})
		loop(func() error {
			_, err := b.PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{n.sge(4096, 64)}}})
			return err
		})
		loop(func() error { _, err := cqA.Poll(wcA); return err })
		loop(func() error { _, err := cqB.Poll(wcB); return err })
		if r%3 != 1 {
			// Not while the CQ itself is closed: uverbs destroys the
			// kernel CQ before the provider's Close, and an arm doorbell
			// in between names a CQ the device no longer has (the model
			// flags it). A context close stops the provider first.
			loop(func() error { return cqB.ReqNotify(false) })
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		var err error
		switch r % 3 {
		case 0:
			err = n.ctx.Close()
		case 1:
			if err = a.Close(); err == nil {
				err = b.Close()
			}
			if err == nil {
				err = cqA.Close()
			}
			if err == nil {
				err = cqB.Close()
			}
		case 2:
			if err = b.Close(); err == nil {
				err = n.ctx.Close()
			}
		}
		if err != nil {
			t.Fatalf("round %d: close: %v", r, err)
		}
		_, err = a.PostSend([]uverbs.SendWR{{ID: 3, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{n.sge(0, 8)}}})
		wantClosed(t, "PostSend after close", err)
		_, err = b.PostRecv([]uverbs.RecvWR{{ID: 4, SGL: []uverbs.SGE{n.sge(4096, 64)}}})
		wantClosed(t, "PostRecv after close", err)
		_, err = cqB.Poll(wcB)
		wantClosed(t, "Poll after close", err)
		wantClosed(t, "ReqNotify after close", cqA.ReqNotify(false))
		close(stop)
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
