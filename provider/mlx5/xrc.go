package mlx5

// XRC (eXtended Reliable Connected transport) on mlx5, as rdma-core's
// provider and the kernel's mlx5_ib driver lay it out:
//
//   - an XRC initiator QP (IBV_QPT_XRC_SEND) has a send ring only; each of
//     its send WQEs carries, right after the control segment, a 16-byte
//     XRC segment (struct mlx5_wqe_xrc_seg: the remote XRC SRQ number, big
//     endian, then 12 reserved bytes), then the RC segments (remote
//     address, atomic) and the data;
//   - an XRC target QP (IBV_QPT_XRC_RECV) is created by the kernel alone
//     (no driver data, no user rings: ib_create_qp without udata), so the
//     provider keeps only its ECE options (ece.go: tgtQP);
//   - an XRC SRQ is an SRQ like the basic one (the same ring and driver
//     data) that the kernel ties to an XRC domain and a CQ; a receive
//     through it completes on that CQ with the SRQ's user index in the
//     CQE's srqn_uidx (CQE version 1: rdma-core's get_resp_ctx_v1 finds an
//     MLX5_RSC_TYPE_XSRQ there) or, with CQE version 0, the SRQ number,
//     the QP number being the target QP's, which is no QP of the provider.

// xrcSegSize is struct mlx5_wqe_xrc_seg's size.
const xrcSegSize = 16

// putXRCSeg writes an XRC segment naming the remote XRC SRQ srqn.
func putXRCSeg(seg []byte, srqn uint32) {
	be.PutUint32(seg[0:], srqn)
	be.PutUint32(seg[4:], 0)
	be.PutUint64(seg[8:], 0)
}

// xrcSRQ finds the XRC SRQ a receive CQE of version 0 names by number,
// when its QP number is no QP of the context's (the XRC target's).
func (c *context) xrcSRQ(e []byte, opcode uint8) *rsc {
	if c.cqeVersion != 0 || !isResponder(opcode) {
		return nil
	}
	srqn := be.Uint32(e[cqeSrqnUidx:]) & 0xffffff
	if srqn == 0 {
		return nil
	}
	return c.xsrqs.get(srqn)
}

// registerXRC makes an XRC SRQ findable by number (CQE version 0).
func (s *srq) registerXRC() {
	if s.xrc && s.ctx.cqeVersion == 0 && s.srqn != 0 {
		s.ctx.xsrqs.set(s.srqn, &rsc{srq: s})
	}
}

// unregisterXRC undoes registerXRC.
func (s *srq) unregisterXRC() {
	if s.xrc && s.ctx.cqeVersion == 0 && s.srqn != 0 {
		s.ctx.xsrqs.set(s.srqn, nil)
	}
}
