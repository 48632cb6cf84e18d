package mlx5

import (
	"github.com/goverbs/goverbs/abi"
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

func (q *qp) ECEVendorID() uint32 { return eceVendorID }
func (q *qp) ECESupported() bool  { return q.ctx.eceSupported() }
func (q *qp) ECE() uint32         { return q.ece }

func (q *qp) SetECE(options uint32) {
	q.setECE, q.ece = options, 0
}

func (q *qp) ModifyUdata() (in, out []byte) {
	if q.setECE == 0 {
		return nil, nil
	}
	q.eceIn = abi.Mlx5IbModifyQp{EceOptions: q.setECE}
	q.eceOut = abi.Mlx5IbModifyQpResp{}
	return abi.Bytes(&q.eceIn), abi.Bytes(&q.eceOut)
}

func (q *qp) ModifyDone(ok bool) {
	if ok && q.setECE != 0 {
		q.setECE, q.ece = 0, q.eceOut.EceOptions
	}
}
