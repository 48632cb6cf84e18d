package mlx5_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// channelPair is a model device with one CQ (options o, on a completion
// channel of its own) and two RC QPs on it, connected to each other.
type channelPair struct {
	d  *model.Device
	n  *node
	ch *uverbs.CompChannel
	cq *uverbs.CQ
	a  *uverbs.QP
}

func newChannelPair(t *testing.T, o uverbs.CQOptions) *channelPair {
	d, n, ch := parkNode(t)
	o.Channel = ch
	cq, err := n.ctx.CreateCQ(32, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	t.Cleanup(func() { b.Close(); a.Close() })
	connect(t, a, b.QPN(), grhTo(d))
	connect(t, b, a.QPN(), grhTo(d))
	return &channelPair{d: d, n: n, ch: ch, cq: cq, a: a}
}

// waitAfter starts a CQ.Wait, posts a signaled RDMA WRITE with id after
// delay, and checks that the Wait returned its completion.
func (r *channelPair) waitAfter(t *testing.T, id uint64, delay time.Duration) {
	done := make(chan error, 1)
	go func() {
		wc := make([]uverbs.WorkCompletion, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m, err := r.cq.Wait(ctx, wc)
		if err == nil && (m != 1 || wc[0].ID != id) {
			err = fmt.Errorf("CQ.Wait got %d: %+v", m, wc[0])
		}
		done <- err
	}()
	time.Sleep(delay) // Wait is spinning, or parked
	if _, err := r.a.PostSend([]uverbs.SendWR{{ID: id, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: r.n.addr(8192), RKey: r.n.mr.RKey(), SGL: []uverbs.SGE{r.n.sge(0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWaitSpinFindsCompletion: a completion that comes while CQ.Wait
// spins is returned without arming the CQ and without an event (the
// model counts both); with spinning off (WaitSpin < 0) the same wait arms
// and is woken by the event.
func TestWaitSpinFindsCompletion(t *testing.T) {
	for _, tc := range []struct {
		name         string
		spin         time.Duration
		arms, events int
	}{
		{"spin", 10 * time.Second, 0, 0},
		{"no-spin", -1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newChannelPair(t, uverbs.CQOptions{WaitSpin: tc.spin})
			r.waitAfter(t, 1, 20*time.Millisecond)
			if s := r.d.Stats(); s.Arms != tc.arms || s.Events != tc.events {
				t.Errorf("model saw %d arms and %d events; want %d and %d", s.Arms, s.Events, tc.arms, tc.events)
			}
		})
	}
}

// TestWaitSpinGrows: with CQOptions.WaitSpinMax the spin cap follows the
// waits. A first wait whose completion comes 300 ms in outlasts the 2 ms
// cap, arms and parks; its length raises the cap (to 450 ms), so a second
// wait whose completion comes 30 ms in finds it spinning: one arm in all.
// Without the limit the cap stays 2 ms and both waits arm. Both margins
// are 15x because the test must hold on a loaded machine: with a 5 ms cap
// and a 20 ms second wait (4x), a 2-core CI running packages side by side
// under -race failed "grows" once, and four race binaries beside it failed
// "fixed" 12 times in 40 (the 5 ms spin, stretched by the load, outlasted
// 20 ms); with these figures 0 in 40 under that load.
func TestWaitSpinGrows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit time.Duration
		arms  int
	}{
		{"grows", 10 * time.Second, 1},
		{"fixed", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newChannelPair(t, uverbs.CQOptions{WaitSpin: 2 * time.Millisecond, WaitSpinMax: tc.limit})
			r.waitAfter(t, 1, 300*time.Millisecond)
			r.waitAfter(t, 2, 30*time.Millisecond)
			if s := r.d.Stats(); s.Arms != tc.arms || s.Events != tc.arms {
				t.Errorf("model saw %d arms and %d events in two waits; want %d of each", s.Arms, s.Events, tc.arms)
			}
		})
	}
}
