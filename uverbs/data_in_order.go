package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
)

// DataInOrderFlags says what QueryDataInOrder answers (enum
// ibv_query_qp_data_in_order_flags).
type DataInOrderFlags uint32

// QueryDataInOrder flags.
const (
	// DataInOrderReturnCaps asks for the capability bits rather than
	// whether whole messages land in order.
	DataInOrderReturnCaps DataInOrderFlags = 1 << 0 // IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS
	// DataInOrderDeviceOnly asks about the device alone, whatever the
	// host CPU's memory ordering.
	DataInOrderDeviceOnly DataInOrderFlags = 1 << 1 // IBV_QUERY_QP_DATA_IN_ORDER_DEVICE_ONLY
)

// DataInOrderCaps is what the device guarantees about the order in which
// an operation's data lands in memory (enum
// ibv_query_qp_data_in_order_caps).
type DataInOrderCaps uint32

// Data-in-order capabilities.
const (
	// DataInOrderWholeMsg: the whole message's data is written in order
	// (a poller may read it as it lands).
	DataInOrderWholeMsg DataInOrderCaps = 1 << 0 // IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG
	// DataInOrderAligned128: each 128-byte aligned block is written in
	// order (implied by DataInOrderWholeMsg).
	DataInOrderAligned128 DataInOrderCaps = 1 << 1 // IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES
)

// QueryDataInOrder asks whether the data of operation op on the QP lands
// in memory in order (ibv_query_qp_data_in_order): with
// DataInOrderReturnCaps the capability bits, otherwise DataInOrderWholeMsg
// or 0.
//
// The kernel has no uverbs method for it (Linux 5.10 to 7.x): a provider
// asks its device directly, and libibverbs answers 0, "no guarantee", for
// one that cannot. None of goverbs' providers can: rxe and siw have no
// such query (libibverbs' default), and mlx5 answers it with a DEVX
// QUERY_QP firmware command that goverbs does not send. So the answer is 0
// (no guarantee: safe to act on) with an error for which
// errors.Is(err, ErrNotSupported) holds, naming why; no syscall. Unknown
// flags are EINVAL.
func (qp *QP) QueryDataInOrder(op WROpcode, flags DataInOrderFlags) (DataInOrderCaps, error) {
	const verb = "QueryDataInOrder"
	c := qp.pd.ctx
	dev := c.dev.Name
	if err := qp.use(verb, dev); err != nil {
		return 0, err
	}
	defer qp.done()
	if u := flags &^ (DataInOrderReturnCaps | DataInOrderDeviceOnly); u != 0 {
		return 0, argError(verb, dev, "unknown flags %#x", uint32(u))
	}
	if op > WRSendWithInv {
		return 0, argError(verb, dev, "unknown opcode %d", uint8(op))
	}
	why := "the " + c.dev.Driver.String() + " provider has no data-in-order query (libibverbs' default answers 0)"
	if c.dev.Driver.String() == "mlx5" {
		why = "mlx5 answers it by a DEVX QUERY_QP firmware command, which goverbs does not send"
	}
	return 0, opError(verb, dev, abi.TransportNone, fmt.Errorf("%w: %s; the answer is 0, no guarantee", ErrNotSupported, why))
}
