package main

import (
	"fmt"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// fastRecvDepth is the receive queue of post_recv's QP: room for every
// receive of a run (slowloop.sh's N2 at most), on rxe and siw alike.
const fastRecvDepth = 16384

// runFast is the loop of a fast-path verb, as slowloop.c's fast(): a
// straight loop of the call, no closure, so that the two programs' loops
// add the same few instructions a call.
//   - poll_empty: Poll of an empty CQ, 16 completions asked (ibvcost's
//     poll_cq_empty).
//   - post_recv: PostRecv of one request of one 64-byte SGE into a QP in
//     INIT whose receive queue holds every request of the run (nothing
//     consumes them).
func runFast(pd *uverbs.PD, cq *uverbs.CQ, verb string, n int) error {
	switch verb {
	case "poll_empty":
		var wc [16]uverbs.WorkCompletion
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if k, err := cq.Poll(wc[:]); err != nil || k != 0 {
				return fmt.Errorf("poll of an empty CQ: %d, %v", k, err)
			}
		}
		report(verb, n, t0)
		return nil
	case "post_recv":
		if n > fastRecvDepth {
			return fmt.Errorf("post_recv: at most %d calls", fastRecvDepth)
		}
		qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: fastRecvDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return err
		}
		defer qp.Close()
		init := uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite}
		if err := qp.Modify(&init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			return err
		}
		buf := make([]byte, 4096)
		mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
		if err != nil {
			return err
		}
		defer mr.Close()
		wr := []uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}}
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if _, err := qp.PostRecv(wr); err != nil {
				return err
			}
		}
		report(verb, n, t0)
		return nil
	}
	return fmt.Errorf("no verb %s", verb)
}
