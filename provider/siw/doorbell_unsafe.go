package siw

import (
	"encoding/binary"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
)

// postSendCmdSize is a legacy POST_SEND with no work requests: the 8-byte
// command header and struct ib_uverbs_post_send.
const postSendCmdSize = 8 + int(unsafe.Sizeof(abi.IbUverbsPostSend{}))

// sendWRSize is sizeof(struct ib_uverbs_send_wr): the smallest wqe_size
// the uverbs core accepts, even for an empty list.
const sendWRSize = int(unsafe.Sizeof(abi.IbUverbsSendWr{}))

// doorbell is siw's send doorbell: a write() of POST_SEND with no work
// requests (siw_post_send refuses work requests for a QP whose send queue
// is mapped), which makes the kernel start processing the send queue if
// it is idle. Built once per QP on the Go heap (the response address in
// cmd must stay valid); ringing it allocates nothing.
type doorbell struct {
	cmd  [postSendCmdSize]byte
	resp [8]byte // struct ib_uverbs_post_send_resp {bad_wr}
}

//go:noinline
func newDoorbell(qpHandle uint32) *doorbell {
	d := new(doorbell)
	ne := binary.NativeEndian
	ne.PutUint32(d.cmd[0:], abi.IB_USER_VERBS_CMD_POST_SEND)
	ne.PutUint16(d.cmd[4:], uint16(postSendCmdSize/4))
	ne.PutUint16(d.cmd[6:], uint16(unsafe.Sizeof(abi.IbUverbsPostSendResp{})/4))
	ne.PutUint64(d.cmd[8:], uint64(uintptr(unsafe.Pointer(&d.resp))))
	ne.PutUint32(d.cmd[16:], qpHandle)
	ne.PutUint32(d.cmd[28:], uint32(sendWRSize)) // wqe_size; wr_count and sge_count stay 0
	return d
}
