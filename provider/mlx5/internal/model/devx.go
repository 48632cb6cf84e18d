package model

import (
	"math"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider/mlx5/internal/ifc"
	"golang.org/x/sys/unix"
)

// DEVX, the mlx5 driver's pass-through of firmware commands, as far as
// rdma-core's ibv_query_qp_data_in_order uses it, answered as Linux 6.1's
// mlx5_ib (devx.c) and the firmware (the PRM's QUERY_HCA_CAP and QUERY_QP,
// mlx5_ifc.h) do:
//
//   - a device without DEVX (log_max_uctx 0: Options.RejectDEVX, which
//     also refuses the ucontext's DEVX uid) has neither the DEVX nor the
//     DEVX_OBJ object: EPROTONOSUPPORT (UAPI_DEF_IS_OBJ_SUPPORTED);
//   - MLX5_IB_METHOD_DEVX_OTHER: CMD_IN and CMD_OUT mandatory, at least a
//     general command header each (16 bytes, else EINVAL); QUERY_HCA_CAP
//     runs with the context's DEVX uid or, without one, the device's
//     whitelist uid (devx_get_uid), any other command needs the context's
//     (EINVAL); only general commands pass (devx_is_general_cmd, EINVAL
//     otherwise: QUERY_QP is not one). The model's firmware knows
//     QUERY_HCA_CAP alone among them and refuses the rest as the kernel
//     refuses a command that is not general;
//   - MLX5_IB_METHOD_DEVX_OBJ_QUERY: the handle (any object) must name
//     one (ENOENT); the command needs the context's DEVX uid (EINVAL), must
//     be a query (devx_is_obj_query_cmd: EINVAL) and must name the object
//     the handle names (devx_is_valid_obj_id: a QP handle's QUERY_QP its
//     QP number, else EINVAL); the model's firmware answers QUERY_QP;
//   - the output is zeroed, then the firmware's mailbox copied into it up
//     to its length; a firmware status other than 0 is EREMOTEIO with the
//     mailbox copied out (mlx5_cmd_do, then uverbs_copy_to).
//
// The firmware: QUERY_HCA_CAP of the general device capabilities (op_mod
// 0 maximum, 1 current) answers qp_data_in_order when Options.DataInOrder
// is not 0; any other capability type is status BAD_PARAM. QUERY_QP
// answers the QP context's state and data_in_order (set for the QP types
// Options.DataInOrder names, in any state: rdma-core asks only in RTS).

const (
	fwStatusBadParam   = 0x3        // MLX5_CMD_STAT_BAD_PARAM_ERR
	fwSyndromeBadParam = 0x4a4b4c4d // the model's own: real syndromes are the firmware's
)

var devxOtherAttrs = []attrSpec{
	{id: abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, kind: attrPtrIn, min: ifc.GeneralObjInCmdHdrSize, max: math.MaxUint16, mandatory: true},
	{id: abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, kind: attrPtrOut, min: ifc.GeneralObjOutCmdHdrSize, max: math.MaxUint16, mandatory: true},
}

var devxObjQueryAttrs = []attrSpec{
	{id: abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, kind: attrIDR, isType: func(any) bool { return true }, mandatory: true},
	{id: abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, kind: attrPtrIn, min: ifc.GeneralObjInCmdHdrSize, max: math.MaxUint16, mandatory: true},
	{id: abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT, kind: attrPtrOut, min: ifc.GeneralObjOutCmdHdrSize, max: math.MaxUint16, mandatory: true},
}

// ioctlDEVXOther is MLX5_IB_METHOD_DEVX_OTHER.
func (u *ufile) ioctlDEVXOther(c *call) error {
	if u.d.o.RejectDEVX {
		return unix.EPROTONOSUPPORT
	}
	if err := u.checkAttrs(c, devxOtherAttrs); err != nil {
		return err
	}
	in, _ := c.in(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN)
	if ifc.Get(in, ifc.InOpcodeOff, ifc.InOpcodeBits) != ifc.MLX5_CMD_OP_QUERY_HCA_CAP {
		// Not a general command the model's firmware knows; without the
		// context's uid devx_get_uid's EINVAL would come first.
		return unix.EINVAL
	}
	out, _ := c.out(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT)
	return fwAnswer(out, u.d.queryHCACap(in))
}

// ioctlDEVXObjQuery is MLX5_IB_METHOD_DEVX_OBJ_QUERY.
func (u *ufile) ioctlDEVXObjQuery(c *call) error {
	if u.d.o.RejectDEVX {
		return unix.EPROTONOSUPPORT
	}
	if err := u.checkAttrs(c, devxObjQueryAttrs); err != nil {
		return err
	}
	in, _ := c.in(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN)
	if !u.ctx.devx {
		return unix.EINVAL // devx_get_uid: a query is no whitelisted command
	}
	if ifc.Get(in, ifc.InOpcodeOff, ifc.InOpcodeBits) != ifc.MLX5_CMD_OP_QUERY_QP {
		// Of devx_is_obj_query_cmd's commands the model knows QUERY_QP
		// only; every other command is no query.
		return unix.EINVAL
	}
	q, ok := u.ctx.qpOf(handleOf(c, abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE))
	if !ok || ifc.Get(in, ifc.QueryQPInQPNOff, ifc.QueryQPInQPNBits) != q.qpn {
		return unix.EINVAL // devx_is_valid_obj_id
	}
	out, _ := c.out(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT)
	return fwAnswer(out, u.d.queryQP(q))
}

// fwAnswer copies the firmware's mailbox into the caller's output, as
// much as fits, over zeroes; a status other than 0 is EREMOTEIO.
func fwAnswer(out, mbox []byte) error {
	clear(out)
	copy(out, mbox)
	if ifc.Get(mbox, ifc.OutStatusOff, ifc.OutStatusBits) != 0 {
		return unix.EREMOTEIO
	}
	return nil
}

// queryHCACap is the firmware's QUERY_HCA_CAP.
func (d *Device) queryHCACap(in []byte) []byte {
	out := make([]byte, ifc.QueryHCACapOutSize)
	opMod := ifc.Get(in, ifc.QueryHCACapInOpModOff, ifc.QueryHCACapInOpModBits)
	if opMod>>1 != ifc.MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE>>1 {
		ifc.Set(out, ifc.OutStatusOff, ifc.OutStatusBits, fwStatusBadParam)
		ifc.Set(out, ifc.OutSyndromeOff, ifc.OutSyndromeBits, fwSyndromeBadParam)
		return out
	}
	if d.o.DataInOrder != 0 {
		ifc.Set(out, ifc.QueryHCACapOutQPDataInOrderOff, ifc.QueryHCACapOutQPDataInOrderBits, 1)
	}
	return out
}

// mlx5State is the QP context's state encoding (enum mlx5_qp_state) of an
// IB QP state.
var mlx5State = [...]uint32{qpsReset: 0, qpsInit: 1, qpsRTR: 2, qpsRTS: 3, qpsSQD: 5, qpsSQE: 4, qpsErr: 6}

// queryQP is the firmware's QUERY_QP.
func (d *Device) queryQP(q *mqp) []byte {
	out := make([]byte, ifc.QueryQPOutSize)
	ifc.Set(out, ifc.QueryQPOutStateOff, ifc.QueryQPOutStateBits, mlx5State[q.state])
	if d.o.DataInOrder&(1<<q.typ) != 0 {
		ifc.Set(out, ifc.QueryQPOutDataInOrderOff, ifc.QueryQPOutDataInOrderBits, 1)
	}
	return out
}
