package model

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
)

const (
	accLocalWrite   = abi.IB_UVERBS_ACCESS_LOCAL_WRITE
	accRemoteWrite  = abi.IB_UVERBS_ACCESS_REMOTE_WRITE
	accRemoteRead   = abi.IB_UVERBS_ACCESS_REMOTE_READ
	accRemoteAtomic = abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC
)

// dumpFillMkey is the device's dump-fill mkey (the null MR's lkey): an
// index no MR or window gets (they count from 1).
const dumpFillMkey = 0x00000b00

// local resolves n bytes at I/O address addr of the MR with lkey, in the
// QP's PD.
func (d *Device) local(q *mqp, lkey uint32, addr uint64, n uint32, write bool) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	if lkey == dumpFillMkey && !d.o.NoDumpFill {
		// The null MR: writes are discarded, reads give zeroes, any
		// address, any PD.
		return make([]byte, n), true
	}
	m := d.mrs[lkey]
	if m == nil || m.pd != q.pd || write && m.access&accLocalWrite == 0 {
		return nil, false
	}
	if addr < m.iova || addr-m.iova+uint64(n) > m.length {
		return nil, false
	}
	if m.odp && !d.odpAccess(m, m.start+(addr-m.iova), n, write) {
		return nil, false
	}
	return kernel.UserMemory(m.start+(addr-m.iova), int(n)), true
}

// remote resolves n bytes at addr of the MR with rkey on the responder QP,
// which must grant access both in the MR and in its own access flags.
func (d *Device) remote(q *mqp, rkey uint32, addr uint64, n uint32, access uint32) ([]byte, bool) {
	m := d.mrs[rkey]
	if m == nil {
		return d.remoteMW(q, rkey, addr, n, access)
	}
	if m.pd != q.pd || m.access&access == 0 || q.access&access == 0 {
		return nil, false
	}
	if addr < m.iova || addr-m.iova+uint64(n) > m.length {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	if m.odp && !d.odpAccess(m, m.start+(addr-m.iova), n, access != accRemoteRead) {
		return nil, false
	}
	return kernel.UserMemory(m.start+(addr-m.iova), int(n)), true
}

// gather reads a WQE's data: inline bytes or its SGEs' memory.
func (d *Device) gather(q *mqp, w *wqe) ([]byte, bool) {
	if w.isInl {
		return w.inline, true
	}
	var data []byte
	for _, s := range w.sges {
		b, ok := d.local(q, s.lkey, s.addr, s.n, false)
		if !ok {
			return nil, false
		}
		data = append(data, b...)
	}
	return data, true
}

// scatter writes skip bytes of nothing, then prefix, then data into a
// receive WQE's SGEs; syndrome 0 on success.
func (d *Device) scatter(q *mqp, sges []sge, skip int, prefix, data []byte) uint8 {
	total := 0
	for _, s := range sges {
		total += int(s.n)
	}
	if skip+len(prefix)+len(data) > total {
		return synLocalLen
	}
	src := append(append(make([]byte, 0, skip+len(prefix)+len(data)), make([]byte, skip)...), prefix...)
	src = append(src, data...)
	pos := 0
	for _, s := range sges {
		if pos >= len(src) {
			break
		}
		n := min(int(s.n), len(src)-pos)
		b, ok := d.local(q, s.lkey, s.addr, uint32(n), true)
		if !ok {
			return synLocalProt
		}
		lo := pos
		if pos < skip {
			lo = min(skip, pos+n)
		}
		copy(b[lo-pos:], src[lo:pos+n])
		pos += n
	}
	return 0
}

// takeRecv takes the next receive WQE of q (from its SRQ if it has one).
func (d *Device) takeRecv(q *mqp) (*recvSlot, bool) {
	parse := func(w []byte) []sge {
		var ss []sge
		for off := 0; off+wSeg <= len(w); off += wSeg {
			s := sge{n: be.Uint32(w[off+wByteCount:]), lkey: be.Uint32(w[off+wLkey:]), addr: be.Uint64(w[off+wAddr:])}
			if s.lkey == invalidLKey {
				break
			}
			ss = append(ss, s)
		}
		return ss
	}
	if s := q.srq; s != nil {
		d.learnSRQ(s)
		if s.ci == s.pi {
			return nil, false
		}
		h := s.head
		w := s.buf[int(h<<s.shift):int((h+1)<<s.shift)]
		s.head = uint32(be.Uint16(w[wSRQNext:])) & (s.cnt - 1)
		s.ci++
		d.stats.RecvWQEs++
		d.checkSRQLimit(s)
		return &recvSlot{sges: parse(w[wSeg:]), counter: uint16(h), srq: s}, true
	}
	d.learnRQ(q)
	if q.rqCI == q.rqPI || q.rqCnt == 0 {
		return nil, false
	}
	i := q.rqCI & (q.rqCnt - 1)
	w := q.rq[int(i<<q.rqShift):int((i+1)<<q.rqShift)]
	r := &recvSlot{sges: parse(w), counter: uint16(q.rqCI)}
	q.rqCI++
	d.stats.RecvWQEs++
	return r, true
}
