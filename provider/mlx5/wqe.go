package mlx5

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var be = binary.BigEndian

// maxMessage is the largest message a WR may describe (2^31 bytes, the
// InfiniBand limit; a data segment's byte_count of 0 would mean 2^31).
const maxMessage = 1 << 31

// sqShape is what validating a send WR needs to know about its queue.
type sqShape struct {
	typ       provider.QPType
	maxSGE    uint32 // as created (QPCap.MaxSendSGE)
	maxInline uint32 // as created (QPCap.MaxInlineData)
	maxBBs    uint32 // the largest WQE the queue was sized for, in WQEBBs
}

// sendPlan is what validation found out about one send WR: everything the
// builder needs besides the WR itself.
type sendPlan struct {
	opcode uint8  // MLX5_OPCODE_*
	inline bool   // data copied into the WQE
	bytes  uint32 // message length
	ds     uint32 // WQE size in 16-byte units
	bbs    uint32 // WQE size in WQEBBs
	ah     *ah    // UD destination
}

// wrError is a send or receive WR refused before anything touched the
// queue: it names the WR by index and says why.
type wrError struct {
	verb  string
	index int
	op    string
	err   error
}

func (e *wrError) Error() string {
	if e.op != "" {
		return fmt.Sprintf("mlx5: %s: WR %d (%s): %v; nothing was posted", e.verb, e.index, e.op, e.err)
	}
	return fmt.Sprintf("mlx5: %s: WR %d: %v; nothing was posted", e.verb, e.index, e.err)
}

func (e *wrError) Unwrap() error { return e.err }

// invalid is an EINVAL with a reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", unix.EINVAL, fmt.Sprintf(format, args...))
}

// notSupported is a provider.ErrNotSupported with a reason.
func notSupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", provider.ErrNotSupported, fmt.Sprintf(format, args...))
}

// planSend validates wr for a queue of shape s and works out its WQE. It
// reads only the WR (not the memory its SGEs point to) and allocates nothing
// unless it fails.
func planSend(s *sqShape, wr *provider.SendWR) (p sendPlan, err error) {
	hdr := uint32(ctrlSize)
	rc, ud := s.typ == provider.QPTypeRC, s.typ == provider.QPTypeUD
	switch wr.Opcode {
	case provider.WRSend:
		p.opcode = opSend
	case provider.WRSendWithImm:
		p.opcode = opSendImm
	case provider.WRSendWithInv:
		if !rc {
			return p, invalid("SEND_WITH_INV needs an RC QP, this one is %s", s.typ)
		}
		p.opcode = opSendInval
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm:
		if ud {
			return p, invalid("%s needs a connected QP, this one is UD", wr.Opcode)
		}
		p.opcode = opRDMAWrite
		if wr.Opcode == provider.WRRDMAWriteWithImm {
			p.opcode = opRDMAWriteIm
		}
		hdr += raddrSize
	case provider.WRRDMARead, provider.WRAtomicCmpAndSwp, provider.WRAtomicFetchAndAdd:
		if !rc {
			return p, invalid("%s needs an RC QP, this one is %s", wr.Opcode, s.typ)
		}
		hdr += raddrSize
		switch wr.Opcode {
		case provider.WRRDMARead:
			p.opcode = opRDMARead
		case provider.WRAtomicCmpAndSwp:
			p.opcode, hdr = opAtomicCS, hdr+atomicSize
		default:
			p.opcode, hdr = opAtomicFA, hdr+atomicSize
		}
	case provider.WRLocalInv, provider.WRBindMW:
		return p, notSupported("%s is not implemented by the mlx5 provider", wr.Opcode)
	default:
		return p, invalid("unknown opcode %d", uint8(wr.Opcode))
	}
	if wr.Flags&^(provider.SendFence|provider.SendSignaled|provider.SendSolicited|provider.SendInline) != 0 {
		return p, invalid("unknown send flags %#x", uint32(wr.Flags))
	}
	if ud {
		if wr.UD.AH == nil {
			return p, invalid("a UD send needs an address handle (UD.AH)")
		}
		a, ok := wr.UD.AH.ProviderAH().(*ah)
		if !ok || a == nil {
			return p, invalid("the address handle was not created on an mlx5 device")
		}
		if wr.UD.RemoteQPN > 0xffffff {
			return p, invalid("remote QPN %#x does not fit in 24 bits", wr.UD.RemoteQPN)
		}
		p.ah = a
		hdr += avSize
	}
	var total uint64
	for i := range wr.SGL {
		total += uint64(wr.SGL[i].Length)
	}
	if total > maxMessage {
		return p, invalid("the SGL describes %d bytes, more than the 2^31 a message may carry", total)
	}
	p.bytes = uint32(total)
	data := uint32(0)
	p.inline = wr.Flags&provider.SendInline != 0
	switch p.opcode {
	case opAtomicCS, opAtomicFA:
		if p.inline {
			return p, invalid("atomic operations cannot be inline")
		}
		if len(wr.SGL) != 1 || wr.SGL[0].Length != 8 {
			return p, invalid("an atomic operation needs exactly one 8-byte SGE for the original value")
		}
		if wr.RemoteAddr%8 != 0 {
			return p, invalid("atomic remote address %#x is not 8-byte aligned", wr.RemoteAddr)
		}
		data = dataSize
	case opRDMARead:
		if p.inline {
			return p, invalid("RDMA_READ cannot be inline (it writes into the SGL)")
		}
	}
	if data == 0 {
		if p.inline {
			if total > uint64(s.maxInline) {
				return p, invalid("%d bytes inline, the QP was created for at most %d", total, s.maxInline)
			}
			if total > 0 {
				data = (inlHdrSize + p.bytes + segSize - 1) &^ (segSize - 1)
			}
		} else {
			if uint32(len(wr.SGL)) > s.maxSGE {
				return p, invalid("%d SGEs, the QP was created for at most %d", len(wr.SGL), s.maxSGE)
			}
			for i := range wr.SGL {
				if wr.SGL[i].Length != 0 { // a zero byte_count would mean 2 GiB to the device
					data += dataSize
				}
			}
		}
	}
	size := hdr + data
	p.ds = size / segSize
	p.bbs = (size + wqeBB - 1) / wqeBB
	if p.bbs > s.maxBBs {
		return p, invalid("the WQE needs %d bytes, the queue was sized for %d", size, s.maxBBs*wqeBB)
	}
	return p, nil
}

// wqeWriter hands out the 16-byte segments of one WQE in the send ring,
// wrapping at its end.
type wqeWriter struct {
	ring []byte
	pos  int
}

func (w *wqeWriter) seg() []byte {
	s := w.ring[w.pos : w.pos+segSize : w.pos+segSize]
	w.pos += segSize
	if w.pos == len(w.ring) {
		w.pos = 0
	}
	return s
}

// buildSend writes the WQE that p describes for wr at producer counter head
// of ring (a power-of-two number of WQEBBs). It must follow a successful
// planSend of the same WR.
func buildSend(ring []byte, head, qpn uint32, wr *provider.SendWR, p *sendPlan, signal bool) {
	mask := uint32(len(ring)/wqeBB) - 1
	w := wqeWriter{ring: ring, pos: int(head&mask) * wqeBB}
	ctrl := w.seg()
	be.PutUint32(ctrl[ctrlOpmodIdxOpcode:], (head&0xffff)<<8|uint32(p.opcode))
	be.PutUint32(ctrl[ctrlQpnDs:], qpn<<8|p.ds)
	ctrl[ctrlSignature], ctrl[ctrlSignature+1], ctrl[ctrlSignature+2] = 0, 0, 0
	var fm uint8
	if signal {
		fm |= ctrlCQUpdate
	}
	if wr.Flags&provider.SendSolicited != 0 {
		fm |= ctrlSolicited
	}
	if wr.Flags&provider.SendFence != 0 {
		fm |= ctrlFence
	}
	ctrl[ctrlFmCeSe] = fm
	var imm uint32
	switch p.opcode {
	case opSendImm, opRDMAWriteIm:
		imm = wr.Imm
	case opSendInval:
		imm = wr.InvalidateRKey
	}
	be.PutUint32(ctrl[ctrlImm:], imm)

	if p.ah != nil {
		// ctrl + AV fill the first WQEBB exactly: three whole segments.
		for i := 0; i < avSize/segSize; i++ {
			copy(w.seg(), p.ah.av[i*segSize:(i+1)*segSize])
		}
		av := ring[int(head&mask)*wqeBB+ctrlSize:]
		be.PutUint32(av[avQkey:], wr.UD.QKey)
		be.PutUint32(av[avQkey+4:], 0)
		be.PutUint32(av[avDqpDct:], wr.UD.RemoteQPN|extendedUDAV)
	}
	switch p.opcode {
	case opRDMAWrite, opRDMAWriteIm, opRDMARead, opAtomicCS, opAtomicFA:
		r := w.seg()
		be.PutUint64(r[raddrRaddr:], wr.RemoteAddr)
		be.PutUint32(r[raddrRkey:], wr.RKey)
		be.PutUint32(r[raddrRkey+4:], 0)
	}
	switch p.opcode {
	case opAtomicCS:
		a := w.seg()
		be.PutUint64(a[atomicSwapAdd:], wr.Swap)
		be.PutUint64(a[atomicCompare:], wr.CompareAdd)
	case opAtomicFA:
		a := w.seg()
		be.PutUint64(a[atomicSwapAdd:], wr.CompareAdd)
		be.PutUint64(a[atomicCompare:], 0)
	}
	if p.inline {
		if p.bytes > 0 {
			writeInline(w.ring, w.pos, wr.SGL, p.bytes)
		}
		return
	}
	for i := range wr.SGL {
		s := &wr.SGL[i]
		if s.Length == 0 {
			continue
		}
		putDataSeg(w.seg(), s.Length, s.LKey, s.Addr)
	}
}

func putDataSeg(d []byte, n, lkey uint32, addr uint64) {
	be.PutUint32(d[dataByteCount:], n)
	be.PutUint32(d[dataLkey:], lkey)
	be.PutUint64(d[dataAddr:], addr)
}

// writeInline writes an inline data segment at pos of ring: the byte count
// with MLX5_INLINE_SEG, then the SGL's bytes, wrapping at the ring's end, and
// zeroes up to the next 16-byte boundary.
func writeInline(ring []byte, pos int, sgl []provider.SGE, total uint32) {
	be.PutUint32(ring[pos+inlByteCount:], total|inlineSeg)
	off := pos + inlHdrSize
	for i := range sgl {
		n := sgl[i].Length
		if n == 0 {
			continue
		}
		src := userBytes(sgl[i].Addr, int(n))
		for len(src) > 0 {
			c := copy(ring[off:], src)
			src = src[c:]
			off += c
			if off == len(ring) {
				off = 0
			}
		}
	}
	pad := int((inlHdrSize+total+segSize-1)&^(segSize-1) - (inlHdrSize + total))
	for ; pad > 0; pad-- {
		ring[off] = 0
		off++
		if off == len(ring) {
			off = 0
		}
	}
}

// checkRecv validates a receive WR for a queue whose WQEs hold maxSGE data
// segments.
func checkRecv(wr *provider.RecvWR, maxSGE uint32) error {
	if uint32(len(wr.SGL)) > maxSGE {
		return invalid("%d SGEs, the queue was created for at most %d", len(wr.SGL), maxSGE)
	}
	var total uint64
	for i := range wr.SGL {
		total += uint64(wr.SGL[i].Length)
	}
	if total > maxMessage {
		return invalid("the SGL describes %d bytes, more than the 2^31 a message may carry", total)
	}
	return nil
}

// buildRecv writes the scatter list of a receive WQE into w, which holds
// len(w)/16 data segments: one per non-empty SGE, then, if there is room,
// one with the invalid lkey (0x100) that ends the list.
func buildRecv(w []byte, sgl []provider.SGE) {
	n := 0
	for i := range sgl {
		if sgl[i].Length == 0 {
			continue
		}
		putDataSeg(w[n*dataSize:], sgl[i].Length, sgl[i].LKey, sgl[i].Addr)
		n++
	}
	if (n+1)*dataSize <= len(w) {
		putDataSeg(w[n*dataSize:], 0, invalidLKey, 0)
	}
}
