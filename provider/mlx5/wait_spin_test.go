package mlx5_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

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
			d, dev := newModel(t, nil, model.Options{})
			n := openNode(t, d, dev, uverbs.OpenOptions{})
			ch, err := n.ctx.CreateCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			cq, err := n.ctx.CreateCQ(32, uverbs.CQOptions{Channel: ch, WaitSpin: tc.spin})
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
			defer a.Close()
			defer b.Close()
			connect(t, a, b.QPN(), grhTo(d))
			connect(t, b, a.QPN(), grhTo(d))
			done := make(chan error, 1)
			go func() {
				wc := make([]uverbs.WorkCompletion, 1)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				m, err := cq.Wait(ctx, wc)
				if err == nil && (m != 1 || wc[0].ID != 1) {
					err = fmt.Errorf("CQ.Wait got %d: %+v", m, wc[0])
				}
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // Wait is spinning, or parked
			if _, err := a.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				RemoteAddr: n.addr(8192), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if s := d.Stats(); s.Arms != tc.arms || s.Events != tc.events {
				t.Errorf("model saw %d arms and %d events; want %d and %d", s.Arms, s.Events, tc.arms, tc.events)
			}
		})
	}
}

// TestWaitSpinGrows: with CQOptions.WaitSpinMax the spin cap follows the
// waits. A first wait whose completion comes 100 ms in outlasts the 5 ms
// cap, arms and parks; its length raises the cap (to 150 ms), so a second
// wait whose completion comes 20 ms in finds it spinning: one arm in all.
// Without the limit the cap stays 5 ms and both waits arm.
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
			d, dev := newModel(t, nil, model.Options{})
			n := openNode(t, d, dev, uverbs.OpenOptions{})
			ch, err := n.ctx.CreateCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			cq, err := n.ctx.CreateCQ(32, uverbs.CQOptions{Channel: ch, WaitSpin: 5 * time.Millisecond, WaitSpinMax: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
			defer a.Close()
			defer b.Close()
			connect(t, a, b.QPN(), grhTo(d))
			connect(t, b, a.QPN(), grhTo(d))
			for i, delay := range []time.Duration{100 * time.Millisecond, 20 * time.Millisecond} {
				done := make(chan error, 1)
				go func() {
					wc := make([]uverbs.WorkCompletion, 1)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					m, err := cq.Wait(ctx, wc)
					if err == nil && (m != 1 || wc[0].ID != uint64(i+1)) {
						err = fmt.Errorf("CQ.Wait got %d: %+v", m, wc[0])
					}
					done <- err
				}()
				time.Sleep(delay)
				if _, err := a.PostSend([]uverbs.SendWR{{ID: uint64(i + 1), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
					RemoteAddr: n.addr(8192), RKey: n.mr.RKey(), SGL: []uverbs.SGE{n.sge(0, 8)}}}); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if s := d.Stats(); s.Arms != tc.arms || s.Events != tc.arms {
				t.Errorf("model saw %d arms and %d events in two waits; want %d of each", s.Arms, s.Events, tc.arms)
			}
		})
	}
}
