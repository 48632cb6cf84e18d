package mlx5_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// parkCQ is a CQ whose waits park at once (spinning off) and a connected
// QP pair on it whose RDMA writes complete there.
type parkCQ struct {
	cq   *uverbs.CQ
	a    *uverbs.QP
	wr   []uverbs.SendWR
	wc   []uverbs.WorkCompletion
	next uint64
}

func newParkCQ(t testing.TB, d *model.Device, n *node, ch *uverbs.CompChannel) *parkCQ {
	t.Helper()
	cq, err := n.ctx.CreateCQ(64, uverbs.CQOptions{Channel: ch, WaitSpin: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))
	wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: n.addr(8192), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}}
	return &parkCQ{cq: cq, a: a, wr: wr, wc: make([]uverbs.WorkCompletion, 1)}
}

// post posts one signaled write and returns its ID.
func (p *parkCQ) post() (uint64, error) {
	p.next++
	p.wr[0].ID = p.next
	_, err := p.a.PostSend(p.wr)
	return p.next, err
}

// parkNode opens a model device with a completion channel, closed at
// the end of the test.
func parkNode(tb testing.TB) (*model.Device, *node, *uverbs.CompChannel) {
	tb.Helper()
	d, dev := newModel(tb, nil, model.Options{})
	n := openNode(tb, d, dev, uverbs.OpenOptions{})
	ch, err := n.ctx.CreateCompChannel()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ch.Close() })
	return d, n, ch
}

// poster posts p's writes from another goroutine: each value sent on the
// returned channel is the model's arm count before the waiter's wait, and
// the write goes once the model has taken one more (so the wait really
// parks); a negative value posts at once. Each post's error comes back on
// posted. Closing orders ends the goroutine.
func poster(d *model.Device, p *parkCQ) (orders chan<- int, posted <-chan error) {
	in, out := make(chan int), make(chan error, 1)
	go func() {
		for before := range in {
			for before >= 0 && d.Stats().Arms <= before {
				time.Sleep(20 * time.Microsecond)
			}
			_, err := p.post()
			out <- err
		}
	}()
	return in, out
}

// wait is CQ.Wait for the completion of write id, as an error.
func (p *parkCQ) wait(ctx context.Context, id uint64) error {
	n, err := p.cq.Wait(ctx, p.wc)
	if err == nil && (n != 1 || p.wc[0].ID != id || p.wc[0].Status != uverbs.WCSuccess) {
		err = fmt.Errorf("CQ.Wait got %d: %+v; want write %d", n, p.wc[0], id)
	}
	return err
}

// waitArms waits until the model has taken n arm requests in all: a
// waiter that armed its CQ is parked, or about to.
func waitArms(t testing.TB, d *model.Device, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.Stats().Arms < n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the model took %d arms; want %d", d.Stats().Arms, n)
		}
	}
	time.Sleep(5 * time.Millisecond) // from the arm into the park
}

// result waits for a waiter's result.
func result(t testing.TB, what string, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no return in 10 s", what)
		return nil
	}
}

// quiet checks that a waiter has not returned.
func quiet(t testing.TB, what string, c <-chan error) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("%s returned (%v); it has nothing to return", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestParkedWaitersShareTheReader: two goroutines parked in CQ.Wait on
// two CQs of one channel. Whichever reads the channel hands the other's
// event to it; when the reader leaves (its ctx ends), the other takes the
// channel over and still gets its event; and a CompChannel.Wait parked
// beside a CQ.Wait gets no event of the CQ.Wait's CQ.
func TestParkedWaitersShareTheReader(t *testing.T) {
	d, n, ch := parkNode(t)
	p1, p2 := newParkCQ(t, d, n, ch), newParkCQ(t, d, n, ch)
	arms := d.Stats().Arms

	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	w1 := make(chan error, 1)
	go func() { w1 <- p1.wait(ctx1, 1) }()
	arms++
	waitArms(t, d, arms)
	for round := range 2 {
		id := uint64(round + 1)
		w2 := make(chan error, 1)
		go func() { w2 <- p2.wait(context.Background(), id) }()
		arms++
		waitArms(t, d, arms)
		if round == 1 {
			// The first waiter leaves: the second must read for itself.
			cancel1()
			if err := result(t, "CQ.Wait on the first CQ, its ctx canceled", w1); !errors.Is(err, context.Canceled) {
				t.Fatalf("CQ.Wait on the first CQ after its ctx was canceled: %v; want context.Canceled", err)
			}
		}
		if _, err := p2.post(); err != nil {
			t.Fatal(err)
		}
		if err := result(t, fmt.Sprintf("round %d: CQ.Wait on the second CQ", round), w2); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round == 0 {
			quiet(t, "CQ.Wait on the first CQ", w1)
		}
	}

	// A CQ.Wait that found its completion by polling (woken to take over
	// the reader, say) leaves its arm's event in the channel: read what
	// is there, so that what follows starts from an empty channel.
	for {
		dctx, dcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		cq, err := ch.Wait(dctx)
		dcancel()
		if err != nil {
			break
		}
		if cq != p2.cq {
			t.Fatalf("CompChannel.Wait returned %p, not the second CQ %p, for a left-over event", cq, p2.cq)
		}
	}
	// CompChannel.Wait and CQ.Wait parked together: the CQ's event is
	// CQ.Wait's; CompChannel.Wait returns the other CQ only.
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	cw := make(chan *uverbs.CQ, 1)
	go func() {
		cq, err := ch.Wait(cctx)
		if err != nil {
			t.Errorf("CompChannel.Wait: %v", err)
		}
		cw <- cq
	}()
	w2 := make(chan error, 1)
	go func() { w2 <- p2.wait(context.Background(), 3) }()
	arms++
	waitArms(t, d, arms)
	if _, err := p2.post(); err != nil {
		t.Fatal(err)
	}
	if err := result(t, "CQ.Wait beside CompChannel.Wait", w2); err != nil {
		t.Fatal(err)
	}
	select {
	case cq := <-cw:
		t.Fatalf("CompChannel.Wait returned %p for an event CQ.Wait owned", cq)
	case <-time.After(20 * time.Millisecond):
	}
	if err := p1.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if _, err := p1.post(); err != nil {
		t.Fatal(err)
	}
	select {
	case cq := <-cw:
		if cq != p1.cq {
			t.Fatalf("CompChannel.Wait returned %p; want the first CQ %p", cq, p1.cq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CompChannel.Wait: no return in 10 s for the first CQ's event")
	}
}

// TestParkedWaitContextReused: a goroutine that parks again and again on
// one cancelable ctx is still woken by that ctx's end (the registration
// with ctx is kept between waits), a later wait on a new ctx is woken by
// the new one, and a wait on the ended ctx returns at once.
func TestParkedWaitContextReused(t *testing.T) {
	d, n, ch := parkNode(t)
	p := newParkCQ(t, d, n, ch)
	arms := d.Stats().Arms
	// A wait arms the CQ unless it is still armed from a wait that
	// ended without its event (a canceled one).
	armed := false
	park := func(ctx context.Context, id uint64) chan error {
		c := make(chan error, 1)
		go func() { c <- p.wait(ctx, id) }()
		if !armed {
			arms++
			waitArms(t, d, arms)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
		armed = true
		return c
	}
	for _, ctxs := range []int{1, 2} {
		ctx, cancel := context.WithCancel(context.Background())
		for range 3 {
			c := park(ctx, p.next+1)
			armed = false // the event disarms it
			if _, err := p.post(); err != nil {
				t.Fatal(err)
			}
			if err := result(t, "CQ.Wait", c); err != nil {
				t.Fatal(err)
			}
		}
		c := park(ctx, 0)
		cancel()
		if err := result(t, fmt.Sprintf("CQ.Wait on ctx %d, canceled while parked", ctxs), c); !errors.Is(err, context.Canceled) {
			t.Fatalf("ctx %d: CQ.Wait: %v; want context.Canceled", ctxs, err)
		}
		if err := p.wait(ctx, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("ctx %d: CQ.Wait on the canceled ctx: %v; want context.Canceled", ctxs, err)
		}
	}
}

// TestAllocsParkedWait: a CQ.Wait that arms, parks and is woken by its
// event allocates nothing of its own, with context.Background and with
// one cancelable ctx reused from wait to wait. A round is a post (by a
// helper goroutine, once the waiter has parked) and the wait; the same
// round with the completion polled instead of waited for is what the
// device model itself allocates, and the difference is the wait's.
func TestAllocsParkedWait(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector allocates on its own")
	}
	d, n, ch := parkNode(t)
	p := newParkCQ(t, d, n, ch)
	// The waited rounds' posts wait for the waiter's arm; the polled
	// rounds' go at once.
	orders, posted := poster(d, p)
	defer close(orders)
	var roundErr error
	waited := func(ctx context.Context) func() {
		return func() {
			id := p.next + 1 // before the order: the helper's post moves p.next
			orders <- d.Stats().Arms
			if err := p.wait(ctx, id); err != nil && roundErr == nil {
				roundErr = err
			}
			if err := <-posted; err != nil && roundErr == nil {
				roundErr = err
			}
		}
	}
	polled := func() {
		orders <- -1
		if err := <-posted; err != nil && roundErr == nil {
			roundErr = err
		}
		for {
			m, err := p.cq.Poll(p.wc)
			if err != nil || m > 0 {
				if err != nil && roundErr == nil {
					roundErr = err
				}
				return
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const runs = 200
	model := testing.AllocsPerRun(runs, polled)
	events := p.cq.Events()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancelable", ctx}} {
		got := testing.AllocsPerRun(runs, waited(tc.ctx))
		if roundErr != nil {
			t.Fatal(roundErr)
		}
		t.Logf("%s: %.1f allocs a parked round, %.1f a polled one", tc.name, got, model)
		if got > model {
			t.Errorf("%s ctx: a parked CQ.Wait round allocates %.1f times, a polled round %.1f: the wait allocates %.1f",
				tc.name, got, model, got-model)
		}
	}
	if woke := p.cq.Events() - events; woke < 2*runs {
		t.Errorf("%d completion events in %d parked waits: the waits did not park", woke, 2*runs)
	}
}

// BenchmarkCQWaitParked is one parked CQ.Wait round on the device model:
// a helper goroutine posts a write once the waiter armed its CQ, and the
// event wakes the waiter (the wake-up path of ping-pong -e).
func BenchmarkCQWaitParked(b *testing.B) {
	d, n, ch := parkNode(b)
	p := newParkCQ(b, d, n, ch)
	orders, posted := poster(d, p)
	defer close(orders)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		id := p.next + 1
		orders <- d.Stats().Arms
		if err := p.wait(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := <-posted; err != nil {
			b.Fatal(err)
		}
	}
}
