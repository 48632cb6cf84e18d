package model

import (
	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// ECE as the kernel's mlx5_ib passes it (qp.c, 6.1): CREATE_QP's driver
// data ece_options goes to the firmware's create_qp_in.ece on a device
// with ece_support, and create_qp_out.ece comes back in the response; the
// extended MODIFY_QP's driver data (struct mlx5_ib_modify_qp) must reach
// past ece_options (EINVAL), have no comp_mask (EOPNOTSUPP), and its
// response (struct mlx5_ib_modify_qp_resp: response_length, dctn,
// ece_options) carries the firmware's answer, written when the caller's
// buffer holds it. The firmware's answer is Options.ECE's rule.

// eceAnswer is the firmware's answer to options on this device.
func (d *Device) eceAnswer(options uint32) uint32 {
	return options & d.o.ECE
}

// modifyUcmd checks MODIFY_QP's driver data as mlx5_ib_modify_qp does.
func modifyUcmd(din []byte) (abi.Mlx5IbModifyQp, error) {
	var ucmd abi.Mlx5IbModifyQp
	if len(din) == 0 {
		return ucmd, nil
	}
	end := len(abi.Bytes(&ucmd)) // offsetofend(ece_options): its last field
	if len(din) < end {
		return ucmd, unix.EINVAL
	}
	for _, b := range din[min(len(din), len(abi.Bytes(&ucmd))):] {
		if b != 0 {
			return ucmd, unix.EOPNOTSUPP
		}
	}
	copy(abi.Bytes(&ucmd), din)
	if ucmd.CompMask != 0 {
		return ucmd, unix.EOPNOTSUPP
	}
	return ucmd, nil
}

// modifyECE answers a MODIFY_QP's options after the transition from prev
// to the QP's state. RESET to RESET runs no firmware command and writes no
// response (mlx5_ib_modify_qp returns early); a firmware command carries
// the options, and answers them, only for RST2INIT, INIT2INIT, INIT2RTR,
// RTR2RTS and RTS2RTS (qpc.c: modify_qp_mbox_alloc, get_ece_from_mbox):
// any other transition (to ERR, to RESET, to SQD) answers 0.
func (u *ufile) modifyECE(h uint32, prev uint8, options uint32, dout []byte) {
	q, ok := u.ctx.qpOf(h)
	if !ok || prev == qpsReset && q.state == qpsReset {
		return
	}
	switch [2]uint8{prev, q.state} {
	case [2]uint8{qpsReset, qpsInit}, [2]uint8{qpsInit, qpsInit}, [2]uint8{qpsInit, qpsRTR},
		[2]uint8{qpsRTR, qpsRTS}, [2]uint8{qpsRTS, qpsRTS}:
		q.ece = u.d.eceAnswer(options)
	default:
		q.ece = 0
	}
	r := abi.Mlx5IbModifyQpResp{EceOptions: q.ece}
	r.ResponseLength = uint32(len(abi.Bytes(&r)))
	if len(dout) >= int(r.ResponseLength) {
		copy(dout, abi.Bytes(&r))
	}
}
