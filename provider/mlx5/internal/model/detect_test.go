package model

import (
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// TestDetectsProtocolErrors makes the mistakes a provider could make, by
// writing the provider's memory behind its back, and checks the model
// notices each one: a send counter moved without a UAR doorbell, a WQE with
// the wrong index, a CQ armed without its UAR write.
func TestDetectsProtocolErrors(t *testing.T) {
	f := NewFabric()
	d, err := f.Add(Options{DoorbellWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, err := uverbs.Open(uverbs.Device{Name: d.Name(), Driver: uverbs.DriverMLX5, CharDev: d.CharDev()})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, _ := ctx.AllocPD()
	defer pd.Close()
	cq, err := ctx.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1}, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err) // a QP in RESET has its doorbell records ignored
	}

	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("the model did not notice %s: stats %+v, violations %v", what, d.Stats(), d.Violations())
			}
			time.Sleep(time.Millisecond)
		}
	}
	d.f.mu.Lock()
	q := d.qps[qp.QPN()]
	c := d.cqs[q.scq.cqn]
	// A NOP-sized WQE (ctrl only, DS 1) at index 0 carrying index 5.
	clear(q.sq[:bb])
	be.PutUint32(q.sq[wCtrlOpcode:], 5<<8|opSend)
	be.PutUint32(q.sq[wCtrlQpnDs:], q.qpn<<8|1)
	be.PutUint32(q.db[dbRecSend:], 1) // no UAR write follows
	d.f.mu.Unlock()
	wait("a send counter without a doorbell", func() bool { return d.Stats().MissedDoorbells == 1 })
	v := strings.Join(d.Violations(), "\n")
	for _, want := range []string{"carries index 5", "without a doorbell naming WQE 0"} {
		if !strings.Contains(v, want) {
			t.Errorf("violations do not mention %q:\n%s", want, v)
		}
	}

	d.f.mu.Lock()
	be.PutUint32(c.db[dbRecArm:], 0x1234) // an arm word, but no UAR write
	d.f.mu.Unlock()
	wait("an arm without its UAR write", func() bool { return d.Stats().MissedArms == 1 })

	d.f.mu.Lock()
	d.violations = nil
	d.f.mu.Unlock()
}
