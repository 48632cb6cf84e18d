package main

import (
	"context"
	"fmt"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// pollBatch is how many completions a bandwidth loop polls at a time
// (perftest's CTX_POLL_BATCH).
const pollBatch = 16

// wait returns at least one completion of cq: busy polling, or parked on
// the completion channel with -e. Once a -D run has ended it may return
// none.
func (s *session) wait(cq *uverbs.CQ, wc []uverbs.WorkCompletion) (int, error) {
	if s.c.events {
		return cq.Wait(context.Background(), wc)
	}
	for {
		n, err := cq.Poll(wc)
		if n != 0 || err != nil || s.over() {
			return n, err
		}
	}
}

// poll is one look at cq (bandwidth loops poll and go back to posting);
// with -e it sleeps until there is something.
func (s *session) poll(cq *uverbs.CQ, wc []uverbs.WorkCompletion) (int, error) {
	if s.c.events {
		return cq.Wait(context.Background(), wc)
	}
	return cq.Poll(wc)
}

func wcError(what string, wc *uverbs.WorkCompletion, n int) error {
	return failf("Completion with error at %s:\n Failed status %d: wr_id %d syndrom 0x%x (%s)\n scnt=%d", what, wc.Status, wc.ID, wc.VendorErr, wc.Status, n)
}

// sendWR is the work request QP i posts for a message of size bytes.
func (s *session) sendWR(i, size int) uverbs.SendWR {
	c := s.c
	wr := uverbs.SendWR{ID: uint64(i), SGL: []uverbs.SGE{{Addr: s.sendAddr(i), Length: uint32(size), LKey: s.mr.LKey()}}}
	r := s.remote[i]
	switch c.verb {
	case verbSend:
		wr.Opcode = uverbs.WRSend
		if c.conn == connUD {
			wr.UD = uverbs.UDDest{AH: s.ahs[i], RemoteQPN: r.qpn, QKey: udQKey}
		}
	case verbWrite:
		wr.Opcode, wr.RemoteAddr, wr.RKey = uverbs.WRRDMAWrite, r.vaddr, r.rkey
	case verbRead:
		wr.Opcode, wr.RemoteAddr, wr.RKey = uverbs.WRRDMARead, r.vaddr, r.rkey
	case verbAtomic:
		wr.Opcode, wr.RemoteAddr, wr.RKey, wr.CompareAdd = uverbs.WRAtomicFetchAndAdd, r.vaddr, r.rkey, 1
		if c.atomicCAS {
			wr.Opcode, wr.Swap = uverbs.WRAtomicCmpAndSwp, 1
		}
		wr.SGL[0].Length = 8
	}
	if size <= s.inline && c.verb != verbRead && c.verb != verbAtomic {
		wr.Flags |= uverbs.SendInline
	}
	return wr
}

// recvWRs are rx_depth receives for QP i, each into its receive area.
func (s *session) postRecvs(i, size, n int) error {
	if n <= 0 {
		return nil
	}
	if s.c.conn == connUD {
		size += udGRH
	}
	wr := uverbs.RecvWR{ID: uint64(i), SGL: []uverbs.SGE{{Addr: s.recvAddr(i), Length: uint32(size), LKey: s.mr.LKey()}}}
	wrs := make([]uverbs.RecvWR, n)
	for j := range wrs {
		wrs[j] = wr
	}
	if got, err := s.qps[i].PostRecv(wrs); got != n {
		return failf("Couldn't post receive (%d of %d): %v", got, n, err)
	}
	return nil
}

// sendLat is ib_send_lat: the two sides send to each other in turn, each
// send signaled and waited for; the latency is half the time between two
// sends of one side.
func (s *session) sendLat() error {
	c := s.c
	s.printLatHeader()
	client := c.server != ""
	for _, size := range s.sizes() {
		for i := range s.qps {
			if err := s.postRecvs(i, size, c.rxDepth); err != nil {
				return err
			}
		}
		if err := s.sync(); err != nil {
			return err
		}
		s.stamps(c.iters)
		qp := s.qps[0]
		wrs := []uverbs.SendWR{s.sendWR(0, size)}
		wrs[0].Flags |= uverbs.SendSignaled
		rwr := []uverbs.RecvWR{{ID: 0, SGL: []uverbs.SGE{{Addr: s.recvAddr(0), Length: uint32(size), LKey: s.mr.LKey()}}}}
		if c.conn == connUD {
			rwr[0].SGL[0].Length += udGRH
		}
		wc := make([]uverbs.WorkCompletion, 1)
		scnt, rcnt, count := 0, 0, 0
		if c.duration > 0 {
			s.clock = s.startClock()
		}
		for s.more(scnt) || s.more(rcnt) {
			if s.more(rcnt) && !(scnt < 1 && client) {
				n, err := s.wait(s.recvCQ, wc)
				if err != nil {
					return failf("poll CQ failed: %v", err)
				}
				if n == 0 { // the -D run ended
					break
				}
				if wc[0].Status != uverbs.WCSuccess {
					return wcError("receive", &wc[0], rcnt)
				}
				rcnt++
				if s.counting() {
					count++
				}
				if c.duration > 0 || rcnt+c.rxDepth <= c.iters {
					if n, err := s.qps[wc[0].ID].PostRecv(rwr); n != 1 {
						return failf("Couldn't post recv: rcnt=%d: %v", rcnt, err)
					}
				}
			}
			if s.more(scnt) {
				if c.duration == 0 {
					s.posted[scnt] = s.now()
				}
				scnt++
				if n, err := qp.PostSend(wrs); n != 1 {
					return failf("Couldn't post send: scnt=%d: %v", scnt, err)
				}
				n, err := s.wait(s.sendCQ, wc)
				if err != nil {
					return failf("poll on Send CQ failed: %v", err)
				}
				if n == 1 && wc[0].Status != uverbs.WCSuccess {
					return wcError("send", &wc[0], scnt)
				}
			}
		}
		if c.duration > 0 {
			s.printLatDuration(size, 2, count)
			continue
		}
		s.printLat(size, 2)
	}
	fmt.Fprint(s.out, resultLine)
	return s.comm.closeConn(s.mine[0])
}

// writeLat is ib_write_lat: each side RDMA-writes a message whose last
// byte counts the iterations, and spins on that byte of its own receive
// area for the peer's write before it writes again.
func (s *session) writeLat() error {
	c := s.c
	s.printLatHeader()
	server := c.server == ""
	buf := s.mem.Bytes()
	for _, size := range s.sizes() {
		s.stamps(c.iters)
		qp := s.qps[0]
		wrs := []uverbs.SendWR{s.sendWR(0, size)}
		wrs[0].Flags |= uverbs.SendSignaled
		postAt := size - 1
		pollAt := c.numQP*s.bufSize + size - 1
		wc := make([]uverbs.WorkCompletion, 1)
		scnt, ccnt, rcnt, count := 0, 0, 0, 0
		if c.duration > 0 {
			s.clock = s.startClock()
		}
		for s.more(scnt) || s.more(ccnt) || s.more(rcnt) {
			if s.more(rcnt) && !(scnt < 1 && server) {
				rcnt++
				for loadByte(buf, pollAt) != byte(rcnt) && !s.over() {
				}
			}
			// A -D run writes once more after its wait ended, as perftest's
			// run_iter_lat_write does.
			if c.duration > 0 || scnt < c.iters {
				if c.duration == 0 {
					s.posted[scnt] = s.now()
				}
				scnt++
				buf[postAt] = byte(scnt)
				if n, err := qp.PostSend(wrs); n != 1 {
					return failf("Couldn't post send: scnt=%d: %v", scnt, err)
				}
			}
			if s.over() {
				break
			}
			if s.more(ccnt) {
				n, err := s.wait(s.sendCQ, wc)
				if err != nil {
					return failf("poll CQ failed: %v", err)
				}
				if n == 0 {
					break
				}
				if wc[0].Status != uverbs.WCSuccess {
					return wcError("send", &wc[0], scnt)
				}
				ccnt++
				if s.counting() {
					count++
				}
			}
		}
		if c.duration > 0 {
			s.printLatDuration(size, 2, count)
			continue
		}
		s.printLat(size, 2)
	}
	fmt.Fprint(s.out, resultLine)
	if c.duration > 0 {
		// ib_write_lat has no closing handshake, and a -D peer's clock
		// ends a little after or before ours: its last write may still be
		// on the way when our run ends. Keep the QP alive a while so the
		// kernel ACKs it: perftest waits for that write's completion
		// without looking at its clock, and rxe (6.1) retransmits to a
		// destroyed QP without ever giving up (completer_retry_err grew
		// 16 a second, retry_exceeded_err stayed 0), so perftest spun
		// forever in 3 of 14 runs against a goverbs side that exited at
		// once.
		time.Sleep(durationLinger)
	}
	return nil
}

// durationLinger is how long a -D write_lat side keeps its QP after its
// run ended, for the peer's last write.
const durationLinger = time.Second

// readLat is ib_read_lat and ib_atomic_lat: the client reads (or runs an
// atomic on) the server's buffer and waits for each to complete; the
// server only waits for the client to finish.
func (s *session) readLat() error {
	c := s.c
	if c.server == "" {
		if err := s.comm.closeConn(s.mine[0]); err != nil {
			return err
		}
		fmt.Fprint(s.out, resultLine)
		return nil
	}
	s.printLatHeader()
	for _, size := range s.sizes() {
		s.stamps(c.iters)
		qp := s.qps[0]
		wrs := []uverbs.SendWR{s.sendWR(0, size)}
		wrs[0].Flags |= uverbs.SendSignaled
		wc := make([]uverbs.WorkCompletion, 1)
		count := 0
		if c.duration > 0 {
			s.clock = s.startClock()
		}
		for scnt := 0; s.more(scnt); {
			if c.duration == 0 {
				s.posted[scnt] = s.now()
			}
			scnt++
			if n, err := qp.PostSend(wrs); n != 1 {
				return failf("Couldn't post send: scnt=%d: %v", scnt, err)
			}
			if s.over() {
				break
			}
			n, err := s.wait(s.sendCQ, wc)
			if err != nil {
				return failf("poll CQ failed: %v", err)
			}
			if n == 0 {
				break
			}
			if wc[0].Status != uverbs.WCSuccess {
				return wcError("send", &wc[0], scnt)
			}
			if s.counting() {
				count++
			}
		}
		if c.duration > 0 {
			s.printLatDuration(size, 1, count)
			continue
		}
		s.printLat(size, 1)
	}
	if err := s.comm.closeConn(s.mine[0]); err != nil {
		return err
	}
	fmt.Fprint(s.out, resultLine)
	return nil
}

// sendBW is ib_send_bw: the client streams sends, the server counts the
// receives and measures from the first to the last.
func (s *session) sendBW() error {
	c := s.c
	s.printBWHeader()
	for _, size := range s.sizes() {
		if c.server == "" {
			for i := range s.qps {
				if err := s.postRecvs(i, size, c.rxDepth); err != nil {
					return err
				}
			}
		}
		if err := s.sync(); err != nil {
			return err
		}
		var rep bwReport
		var err error
		if c.server == "" {
			rep, err = s.bwServer(size)
		} else {
			rep, err = s.bwClient(size)
		}
		if err != nil {
			return err
		}
		s.printBW(rep)
		if c.all {
			if err := s.sync(); err != nil {
				return err
			}
		}
	}
	fmt.Fprint(s.out, resultLine)
	return s.comm.closeConn(s.mine[0])
}

// rdmaBW is ib_write_bw, ib_read_bw and ib_atomic_bw: the client streams
// and reports, then sends its figures to the server, which prints them.
func (s *session) rdmaBW() error {
	c := s.c
	s.printBWHeader()
	if c.server == "" {
		if err := s.sync(); err != nil {
			return err
		}
		rem, err := s.comm.bwReports(bwReport{})
		if err != nil {
			return err
		}
		s.printBW(rem)
		if err := s.comm.closeConn(s.mine[0]); err != nil {
			return err
		}
		fmt.Fprint(s.out, resultLine)
		return nil
	}
	var rep bwReport
	for _, size := range s.sizes() {
		var err error
		if rep, err = s.bwClient(size); err != nil {
			return err
		}
		s.printBW(rep)
	}
	fmt.Fprint(s.out, resultLine)
	if err := s.sync(); err != nil {
		return err
	}
	if _, err := s.comm.bwReports(rep); err != nil {
		return err
	}
	return s.comm.closeConn(s.mine[0])
}

// bwClient is run_iter_bw: keep up to tx_depth WRs outstanding on every
// QP, post_list at a time, one in cq_mod signaled; stamp each post and
// each completion.
func (s *session) bwClient(size int) (bwReport, error) {
	c := s.c
	nqp := len(s.qps)
	total := c.iters * nqp
	dur := c.duration > 0
	if dur {
		total = 0
	}
	if c.noPeak {
		s.stamps(1)
	} else {
		s.stamps(total)
	}
	lists := make([][]uverbs.SendWR, nqp)
	for i := range lists {
		wr := s.sendWR(i, size)
		lists[i] = make([]uverbs.SendWR, c.postList)
		for j := range lists[i] {
			lists[i][j] = wr
			if c.postList > 1 && (j+1)%c.cqMod == 0 {
				lists[i][j].Flags |= uverbs.SendSignaled
			}
		}
	}
	scnt := make([]int, nqp)
	ccnt := make([]int, nqp)
	wc := make([]uverbs.WorkCompletion, pollBatch)
	totS, totC, count := 0, 0, 0
	if dur {
		s.clock = s.startClock()
	} else if c.noPeak {
		s.posted[0] = s.now()
	}
	for totS < total || totC < total || s.more(0) && dur {
		for i, qp := range s.qps {
			wrs := lists[i]
			for (dur || scnt[i] < c.iters) && scnt[i]-ccnt[i]+c.postList <= c.txDepth {
				if s.credit != nil && scnt[i]+c.postList-s.credit.granted(i) >= c.rxDepth {
					break // the server has not granted the receives yet
				}
				if c.postList == 1 {
					// Signal one in cq_mod, and always the last.
					if (scnt[i]%c.cqMod == c.cqMod-1) || (!dur && scnt[i] == c.iters-1) {
						wrs[0].Flags |= uverbs.SendSignaled
					} else {
						wrs[0].Flags &^= uverbs.SendSignaled
					}
				}
				if !c.noPeak {
					s.posted[totS] = s.now()
				}
				if s.over() {
					break
				}
				if n, err := qp.PostSend(wrs); n != len(wrs) {
					return bwReport{}, failf("Couldn't post send: qp %d scnt=%d: %v", i, scnt[i], err)
				}
				scnt[i] += c.postList
				totS += c.postList
			}
		}
		if totC < total || dur && totC < totS {
			n, err := s.poll(s.sendCQ, wc)
			if err != nil {
				return bwReport{}, failf("poll CQ failed: %v", err)
			}
			for k := range wc[:n] {
				if wc[k].Status != uverbs.WCSuccess {
					return bwReport{}, wcError("send", &wc[k], totS)
				}
				ccnt[wc[k].ID] += c.cqMod
				totC += c.cqMod
				if !c.noPeak {
					s.completed[min(totC, total)-1] = s.now()
				}
				if s.counting() {
					count += c.cqMod
				}
			}
		}
	}
	if dur {
		return s.durationFigures(size, count), nil
	}
	if c.noPeak {
		s.completed[0] = s.now()
	}
	return s.bwFigures(size, total), nil
}

// bwServer is run_iter_bw_server: count the receives on every QP, keep
// the receive queues full, time from the first receive to the last.
func (s *session) bwServer(size int) (bwReport, error) {
	c := s.c
	nqp := len(s.qps)
	total := c.iters * nqp
	dur := c.duration > 0
	if dur {
		// As perftest (set_on_first_rx_packet), the clock starts at the
		// first receive, so this side ends after its client: a client
		// still posting after the server ended would meet no receives
		// (RNR NAKs, which rxe on 5.10 retries at once, forever).
		total = 0
		s.clock = nil
	}
	s.stamps(1)
	rsize := size
	if c.conn == connUD {
		rsize += udGRH
	}
	rwrs := make([][]uverbs.RecvWR, nqp)
	for i := range rwrs {
		rwrs[i] = []uverbs.RecvWR{{ID: uint64(i), SGL: []uverbs.SGE{{Addr: s.recvAddr(i), Length: uint32(rsize), LKey: s.mr.LKey()}}}}
	}
	posted := make([]int, nqp)
	for i := range posted {
		posted[i] = c.rxDepth
	}
	wc := make([]uverbs.WorkCompletion, pollBatch)
	rcntQP := make([]int, nqp)
	var scredit []int // credit writes not yet completed, per QP
	var swc []uverbs.WorkCompletion
	if s.credit != nil {
		scredit, swc = make([]int, nqp), make([]uverbs.WorkCompletion, c.txDepth)
	}
	first := true
	count := 0
	for rcnt := 0; rcnt < total || dur && !s.over(); {
		n, err := s.poll(s.recvCQ, wc)
		if err != nil {
			return bwReport{}, failf("poll CQ failed: %v", err)
		}
		if s.over() {
			break
		}
		if n > 0 && first {
			first = false
			if dur {
				s.clock = s.startClock()
			} else {
				s.posted[0] = s.now()
			}
		}
		for k := range wc[:n] {
			if wc[k].Status != uverbs.WCSuccess {
				return bwReport{}, wcError("receive", &wc[k], rcnt)
			}
			rcnt++
			if s.counting() {
				count++
			}
			i := wc[k].ID
			rcntQP[i]++
			if dur || posted[i]+1 <= c.iters {
				if got, err := s.qps[i].PostRecv(rwrs[i]); got != 1 {
					return bwReport{}, failf("Couldn't post recv: %v", err)
				}
				posted[i]++
			}
			if s.credit != nil && (rcntQP[i]%c.rxDepth)%s.credit.cnt == 0 {
				if err := s.grant(int(i), rcntQP[i], scredit, swc); err != nil {
					return bwReport{}, err
				}
			}
		}
	}
	if !dur {
		s.completed[0] = s.now()
	}
	if s.credit != nil {
		// clean_scq_credit: wait for the credit writes still outstanding.
		for sum(scredit) > 0 {
			n, err := s.poll(s.sendCQ, swc)
			if err != nil {
				return bwReport{}, failf("Poll send CQ to clean credit failed: %v", err)
			}
			for _, w := range swc[:n] {
				if w.Status != uverbs.WCSuccess {
					return bwReport{}, failf("Poll send CQ error status=%d qp %d", w.Status, w.ID)
				}
				scredit[w.ID]--
			}
		}
	}
	if dur {
		return s.durationFigures(size, count), nil
	}
	return s.bwFigures(size, total), nil
}

// grant writes QP i's receive count to the client's credit word (the
// server's side of send_rcredit), first waiting for a send completion if
// tx_depth credit writes are outstanding on that QP.
func (s *session) grant(i, rcnt int, scredit []int, swc []uverbs.WorkCompletion) error {
	for scredit[i] >= s.c.txDepth {
		n, err := s.poll(s.sendCQ, swc)
		if err != nil {
			return failf("Poll send CQ failed: %v", err)
		}
		for _, w := range swc[:n] {
			if w.Status != uverbs.WCSuccess {
				return failf("Poll send CQ error status=%d qp %d credit=%d scredit=%d", w.Status, w.ID, rcnt, scredit[w.ID])
			}
			scredit[w.ID]--
		}
	}
	if n, err := s.qps[i].PostSend(s.credit.writeWR(i, rcnt, s.remote[i])); n != 1 {
		return failf("Couldn't post send qp %d credit = %d: %v", i, rcnt, err)
	}
	scredit[i]++
	return nil
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}
