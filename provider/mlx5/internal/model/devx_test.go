package model

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider/mlx5/internal/ifc"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestDEVXKernelChecks: the DEVX answers uverbs never provokes, as Linux
// 6.1's devx.c and the ioctl framework give them. MLX5_IB_METHOD_DEVX_OTHER
// runs QUERY_HCA_CAP (and answers the general device capabilities; another
// capability type is the firmware's BAD_PARAM status, EREMOTEIO with the
// mailbox copied out) but refuses a command that is not general, QUERY_QP
// (EINVAL), and a CMD_IN or CMD_OUT shorter than a command header
// (EINVAL). MLX5_IB_METHOD_DEVX_OBJ_QUERY answers QUERY_QP of the QP its
// handle names (state RTS encoded as the QP context's 3), refuses one
// naming another QP's number or a command that is no query (EINVAL), and a
// handle naming nothing (ENOENT). A device without DEVX has neither object
// (EPROTONOSUPPORT).
func TestDEVXKernelChecks(t *testing.T) {
	r := openRaw(t, Options{DataInOrder: 1 << qptRC})
	cq, err := r.ctx.CreateCQ(4, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qcap := uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}
	qp, err := r.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: qcap})
	if err != nil {
		t.Fatal(err)
	}
	r.d.f.mu.Lock()
	q := r.d.qps[qp.QPN()]
	q.state = qpsRTS // what QUERY_QP reports, whatever the path there
	r.d.f.mu.Unlock()

	// The mailboxes live in user memory (QUERY_HCA_CAP's output is 4112
	// bytes): in at 0, out at 1024.
	m, err := mmap.Anonymous(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, out := m.Bytes()[0:64], m.Bytes()[1024:]
	inA := func(id uint16, n uint16) rawAttr { return rawAttr{id: id, len: n, data: uint64(m.Addr())} }
	outA := func(id uint16, n uint16) rawAttr { return rawAttr{id: id, len: n, data: uint64(m.Addr()) + 1024} }
	cmd := func(opcode uint32, field, bits int, v uint32) {
		clear(in)
		ifc.Set(in, ifc.InOpcodeOff, ifc.InOpcodeBits, opcode)
		ifc.Set(in, field, bits, v)
	}
	other := func(nin, nout uint16) error {
		return r.ioctl(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER,
			inA(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, nin), outA(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, nout))
	}
	query := func(handle uint32) error {
		return r.ioctl(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY,
			rawAttr{id: abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, data: uint64(handle)},
			inA(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, ifc.QueryQPInSize), outA(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT, ifc.QueryQPOutSize))
	}
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) && !(err == nil && want == nil) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}

	cmd(ifc.MLX5_CMD_OP_QUERY_HCA_CAP, ifc.QueryHCACapInOpModOff, ifc.QueryHCACapInOpModBits, ifc.HCA_CAP_OPMOD_GET_CUR)
	check("QUERY_HCA_CAP", other(ifc.QueryHCACapInSize, ifc.QueryHCACapOutSize), nil)
	if ifc.Get(out, ifc.QueryHCACapOutQPDataInOrderOff, 1) != 1 {
		t.Errorf("QUERY_HCA_CAP: no qp_data_in_order")
	}
	check("QUERY_HCA_CAP, CMD_IN of 8 bytes", other(8, ifc.QueryHCACapOutSize), unix.EINVAL)
	check("QUERY_HCA_CAP, CMD_OUT of 8 bytes", other(ifc.QueryHCACapInSize, 8), unix.EINVAL)
	cmd(ifc.MLX5_CMD_OP_QUERY_HCA_CAP, ifc.QueryHCACapInOpModOff, ifc.QueryHCACapInOpModBits, 2<<1|ifc.HCA_CAP_OPMOD_GET_CUR)
	check("QUERY_HCA_CAP of capability type 2", other(ifc.QueryHCACapInSize, ifc.QueryHCACapOutSize), unix.EREMOTEIO)
	if s := ifc.Get(out, ifc.OutStatusOff, ifc.OutStatusBits); s != fwStatusBadParam {
		t.Errorf("QUERY_HCA_CAP of capability type 2: status %#x in the copied mailbox, want %#x", s, fwStatusBadParam)
	}
	cmd(ifc.MLX5_CMD_OP_QUERY_QP, ifc.QueryQPInQPNOff, ifc.QueryQPInQPNBits, qp.QPN())
	check("QUERY_QP by DEVX_OTHER", other(ifc.QueryQPInSize, ifc.QueryQPOutSize), unix.EINVAL)

	check("QUERY_QP of the handle's QP", query(qp.Handle()), nil)
	if st, in := ifc.Get(out, ifc.QueryQPOutStateOff, ifc.QueryQPOutStateBits), ifc.Get(out, ifc.QueryQPOutDataInOrderOff, 1); st != 3 || in != 1 {
		t.Errorf("QUERY_QP: state %d, data_in_order %d; want 3 (RTS), 1", st, in)
	}
	check("QUERY_QP of a handle naming nothing", query(qp.Handle()+100), unix.ENOENT)
	cmd(ifc.MLX5_CMD_OP_QUERY_QP, ifc.QueryQPInQPNOff, ifc.QueryQPInQPNBits, qp.QPN()+1)
	check("QUERY_QP of another QP number", query(qp.Handle()), unix.EINVAL)
	cmd(ifc.MLX5_CMD_OP_QUERY_HCA_CAP, ifc.QueryHCACapInOpModOff, ifc.QueryHCACapInOpModBits, ifc.HCA_CAP_OPMOD_GET_CUR)
	check("QUERY_HCA_CAP by the object query", query(qp.Handle()), unix.EINVAL)

	x := openRaw(t, Options{RejectDEVX: true})
	cmd(ifc.MLX5_CMD_OP_QUERY_HCA_CAP, ifc.QueryHCACapInOpModOff, ifc.QueryHCACapInOpModBits, ifc.HCA_CAP_OPMOD_GET_CUR)
	err = x.ioctl(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER,
		inA(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, ifc.QueryHCACapInSize), outA(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, ifc.QueryHCACapOutSize))
	check("QUERY_HCA_CAP without DEVX", err, unix.EPROTONOSUPPORT)
}
