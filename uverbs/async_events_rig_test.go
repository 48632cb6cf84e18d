package uverbs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// evWait returns the next async event that match accepts, logging the
// others (a port toggle also changes GIDs, for instance); it fails after
// evTimeout.
func evWait(t *testing.T, c *Context, what string, match func(AsyncEvent) bool) AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), evTimeout)
	defer cancel()
	for {
		ev, err := c.NextAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(ev) {
			return ev
		}
		t.Logf("(while waiting for %s: %s, element %d)", what, ev.Type, ev.Element)
	}
}

// evMaybe is evWait for an event the device may not raise: it reports
// whether one came within d.
func evMaybe(t *testing.T, c *Context, d time.Duration, match func(AsyncEvent) bool) (AsyncEvent, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ev, err := c.NextAsyncEvent(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return AsyncEvent{}, false
		}
		if err != nil {
			t.Fatalf("NextAsyncEvent: %v", err)
		}
		if match(ev) {
			return ev, true
		}
		t.Logf("(other event: %s, element %d)", ev.Type, ev.Element)
	}
}

func evCmd(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// TestAsyncEventsRig checks that async events arrive typed: port events
// carry the port, object events the *CQ, *QP or *SRQ they are about.
//
// rxe raises (Linux 6.1 drivers/infiniband/sw/rxe): PORT_ACTIVE and
// PORT_ERR when its netdev goes up or down, CQ_ERR when a CQ overflows,
// SRQ_LIMIT_REACHED, and SQ_DRAINED; 6.12 also LAST_WQE_REACHED. Neither
// raises QP_FATAL (nothing in rxe dispatches it), so that one is not
// tested here.
func TestAsyncEventsRig(t *testing.T) {
	rigtest.Require(t)
	t.Run("port", testPortEvents)
	t.Run("cq-overrun", testCQOverrun)
	t.Run("srq-limit", testSRQLimit)
	t.Run("sq-drained", testSQDrained)
	t.Run("last-wqe-reached", testLastWQE)
}

// testPortEvents toggles a dummy netdev carrying its own rxe device
// (rxe0's eth0 is not touched): down must bring PORT_ERR on port 1, up
// PORT_ACTIVE.
func testPortEvents(t *testing.T) {
	for _, tool := range []string{"ip", "rdma"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not in PATH", tool)
		}
	}
	const netdev, dev = "ev0", "rxeev"
	evCmd(t, "ip", "link", "add", netdev, "type", "dummy")
	t.Cleanup(func() { exec.Command("ip", "link", "del", netdev).Run() })
	evCmd(t, "ip", "link", "set", netdev, "up")
	evCmd(t, "rdma", "link", "add", dev, "type", "rxe", "netdev", netdev)
	t.Cleanup(func() { exec.Command("rdma", "link", "delete", dev).Run() })

	var d Device
	deadline := time.Now().Add(evTimeout)
	for {
		var err error
		d, err = DeviceByName(dev)
		if err == nil && d.CharDev != "" {
			if _, err = os.Stat(d.CharDev); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no uverbs device after %v: %v", dev, evTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := Open(d)
	if err != nil {
		t.Fatalf("Open(%s): %v", dev, err)
	}
	t.Cleanup(func() { c.Close() })
	portState := func(want PortState) {
		t.Helper()
		deadline := time.Now().Add(evTimeout)
		for {
			p, err := c.QueryPort(1)
			if err != nil {
				t.Fatalf("QueryPort: %v", err)
			}
			if p.State == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("port 1 of %s is %v, want %v", dev, p.State, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	portState(PortActive)

	for _, step := range []struct {
		updown string
		want   EventType
		state  PortState
	}{{"down", EventPortErr, PortDown}, {"up", EventPortActive, PortActive}, {"down", EventPortErr, PortDown}, {"up", EventPortActive, PortActive}} {
		start := time.Now()
		evCmd(t, "ip", "link", "set", netdev, step.updown)
		ev := evWait(t, c, step.want.String(), func(ev AsyncEvent) bool { return ev.Type == step.want })
		if ev.Port != 1 || ev.Element != 1 || ev.CQ != nil || ev.QP != nil || ev.SRQ != nil {
			t.Errorf("%s: %+v, want Port 1 and no object", step.want, ev)
		}
		portState(step.state)
		t.Logf("link %s: %q on port %d after %v", step.updown, ev.Type, ev.Port, time.Since(start).Round(time.Microsecond))
	}
}

// testCQOverrun overflows a CQ: its QP completes more sends than the CQ
// holds, and rxe reports CQ_ERR for that CQ.
func testCQOverrun(t *testing.T) {
	e := newEvEnv(t, "rxe0")
	small := e.cq(t, 1, nil)
	big := e.cq(t, 64, nil)
	a := e.rcQP(t, small, small, nil, 16, 1)
	b := e.rcQP(t, big, big, nil, 1, 16)
	e.pair(t, a, b)
	e.recv(t, b, nil, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
	sends := min(small.CQE()+3, 16)
	for i := range sends {
		e.send(t, a, uint64(i))
	}
	ev := evWait(t, e.ctx, "CQ error", func(ev AsyncEvent) bool { return ev.Type == EventCQErr })
	if ev.CQ != small || ev.QP != nil || ev.SRQ != nil || ev.Port != 0 {
		t.Errorf("CQ error event %+v: want the CQ of %d entries (%p)", ev, small.CQE(), small)
	}
	t.Logf("%d sends on a CQ of %d: %q for that CQ", sends, small.CQE(), ev.Type)
}

// testSRQLimit arms an SRQ's limit: when fewer receives than the limit
// are left, SRQ_LIMIT_REACHED names the SRQ.
func testSRQLimit(t *testing.T) {
	e := newEvEnv(t, "rxe0")
	srq, err := e.pd.CreateSRQ(SRQInit{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatalf("CreateSRQ: %v", err)
	}
	t.Cleanup(func() { srq.Close() })
	cq := e.cq(t, 64, nil)
	a := e.rcQP(t, cq, cq, nil, 16, 1)
	b := e.rcQP(t, cq, cq, srq, 1, 0)
	e.pair(t, a, b)
	e.recv(t, nil, srq, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	if err := srq.Modify(SRQAttr{Limit: 8}, SRQAttrLimit); err != nil {
		t.Fatalf("ModifySRQ(limit 8): %v", err)
	}
	for i := range 3 { // 10 posted, 7 left < 8
		e.send(t, a, uint64(i))
	}
	ev := evWait(t, e.ctx, "SRQ limit", func(ev AsyncEvent) bool { return ev.Type == EventSRQLimitReached })
	if ev.SRQ != srq || ev.QP != nil || ev.CQ != nil || ev.Port != 0 {
		t.Errorf("SRQ limit event %+v: want SRQ %p", ev, srq)
	}
	if a, err := srq.Query(); err != nil || a.Limit != 0 {
		t.Errorf("after the event the SRQ limit is %d, %v; want 0 (disarmed)", a.Limit, err)
	}
}

// testSQDrained moves an RTS QP to SQD with asynchronous notification:
// SQ_DRAINED names the QP.
func testSQDrained(t *testing.T) {
	e := newEvEnv(t, "rxe0")
	cq := e.cq(t, 64, nil)
	a := e.rcQP(t, cq, cq, nil, 16, 1)
	b := e.rcQP(t, cq, cq, nil, 1, 16)
	e.pair(t, a, b)
	e.recv(t, b, nil, 1, 2)
	e.send(t, a, 1)
	if err := a.Modify(&QPAttr{State: QPStateSQD, EnSQDAsyncNotify: 1}, QPAttrState|QPAttrEnSQDAsyncNotify); err != nil {
		t.Fatalf("Modify to SQD: %v", err)
	}
	ev := evWait(t, e.ctx, "SQ drained", func(ev AsyncEvent) bool { return ev.Type == EventSQDrained })
	if ev.QP != a || ev.CQ != nil || ev.SRQ != nil || ev.Port != 0 {
		t.Errorf("SQ drained event %+v: want QP %d (%p)", ev, a.QPN(), a)
	}
}

// testLastWQE moves a QP that uses an SRQ to the error state; IBTA says
// that raises LAST_WQE_REACHED. rxe does on Linux 6.12, not on 6.1: the
// event is required from 6.12 on, and checked if it comes on older ones.
func testLastWQE(t *testing.T) {
	e := newEvEnv(t, "rxe0")
	srq, err := e.pd.CreateSRQ(SRQInit{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatalf("CreateSRQ: %v", err)
	}
	t.Cleanup(func() { srq.Close() })
	cq := e.cq(t, 64, nil)
	a := e.rcQP(t, cq, cq, nil, 16, 1)
	b := e.rcQP(t, cq, cq, srq, 1, 0)
	e.pair(t, a, b)
	e.recv(t, nil, srq, 1, 2)
	e.send(t, a, 1)
	if err := b.Modify(&QPAttr{State: QPStateErr}, QPAttrState); err != nil {
		t.Fatalf("Modify to ERR: %v", err)
	}
	ev, ok := evMaybe(t, e.ctx, 3*time.Second, func(ev AsyncEvent) bool { return ev.Type == EventQPLastWQEReached })
	if !ok {
		if evKernelAtLeast(rigtest.Kernel(), 6, 12) {
			t.Fatalf("rxe on %s raised no %q event for an SRQ QP moved to ERR", rigtest.Kernel(), EventQPLastWQEReached)
		}
		t.Logf("rxe on %s raises no %q event for an SRQ QP moved to ERR (6.12 does)", rigtest.Kernel(), EventQPLastWQEReached)
		return
	}
	if ev.QP != b || ev.CQ != nil || ev.SRQ != nil {
		t.Errorf("last WQE event %+v: want QP %d (%p)", ev, b.QPN(), b)
	}
	t.Logf("rxe on %s raised %q for QP %d", rigtest.Kernel(), ev.Type, ev.QP.QPN())
}

// evKernelAtLeast reports whether a kernel release ("6.12.117+deb12-amd64")
// is at least major.minor.
func evKernelAtLeast(release string, major, minor int) bool {
	f := strings.FieldsFunc(release, func(r rune) bool { return r < '0' || r > '9' })
	if len(f) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(f[0])
	mi, _ := strconv.Atoi(f[1])
	return ma > major || (ma == major && mi >= minor)
}
