package uverbs

import "github.com/goverbs/goverbs/abi"

// AttachMulticast attaches a UD QP to the multicast group gid (and LID on
// InfiniBand; 0 on RoCE), so it receives the group's messages
// (ATTACH_MCAST, one syscall; ibv_attach_mcast).
func (qp *QP) AttachMulticast(gid [16]byte, lid uint16) (err error) {
	return qp.mcast("AttachMulticast", abi.IB_USER_VERBS_CMD_ATTACH_MCAST, gid, lid)
}

// DetachMulticast detaches the QP from the group (DETACH_MCAST;
// ibv_detach_mcast).
func (qp *QP) DetachMulticast(gid [16]byte, lid uint16) (err error) {
	return qp.mcast("DetachMulticast", abi.IB_USER_VERBS_CMD_DETACH_MCAST, gid, lid)
}

func (qp *QP) mcast(verb string, num uint32, gid [16]byte, lid uint16) (err error) {
	if sp := qp.pd.ctx.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if qp.init.Type != QPTypeUD {
		return argError(verb, qp.pd.ctx.dev.Name, "a %v QP cannot join multicast groups (UD only)", qp.init.Type)
	}
	req := abi.IbUverbsAttachMcast{Gid: gid, QpHandle: qp.handle, Mlid: lid}
	cmd := abi.Command{Num: num, In: abi.Bytes(&req)}
	return qp.pd.ctx.invoke(verb, &cmd)
}
