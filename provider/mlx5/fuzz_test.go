package mlx5

import (
	"encoding/binary"
	"testing"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
)

// FuzzCQE feeds arbitrary 64-byte CQEs (with a valid owner bit) to Poll:
// it must not panic, must consume exactly the new CQE (unless it is INVALID
// or RESIZE), and any completion it returns must carry a wr_id the rings
// hold.
func FuzzCQE(f *testing.F) {
	for _, seed := range [][]byte{
		make([]byte, 64),
		func() []byte {
			e := make([]byte, 64)
			binary.BigEndian.PutUint32(e[cqeSrqnUidx:], tQPUidx)
			e[cqeOpOwn] = cqeReqErr << 4
			return e
		}(),
		func() []byte {
			e := make([]byte, 64)
			binary.BigEndian.PutUint32(e[cqeSrqnUidx:], tSRQUidx)
			binary.BigEndian.PutUint16(e[cqeWqeCounter:], 0xffff)
			e[cqeOpOwn] = cqeRespSend << 4
			return e
		}(),
	} {
		f.Add(seed, uint8(1), false)
	}
	f.Fuzz(func(t *testing.T, e []byte, version uint8, big bool) {
		if len(e) < cqe64Size {
			return
		}
		size := 64
		if big {
			size = 128
		}
		tc := newTestCQ(t, size, version&1, 3)
		tc.put(t, 0, func(c []byte) { copy(c, e[:cqe64Size]) })
		var wc [2]provider.WorkCompletion
		n, err := tc.cq.Poll(wc[:])
		// INVALID means not written yet; RESIZE ends the old ring during a
		// resize and is consumed by Resize, never by Poll.
		if op := e[cqeOpOwn] >> 4; op == cqeInvalid || op == cqeResize {
			if n != 0 || err != nil || tc.cq.ci != 0 {
				t.Fatalf("a CQE with opcode %d was consumed: n %d, err %v, ci %d", op, n, err, tc.cq.ci)
			}
			return
		}
		if tc.cq.ci != 1 {
			t.Fatalf("ci = %d after one new CQE", tc.cq.ci)
		}
		if n == 1 {
			id := wc[0].ID
			if !(id >= 0x5000 && id < 0x5010 || id >= 0x7000 && id < 0x7008 || id >= 0x9000 && id < 0x9004) {
				t.Fatalf("wr_id %#x is no WQE's", id)
			}
		}
	})
}

// FuzzSendWR builds arbitrary send WRs: planSend must refuse or accept
// without panicking, and an accepted WR must build a WQE of exactly the
// planned WQEBBs that writes nothing outside them, with the DS it planned.
func FuzzSendWR(f *testing.F) {
	f.Add(uint8(2), uint8(2), uint32(0), uint8(1), uint32(64), uint8(2), uint8(16), uint32(7), uint64(0))
	f.Add(uint8(5), uint8(2), uint32(2), uint8(1), uint32(8), uint8(1), uint8(0), uint32(0), uint64(8))
	f.Add(uint8(0), uint8(3), uint32(8), uint8(3), uint32(40), uint8(4), uint8(64), uint32(62), uint64(1))
	f.Add(uint8(2), uint8(4), uint32(8), uint8(2), uint32(9), uint8(2), uint8(32), uint32(63), uint64(0))
	mem, err := mmap.Anonymous(1 << 16)
	if err != nil {
		f.Fatal(err)
	}
	defer mem.Close()
	base := uint64(mem.Addr())
	a := &ah{}
	f.Fuzz(func(t *testing.T, op, typ uint8, flags uint32, nsge uint8, length uint32, maxSGE, maxInline uint8, head uint32, raddr uint64) {
		qt := provider.QPType(2 + typ%3)
		hdr := sendHeader(qt)
		inl := uint32(0)
		if maxInline > 0 {
			inl = (inlHdrSize + uint32(maxInline) + 15) &^ 15
		}
		shape := testShape(qt, uint32(maxSGE%8), uint32(maxInline), (hdr+max(uint32(maxSGE%8)*dataSize, inl)+wqeBB-1)/wqeBB)
		wr := provider.SendWR{ID: 1, Opcode: provider.WROpcode(op % 12), Flags: provider.SendFlags(flags % 32),
			RemoteAddr: raddr, RKey: 3, Imm: 4, CompareAdd: 5, Swap: 6,
			UD: provider.UDDest{AH: testAH{a}, RemoteQPN: head & 0xffffff, QKey: 7}}
		for i := 0; i < int(nsge%10); i++ {
			l := (length >> (i * 3)) % 200
			if wr.Flags&provider.SendInline == 0 && i%2 == 1 {
				l = length // any length, the device's business
			}
			wr.SGL = append(wr.SGL, provider.SGE{Addr: base + uint64(i)*256, Length: l, LKey: uint32(i)})
		}
		p, err := checkSend(&shape, &wr)
		if err != nil {
			return
		}
		if p.bbs == 0 || p.bbs > shape.maxBBs || p.ds == 0 || p.ds > 63 {
			t.Fatalf("plan %+v for shape %+v", p, shape)
		}
		const ringBBs = 8
		ring := make([]byte, ringBBs*wqeBB)
		for i := range ring {
			ring[i] = 0xee
		}
		buildSend(ring, head, 0x42, &wr, &p, true)
		inWQE := make([]bool, len(ring))
		for i := uint32(0); i < p.bbs; i++ {
			o := int((head+i)%ringBBs) * wqeBB
			for j := o; j < o+wqeBB; j++ {
				inWQE[j] = true
			}
		}
		for i, b := range ring {
			if !inWQE[i] && b != 0xee {
				t.Fatalf("byte %d outside the WQE's %d WQEBBs was written", i, p.bbs)
			}
		}
		start := int(head%ringBBs) * wqeBB
		if got := binary.BigEndian.Uint32(ring[start+ctrlQpnDs:]); got != 0x42<<8|p.ds {
			t.Fatalf("qpn_ds %#x, planned ds %d", got, p.ds)
		}
	})
}
