package mlx5

import (
	"fmt"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// ECE (enhanced connection establishment) on mlx5, as rdma-core's mlx5
// provider and the kernel's mlx5_ib have it:
//   - the device takes options if the ucontext response says so
//     (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE, set when the firmware has
//     ece_support);
//   - CREATE_QP's driver data carries ece_options 0x10000000 (ECE version
//     1, the trigger rdma-core sends) on such a device, and the response's
//     ece_options is the firmware's answer;
//   - options set on a QP go in the next MODIFY_QP's driver data (struct
//     mlx5_ib_modify_qp's ece_options, by the extended command), and that
//     response's ece_options (struct mlx5_ib_modify_qp_resp) is the new
//     answer; setting options clears the last answer;
//   - the options belong to vendor 0x15b3 (PCI_VENDOR_ID_MELLANOX).

// eceVendorID is PCI_VENDOR_ID_MELLANOX.
const eceVendorID = 0x15b3

// eceTrigger is the ece_options CREATE_QP carries on a device with ECE.
const eceTrigger = 0x10000000

func (c *context) eceSupported() bool {
	return c.resp.CompMask&abi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE != 0
}

// eceState is a QP's ECE: the options the device answered last, those
// queued for the next MODIFY_QP, and that command's driver data (kept here
// so the kernel writes into memory that outlives the call's frame).
type eceState struct {
	ece, setECE uint32
	eceIn       abi.Mlx5IbModifyQp
	eceOut      abi.Mlx5IbModifyQpResp
}

func (e *eceState) ECEVendorID() uint32 { return eceVendorID }
func (e *eceState) ECE() uint32         { return e.ece }

func (e *eceState) SetECE(options uint32) {
	e.setECE, e.ece = options, 0
}

func (e *eceState) ModifyUdata() (in, out []byte) {
	if e.setECE == 0 {
		return nil, nil
	}
	e.eceIn = abi.Mlx5IbModifyQp{EceOptions: e.setECE}
	e.eceOut = abi.Mlx5IbModifyQpResp{}
	return abi.Bytes(&e.eceIn), abi.Bytes(&e.eceOut)
}

func (e *eceState) ModifyDone(ok bool) {
	if ok && e.setECE != 0 {
		e.setECE, e.ece = 0, e.eceOut.EceOptions
	}
}

func (q *qp) ECESupported() bool { return q.ctx.eceSupported() }

// XRC target QPs (IBV_QPT_XRC_RECV) and ECE, as rdma-core's mlx5 and Linux
// 6.1's mlx5_ib have them:
//   - the kernel creates a target without the caller's driver data
//     (ib_create_qp_user passes no udata for IB_QPT_XRC_TGT), so the ECE
//     trigger rdma-core puts in it never reaches the firmware
//     (create_xrc_tgt_qp sets no create_qp_in.ece) and no driver response
//     is written: rdma-core's zeroed response makes the first answer 0,
//     whatever the device's ece_support;
//   - ibv_set_ece on a target is accepted as on any QP (mlx5_set_ece
//     checks the vendor and ece_support only), and its next MODIFY_QP
//     carries the options: the kernel modifies the real QP with the
//     caller's udata (ib_modify_qp_with_udata), so mlx5_ib_modify_qp
//     passes them to the firmware and returns its answer as for an RC QP;
//   - a target opened by ibv_open_qp is a fresh mlx5 QP of rdma-core's
//     (answer 0), whose options reach the same QP through its handle.

// tgtQP is the provider side of an XRC target QP: no queues, only ECE.
type tgtQP struct {
	ctx   *context
	qpn   uint32
	state atomic.Uint32 // provider.QPState, for DataInOrder
	eceState
}

// TargetQP gives uverbs the provider side of the XRC target QP qpn.
func (c *context) TargetQP(qpn uint32) provider.QP { return &tgtQP{ctx: c, qpn: qpn} }

var errTargetPost = fmt.Errorf("%w: an XRC target QP has no queues (receives go to the XRC SRQ the sender names)", provider.ErrNotSupported)

func (t *tgtQP) PostSend(wrs []provider.SendWR) (int, error) {
	return 0, &provider.WRError{Provider: "mlx5", Verb: "PostSend", Err: errTargetPost}
}
func (t *tgtQP) PostRecv(wrs []provider.RecvWR) (int, error) {
	return 0, &provider.WRError{Provider: "mlx5", Verb: "PostRecv", Err: errTargetPost}
}
func (t *tgtQP) Modified(st provider.QPState) { t.state.Store(uint32(st)) }
func (t *tgtQP) Close() error                 { return nil }
func (t *tgtQP) ECESupported() bool           { return t.ctx.eceSupported() }
