package mlx5

import (
	"errors"
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/mlx5/internal/ifc"
	"golang.org/x/sys/unix"
)

// Whether an operation's data lands in order (ibv_query_qp_data_in_order),
// as rdma-core's mlx5 answers it (verbs.c: mlx5_query_qp_data_in_order,
// get_hca_general_caps) through DEVX firmware commands:
//   - the device can say so only if its general capabilities
//     (QUERY_HCA_CAP, op_mod general device | current) have
//     qp_data_in_order; rdma-core reads them when the context opens by the
//     DEVX general command (MLX5_IB_OBJECT_DEVX,
//     MLX5_IB_METHOD_DEVX_OTHER), goverbs at the first query, once per
//     context (opening a context costs no command more);
//   - a QP not in RTS answers 0 without a command (rdma-core reads the
//     state libibverbs last saw: Modify's, as here);
//   - otherwise QUERY_QP by the DEVX object query on the QP's handle
//     (MLX5_IB_OBJECT_DEVX_OBJ, MLX5_IB_METHOD_DEVX_OBJ_QUERY), and the QP
//     context's data_in_order bit is the answer: the whole message in
//     order.
//
// The kernel (devx.c, Linux 6.1) takes QUERY_HCA_CAP with the context's
// DEVX uid or the device's whitelist uid, QUERY_QP only with the context's
// (EINVAL without), a QUERY_QP only for the QP the handle names (EINVAL),
// and answers EREMOTEIO with the mailbox copied out when the firmware's
// status is not 0; a device without DEVX has no such objects
// (EPROTONOSUPPORT). rdma-core answers 0 for any failure; so does goverbs,
// with the error.

// inOrderCap is the device's qp_data_in_order capability, read once.
type inOrderCap struct {
	once sync.Once
	has  bool
	err  error
}

// devxCmd runs one DEVX firmware command: by the general command when
// handle is 0, else by the object query on that QP handle. out is the
// firmware's mailbox, copied out also when the firmware refused
// (EREMOTEIO), which the error then names by status and syndrome.
func (c *context) devxCmd(name string, handle uint32, in []byte, outLen int) ([]byte, error) {
	var b *abi.Ioctl
	var outA abi.Attr
	if handle == 0 {
		b = abi.NewIoctl(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER)
		b.PtrIn(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, in)
		outA = b.PtrOutLen(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, outLen)
	} else {
		b = abi.NewIoctl(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY)
		b.Handle(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, handle)
		b.PtrIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, in)
		outA = b.PtrOutLen(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT, outLen)
	}
	defer b.Release()
	err := c.f.Ioctl(b)
	out := append([]byte(nil), b.Output(outA)...)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, unix.EREMOTEIO) && len(out) >= ifc.GeneralObjOutCmdHdrSize:
		return nil, fmt.Errorf("mlx5: %s: the firmware answered status %#x, syndrome %#x: %w", name,
			ifc.Get(out, ifc.OutStatusOff, ifc.OutStatusBits), ifc.Get(out, ifc.OutSyndromeOff, ifc.OutSyndromeBits), err)
	case abi.IsNoIoctl(err) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP):
		// No DEVX objects (a device or kernel without DEVX), or no uid
		// to run the command with.
		return nil, fmt.Errorf("mlx5: %s by DEVX: %w: %w", name, provider.ErrNotSupported, err)
	}
	return nil, fmt.Errorf("mlx5: %s by DEVX: %w", name, err)
}

// inOrderCapable reads the device's qp_data_in_order capability once.
func (c *context) inOrderCapable() (bool, error) {
	p := &c.inOrder
	p.once.Do(func() {
		in := make([]byte, ifc.QueryHCACapInSize)
		ifc.Set(in, ifc.InOpcodeOff, ifc.InOpcodeBits, ifc.MLX5_CMD_OP_QUERY_HCA_CAP)
		ifc.Set(in, ifc.QueryHCACapInOpModOff, ifc.QueryHCACapInOpModBits,
			ifc.MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE|ifc.HCA_CAP_OPMOD_GET_CUR)
		out, err := c.devxCmd("QUERY_HCA_CAP", 0, in, ifc.QueryHCACapOutSize)
		if err != nil {
			p.err = err
			return
		}
		p.has = ifc.Get(out, ifc.QueryHCACapOutQPDataInOrderOff, ifc.QueryHCACapOutQPDataInOrderBits) != 0
	})
	return p.has, p.err
}

// dataInOrder answers for the QP of kernel handle handle, number qpn, in
// state st: whether its whole messages' data land in order.
func (c *context) dataInOrder(handle, qpn uint32, st provider.QPState) (bool, error) {
	has, err := c.inOrderCapable()
	if err != nil || !has {
		return false, err
	}
	if st != provider.QPStateRTS {
		return false, nil
	}
	in := make([]byte, ifc.QueryQPInSize)
	ifc.Set(in, ifc.InOpcodeOff, ifc.InOpcodeBits, ifc.MLX5_CMD_OP_QUERY_QP)
	ifc.Set(in, ifc.QueryQPInQPNOff, ifc.QueryQPInQPNBits, qpn)
	out, err := c.devxCmd("QUERY_QP", handle, in, ifc.QueryQPOutSize)
	if err != nil {
		return false, err
	}
	return ifc.Get(out, ifc.QueryQPOutDataInOrderOff, ifc.QueryQPOutDataInOrderBits) != 0, nil
}

func (q *qp) DataInOrder(handle uint32) (bool, error) {
	return q.ctx.dataInOrder(handle, q.qpn, provider.QPState(q.state.Load()))
}

func (t *tgtQP) DataInOrder(handle uint32) (bool, error) {
	return t.ctx.dataInOrder(handle, t.qpn, provider.QPState(t.state.Load()))
}
