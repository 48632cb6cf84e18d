package model

func (f *Fabric) route(global bool, dgid [16]byte, dlid uint16) *Device {
	for _, dv := range f.devs {
		if global {
			for _, g := range dv.gids {
				if g == dgid {
					return dv
				}
			}
		} else if dv.lid == dlid {
			return dv
		}
	}
	return nil
}

// peer is the connected QP a RC or UC QP's packets reach, if any: routed
// by the QP's address, of the same type, able to receive, and connected
// back to q.
func (d *Device) peer(q *mqp) *mqp {
	dv := d.f.route(q.av.global, q.av.dgid, q.av.dlid)
	if dv == nil {
		return nil
	}
	p := dv.qps[q.destQPN]
	if p == nil || p.typ != peerType(q.typ) || p.destQPN != q.qpn || p.state != qpsRTR && p.state != qpsRTS && p.state != qpsSQD {
		return nil
	}
	return p
}

// responderError moves an RC responder to the error state after a
// protocol error it detected (the IBTA's class C errors).
func (d *Device) responderError(p *mqp, ev uint32) {
	if p.typ != qptRC {
		return
	}
	p.events++
	d.asyncEvent(p.ctx, p.userHandle, ev)
	p.dev().toError(p)
}

// execute carries out one WQE of q; its effects on the responder (data,
// receive CQEs) happen here, synchronously.
func (d *Device) execute(q *mqp, w *wqe) result {
	if w.opcode == opUMR { // local: a memory window bind or invalidation
		return result{syndrome: d.executeUMR(q, w)}
	}
	rc := q.typ == qptRC || q.typ == qptXRCIni
	var data []byte
	switch w.opcode {
	case opSend, opSendImm, opSendInv, opWrite, opWriteImm:
		var ok bool
		if data, ok = d.gather(q, w); !ok {
			return result{syndrome: synLocalProt}
		}
	}
	if q.typ == qptUD {
		d.sendUD(q, w, data)
		return result{}
	}
	p := d.peer(q)
	if p == nil {
		if rc {
			return result{lost: true} // retransmitted until RetryCnt runs out
		}
		return result{} // UC: the packets are lost
	}
	if q.typ == qptXRCIni {
		if p = xrcResponder(p, w.xrcSRQN); p == nil {
			return result{syndrome: synRemoteInvReq} // no XRC SRQ of the target's domain by that number
		}
	}
	pd := p.dev()
	switch w.opcode {
	case opSend, opSendImm, opSendInv:
		r, ok := pd.takeRecv(p)
		if !ok {
			if rc {
				return result{rnr: true}
			}
			return result{}
		}
		if syn := pd.scatter(p, r.sges, 0, nil, data); syn != 0 {
			pd.respErr(p, r, syn)
			pd.responderError(p, evQPAccessErr)
			if !rc {
				return result{}
			}
			if syn == synLocalLen {
				return result{syndrome: synRemoteInvReq}
			}
			return result{syndrome: synRemoteOp}
		}
		if w.opcode == opSendInv && !pd.remoteInvalidate(p, w.imm) {
			// Not a window of the responder's that it may invalidate: an
			// invalid request (the receive completes in error).
			pd.respErr(p, r, synLocalQPOp)
			pd.responderError(p, evQPReqErr)
			return result{syndrome: synRemoteInvReq}
		}
		op := uint8(cqeRespSend)
		switch w.opcode {
		case opSendImm:
			op = cqeRespSendIm
		case opSendInv:
			op = cqeRespSendIv
		}
		pd.respCQE(p, r, op, uint32(len(data)), w.imm, q, false, w.solicited(), q.av.sl)
		return result{}
	case opWrite, opWriteImm:
		mem, ok := pd.remote(p, w.rkey, w.raddr, uint32(len(data)), accRemoteWrite)
		if !ok {
			if !rc {
				return result{}
			}
			pd.responderError(p, evQPAccessErr)
			return result{syndrome: synRemoteAccess}
		}
		var r *recvSlot
		if w.opcode == opWriteImm {
			if r, ok = pd.takeRecv(p); !ok {
				if rc {
					return result{rnr: true}
				}
				return result{}
			}
		}
		copy(mem, data)
		if r != nil {
			pd.respCQE(p, r, cqeRespWrImm, uint32(len(data)), w.imm, q, false, w.solicited(), q.av.sl)
		}
		return result{}
	case opRead:
		var n uint32
		for _, s := range w.sges {
			n += s.n
		}
		mem, ok := pd.remote(p, w.rkey, w.raddr, n, accRemoteRead)
		if !ok {
			pd.responderError(p, evQPAccessErr)
			return result{syndrome: synRemoteAccess}
		}
		src := append([]byte(nil), mem...)
		pos := uint32(0)
		for _, s := range w.sges {
			b, ok := d.local(q, s.lkey, s.addr, s.n, true)
			if !ok {
				return result{syndrome: synLocalProt}
			}
			copy(b, src[pos:pos+s.n])
			pos += s.n
		}
		return result{n: n}
	case opCS, opFA:
		if w.raddr%8 != 0 || len(w.sges) != 1 || w.sges[0].n != 8 {
			return result{syndrome: synRemoteInvReq}
		}
		mem, ok := pd.remote(p, w.rkey, w.raddr, 8, accRemoteAtomic)
		if !ok {
			pd.responderError(p, evQPAccessErr)
			return result{syndrome: synRemoteAccess}
		}
		dst, ok := d.local(q, w.sges[0].lkey, w.sges[0].addr, 8, true)
		if !ok {
			return result{syndrome: synLocalProt}
		}
		old := ne.Uint64(mem)
		if w.opcode == opCS {
			if old == w.compare {
				ne.PutUint64(mem, w.swapAdd)
			}
		} else {
			ne.PutUint64(mem, old+w.swapAdd)
		}
		ne.PutUint64(dst, old)
		return result{n: 8}
	}
	return result{syndrome: synLocalQPOp}
}

// grhLen is the size of the GRH a UD receive buffer starts with.
const grhLen = 40

// sendUD delivers a UD datagram: routed by the WQE's address vector, to a
// UD QP with the right Q_Key; lost (with no error) otherwise.
func (d *Device) sendUD(q *mqp, w *wqe, data []byte) {
	dv := d.f.route(w.av.grh, w.av.rgid, w.av.rlid)
	if dv == nil {
		return
	}
	p := dv.qps[w.av.dqpn]
	if p == nil || p.typ != qptUD || p.state != qpsRTR && p.state != qpsRTS && p.state != qpsSQD {
		return
	}
	qkey := w.av.qkey
	if qkey&0x80000000 != 0 {
		qkey = q.qkey
	}
	if qkey != p.qkey || len(data) > 4096 {
		return
	}
	r, ok := dv.takeRecv(p)
	if !ok {
		return
	}
	var grh []byte
	skip := grhLen
	if w.av.grh {
		grh = make([]byte, grhLen)
		be.PutUint32(grh[0:], 6<<28|uint32(w.av.tclass)<<20|w.av.flow)
		be.PutUint16(grh[4:], uint16(len(data)))
		grh[6], grh[7] = 0x1b, w.av.hopLimit
		copy(grh[8:24], d.gids[w.av.sgid%uint8(len(d.gids))][:])
		copy(grh[24:40], w.av.rgid[:])
		skip = 0
	}
	if syn := dv.scatter(p, r.sges, skip, grh, data); syn != 0 {
		dv.respErr(p, r, syn)
		return
	}
	n := uint32(len(data))
	if w.av.grh {
		n += grhLen
	}
	op := uint8(cqeRespSend)
	if w.opcode == opSendImm {
		op = cqeRespSendIm
	}
	dv.respCQE(p, r, op, n, w.imm, q, w.av.grh, w.solicited(), w.av.sl)
}
