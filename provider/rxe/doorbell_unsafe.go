package rxe

import (
	"encoding/binary"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
)

// postSendCmdSize is a legacy POST_SEND with no work requests: the 8-byte
// command header and struct ib_uverbs_post_send.
const postSendCmdSize = 8 + int(unsafe.Sizeof(abi.IbUverbsPostSend{}))

// sendWRSize is sizeof(struct ib_uverbs_send_wr): the smallest wqe_size the
// kernel accepts, even for an empty list.
const sendWRSize = int(unsafe.Sizeof(abi.IbUverbsSendWr{}))

// doorbell is rxe's send doorbell: a write() of POST_SEND with no work
// requests, which makes the kernel run the QP's requester on what the send
// queue holds. It is built once per QP; ringing it allocates nothing. It
// lives on the Go heap (never on a goroutine stack, which moves), so the
// response address written into cmd stays valid for the QP's life.
type doorbell struct {
	cmd  [postSendCmdSize]byte
	resp [8]byte // struct ib_uverbs_post_send_resp {bad_wr} (4 bytes)
}

// newDoorbell builds the command for the QP with the given handle.
//
//go:noinline
func newDoorbell(qpHandle uint32) *doorbell {
	d := new(doorbell)
	ne := binary.NativeEndian
	ne.PutUint32(d.cmd[0:], abi.IB_USER_VERBS_CMD_POST_SEND)
	ne.PutUint16(d.cmd[4:], uint16(postSendCmdSize/4))                           // in_words, header included
	ne.PutUint16(d.cmd[6:], uint16(unsafe.Sizeof(abi.IbUverbsPostSendResp{})/4)) // out_words
	ne.PutUint64(d.cmd[8:], uint64(uintptr(unsafe.Pointer(&d.resp))))            // response
	ne.PutUint32(d.cmd[16:], qpHandle)                                           // qp_handle
	// wr_count and sge_count stay 0.
	ne.PutUint32(d.cmd[28:], uint32(sendWRSize)) // wqe_size
	return d
}
