package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/goverbs/goverbs/uverbs"
)

// Column headers, as perftest prints them.
const (
	resultFmtLat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	// resultFmtLatDur heads a -D latency test's report.
	resultFmtLatDur = " #bytes        #iterations       t_avg[usec]    tps average\n"
	resultFmtBW     = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	resultFmtBWG    = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
)

// cHex formats v as C's "%#0Nx": zero-padded to width including the "0x",
// which C leaves out for zero.
func cHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*x", width, 0)
	}
	return "0x" + fmt.Sprintf("%0*x", max(width-2, 0), v)
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// printInfo is ctx_print_test_info.
func (s *session) printInfo() {
	c := s.c
	w := s.out
	fmt.Fprint(w, resultLine)
	fmt.Fprintf(w, "                    %s ", c.verb)
	if c.verb == verbAtomic {
		if c.atomicCAS {
			fmt.Fprint(w, "CMP_AND_SWAP ")
		} else {
			fmt.Fprint(w, "FETCH_AND_ADD ")
		}
	}
	if c.kind == bw {
		if c.postList > 1 {
			fmt.Fprint(w, "Post List ")
		}
		fmt.Fprint(w, "BW ")
	} else {
		fmt.Fprint(w, "Latency ")
	}
	fmt.Fprint(w, "Test\n")
	if c.events {
		fmt.Fprintf(w, " Test with events. Using %s_comp0\n", s.dev.Name)
	}
	transport := "IB"
	if s.dev.Transport == uverbs.TransportIWARP {
		transport = "IW"
	}
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", s.dev.Name)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : %s\n", c.numQP, transport)
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : OFF\n", c.conn)
	// perftest 4.5 reports relaxed ordering off in ib_write_lat only.
	fmt.Fprintf(w, " PCIe relax order: %s\n", onOff(!(c.verb == verbWrite && c.kind == lat)))
	fmt.Fprintf(w, " ibv_wr* API     : OFF\n")
	if c.server != "" {
		fmt.Fprintf(w, " TX depth        : %d\n", c.txDepth)
	}
	if c.postList > 1 {
		fmt.Fprintf(w, " Post List       : %d\n", c.postList)
	}
	if c.verb == verbSend && c.server == "" {
		fmt.Fprintf(w, " RX depth        : %d\n", c.rxDepth)
	}
	if c.kind == bw {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", c.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", s.mtu.Bytes())
	link := "IB"
	if s.port.LinkLayer == uverbs.LinkLayerEthernet {
		link = "Ethernet"
	}
	fmt.Fprintf(w, " Link type       : %s\n", link)
	if c.gidx >= 0 {
		fmt.Fprintf(w, " GID index       : %d\n", c.gidx)
	}
	if c.verb != verbRead && c.verb != verbAtomic {
		fmt.Fprintf(w, " Max inline data : %d[B]\n", s.inline)
	} else {
		fmt.Fprintf(w, " Outstand reads  : %d\n", s.outReads)
	}
	onOff, method := "OFF", "Ethernet"
	if c.rdmaCM {
		onOff = "ON"
	}
	if c.commCM {
		method = "rdma_cm"
	}
	fmt.Fprintf(w, " rdma_cm QPs\t : %s\n", onOff)
	fmt.Fprintf(w, " Data ex. method : %s", method)
	if c.rdmaCM && c.server == "" {
		fmt.Fprintf(w, "\n%s Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP", resultLine)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, resultLine)
}

// printDest is ctx_print_pingpong_data.
func (s *session) printDest(side string, d dest) {
	w := s.out
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s", side, cHex(uint64(d.lid), 4), cHex(uint64(d.qpn), 6), cHex(uint64(d.psn), 6))
	// perftest prints by its exchange's verb, which is SEND when the
	// exchange runs over rdma_cm (-R, -z): then no OUT, RKey or VAddr.
	verb := s.c.verb
	if s.c.commCM {
		verb = verbSend
	}
	if verb == verbRead {
		fmt.Fprintf(w, " OUT %s", cHex(uint64(d.outReads), 4))
	}
	if verb == verbRead || verb == verbWrite {
		fmt.Fprintf(w, " RKey %s VAddr %s", cHex(uint64(d.rkey), 8), cHex(d.vaddr, 16))
	}
	fmt.Fprintln(w)
	if s.c.gidx >= 0 {
		fmt.Fprint(w, " GID: ")
		for i, g := range d.gid {
			if i > 0 {
				fmt.Fprint(w, ":")
			}
			fmt.Fprintf(w, "%02d", g)
		}
		fmt.Fprintln(w)
	}
}

func (s *session) printLatHeader() {
	fmt.Fprint(s.out, resultLine)
	if s.c.duration > 0 {
		fmt.Fprint(s.out, resultFmtLatDur)
		return
	}
	fmt.Fprint(s.out, resultFmtLat)
}

func (s *session) printBWHeader() {
	fmt.Fprint(s.out, resultLine)
	if s.c.gbits {
		fmt.Fprint(s.out, resultFmtBWG)
	} else {
		fmt.Fprint(s.out, resultFmtBW)
	}
}

// latTail is how many of the largest samples the latency figures drop
// (perftest's LAT_MEASURE_TAIL).
const latTail = 2

// printLat is print_report_lat: the gaps between consecutive posts, halved
// for round trips (rtt 2), sorted; min, max, median, average, standard
// deviation and percentiles in microseconds.
func (s *session) printLat(size, rtt int) {
	s.toNs(s.posted)
	iters := len(s.posted)
	n := iters - 1
	if n < latTail+1 {
		fmt.Fprintf(s.out, " %-7d %d          (too few iterations for a report)\n", size, iters)
		return
	}
	delta := make([]int64, n)
	for i := range delta {
		delta[i] = s.posted[i+1] - s.posted[i]
	}
	slices.Sort(delta)
	n -= latTail
	q := 1000.0 * float64(rtt) // ns per usec, times the round-trip factor
	var median int64
	if (n-1)%2 != 0 {
		median = (delta[n/2] + delta[n/2-1]) / 2
	} else {
		median = delta[n/2]
	}
	sum := 0.0
	for _, d := range delta[:n] {
		sum += float64(d) / q
	}
	avg := sum / float64(n)
	// perftest accumulates the variance in whole microseconds.
	var varSum float64
	for _, d := range delta[:n] {
		t := int(avg - float64(d)/q)
		varSum += float64(t * t)
	}
	stdev := math.Sqrt(varSum / float64(n))
	i99 := int(math.Ceil(float64(n) * 0.99))
	i999 := int(math.Ceil(float64(n) * 0.999))
	fmt.Fprintf(s.out, " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
		size, iters, float64(delta[0])/q, float64(delta[n])/q, float64(median)/q, avg, stdev,
		float64(delta[i99])/q, float64(delta[i999])/q)
}

// bwFigures is print_report_bw's arithmetic: the average over the whole
// run and, unless -N, the peak over every window that ends in a
// completion.
func (s *session) bwFigures(size, total int) bwReport {
	s.toNs(s.posted, s.completed)
	c := s.c
	format := 1048576.0 // MB/sec (perftest's MiB)
	if c.gbits {
		format = 125000000.0
	}
	last := 0
	if !c.noPeak {
		last = total - 1
	}
	// perftest's stamps are cycles_t, unsigned: a window whose completion
	// was never stamped (tcompleted[0] unless cq_mod is 1, and any slot
	// between two signaled completions) comes out negative, wraps to a
	// huge delta and never wins. Signed, it would win and zero the peak.
	optDelta := uint64(s.completed[0] - s.posted[0])
	if !c.noPeak {
		for i := 0; i < total; i += c.postList {
			for j := roundUp(i+1, c.cqMod) - 1; j < total; j += c.cqMod {
				if t := uint64(s.completed[j]-s.posted[i]) / uint64(j-i+1); t < optDelta {
					optDelta = t
				}
			}
			if total%c.cqMod != 0 {
				j := total - 1
				if t := uint64(s.completed[j]-s.posted[i]) / uint64(j-i+1); t < optDelta {
					optDelta = t
				}
			}
		}
	}
	ns := float64(s.completed[last] - s.posted[0])
	r := bwReport{size: uint64(size), iters: uint64(total)}
	r.avg = float64(size) * float64(total) * 1e9 / (ns * format)
	r.msgRateMpps = float64(total) * 1e9 / (ns * 1e6)
	if !c.noPeak && optDelta > 0 {
		r.peak = float64(size) * 1e9 / (float64(optDelta) * format)
	}
	return r
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// printBW is print_full_bw_report.
func (s *session) printBW(r bwReport) {
	if r.avg < 0.1 && s.c.gbits {
		fmt.Fprintf(s.out, " %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n", r.size, r.iters, r.peak, r.avg, r.msgRateMpps)
		return
	}
	fmt.Fprintf(s.out, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n", r.size, r.iters, r.peak, r.avg, r.msgRateMpps)
}
