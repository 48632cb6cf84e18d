package mlx5

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/internal/usermem"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var be = binary.BigEndian

// sqShape is what validating a send WR needs to know about its queue.
type sqShape struct {
	caps   provider.SendQueueCaps // as created: type, MaxSendSGE, MaxInlineData
	typ    provider.QPType
	maxBBs uint32   // the largest WQE the queue was sized for, in WQEBBs
	mws    *mwTable // the context's memory windows (binds need their type)
	// The plain WRs' opcodes (1<<op, without and with INLINE) and inline
	// bytes (SENDs', RDMA WRITEs'): setPlain.
	plain, plainInline      uint32
	inlineSend, inlineWrite uint32
}

// checkSend runs the common checks, then plans the WQE: what PostSend does
// for each WR (written out there, into its plans).
func checkSend(s *sqShape, wr *provider.SendWR) (p sendPlan, err error) {
	if err = provider.CheckSend(&s.caps, wr); err == nil {
		err = planSend(s, wr, &p)
	}
	return p, err
}

// sendPlan is what validation found out about one send WR: everything the
// builder needs besides the WR itself.
type sendPlan struct {
	ah     *ah    // UD destination
	bytes  uint32 // inline data length
	ds     uint32 // WQE size in 16-byte units
	bbs    uint32 // WQE size in WQEBBs
	opcode uint8  // MLX5_OPCODE_*
	inline bool   // data copied into the WQE
	type1  bool   // BIND_MW of a type 1 window
	xrc    bool   // an XRC initiator's: the XRC segment follows the control segment
	// fence is the initiator small fence a WQE after a UMR carries
	// (rdma-core's fm_cache), unless its own FENCE flag asks for more.
	fence uint8
}

// invalid is an EINVAL with a reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", unix.EINVAL, fmt.Sprintf(format, args...))
}

// notSupported is a provider.ErrNotSupported with a reason.
func notSupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", provider.ErrNotSupported, fmt.Sprintf(format, args...))
}

// planSend works out the WQE of wr, which provider.CheckSend accepted for
// a queue of shape s, into p, and refuses what only mlx5 cannot carry (a
// window longer than 2 GiB, an address handle of another provider, a WQE
// larger than the queue was sized for). It reads only the WR (not the
// memory its SGEs point to) and allocates nothing unless it fails.
func planSend(s *sqShape, wr *provider.SendWR, p *sendPlan) error {
	*p = sendPlan{}
	hdr := uint32(ctrlSize)
	switch wr.Opcode {
	case provider.WRSend:
		p.opcode = opSend
	case provider.WRSendWithImm:
		p.opcode = opSendImm
	case provider.WRSendWithInv:
		p.opcode = opSendInval
	case provider.WRRDMAWrite:
		p.opcode, hdr = opRDMAWrite, hdr+raddrSize
	case provider.WRRDMAWriteWithImm:
		p.opcode, hdr = opRDMAWriteIm, hdr+raddrSize
	case provider.WRRDMARead:
		p.opcode, hdr = opRDMARead, hdr+raddrSize
	case provider.WRAtomicCmpAndSwp:
		p.opcode, hdr = opAtomicCS, hdr+raddrSize+atomicSize
	case provider.WRAtomicFetchAndAdd:
		p.opcode, hdr = opAtomicFA, hdr+raddrSize+atomicSize
	case provider.WRLocalInv, provider.WRBindMW:
		return planUMR(s, wr, p)
	default:
		return invalid("unknown opcode %d", uint8(wr.Opcode))
	}
	if s.typ == provider.QPTypeXRCIni {
		p.xrc, hdr = true, hdr+xrcSegSize
	}
	if s.typ == provider.QPTypeUD {
		a, ok := wr.UD.AH.ProviderAH().(*ah)
		if !ok || a == nil {
			return invalid("the address handle was not created on an mlx5 device")
		}
		p.ah = a
		hdr += avSize
	}
	data := uint32(0)
	p.inline = wr.Flags&provider.SendInline != 0
	switch {
	case p.opcode == opAtomicCS || p.opcode == opAtomicFA:
		data = dataSize // the one 8-byte SGE CheckSend requires
	case p.inline:
		for i := range wr.SGL { // at most MaxInline bytes (CheckSend)
			p.bytes += wr.SGL[i].Length
		}
		if p.bytes > 0 {
			data = (inlHdrSize + p.bytes + segSize - 1) &^ (segSize - 1)
		}
	default:
		for i := range wr.SGL {
			if wr.SGL[i].Length != 0 { // a zero byte_count would mean 2 GiB to the device
				data += dataSize
			}
		}
	}
	size := hdr + data
	p.ds = size / segSize
	p.bbs = (size + wqeBB - 1) / wqeBB
	if p.bbs > s.maxBBs {
		return invalid("the WQE needs %d bytes, the queue was sized for %d", size, s.maxBBs*wqeBB)
	}
	return nil
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
	} else {
		fm |= p.fence
	}
	ctrl[ctrlFmCeSe] = fm
	var imm uint32
	switch {
	case p.opcode == opSendImm || p.opcode == opRDMAWriteIm:
		imm = wr.Imm
	case p.opcode == opSendInval || wr.Opcode == provider.WRLocalInv:
		imm = wr.InvalidateRKey
	case wr.Opcode == provider.WRBindMW:
		imm = wr.Bind.MWRKey // the mkey the UMR rewrites
	}
	be.PutUint32(ctrl[ctrlImm:], imm)
	if p.opcode == opUMR {
		buildUMR(&w, qpn, wr, p)
		return
	}

	if p.xrc {
		putXRCSeg(w.seg(), wr.RemoteSRQN)
	}
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
		src := usermem.Bytes(sgl[i].Addr, int(n))
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
