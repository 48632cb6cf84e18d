package uverbs

import (
	"fmt"
	"runtime"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
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
// or 0. It describes the receiving side: how remote RDMA WRITEs and SENDs
// land in this QP's memory, and how its own RDMA READs' responses do; a
// reader may then poll the data rather than the completion.
//
// The kernel has no uverbs method for it: a provider asks its device. mlx5
// does as rdma-core's mlx5: the device's general capabilities
// (QUERY_HCA_CAP, read once per context) must have qp_data_in_order, the
// QP must be in RTS, and its QP context (QUERY_QP) then says whether whole
// messages land in order; both are DEVX firmware commands, ioctls on the
// mlx5 driver's DEVX objects. Where that says no the answer is 0, no
// error; where a command fails the answer is 0 with the error (a device or
// kernel without DEVX: ErrNotSupported). rxe and siw have no such query
// (libibverbs' default answers 0): 0 and an error for which
// errors.Is(err, ErrNotSupported) holds, with no syscall. As libibverbs
// does, DataInOrderWholeMsg implies DataInOrderAligned128, and off x86 the
// answer is 0 unless DataInOrderDeviceOnly asks for the device's alone
// (other CPUs may reorder what the device wrote in order). Unknown flags
// are EINVAL.
func (qp *QP) QueryDataInOrder(op WROpcode, flags DataInOrderFlags) (_ DataInOrderCaps, err error) {
	const verb = "QueryDataInOrder"
	c := qp.pd.ctx
	sp := c.begin(verb)
	defer func() { sp.end(err) }()
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
	dq, ok := qp.prov.(provider.DataInOrderQP)
	if !ok {
		why := "the " + c.dev.Driver.String() + " provider has no data-in-order query (libibverbs' default answers 0)"
		return 0, opError(verb, dev, abi.TransportNone, fmt.Errorf("%w: %s; the answer is 0, no guarantee", ErrNotSupported, why))
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" && flags&DataInOrderDeviceOnly == 0 {
		return 0, nil // libibverbs' rule: only x86 keeps the device's order
	}
	whole, err := dq.DataInOrder(qp.handle)
	if err != nil {
		return 0, opError(verb, dev, abi.TransportIoctl, fmt.Errorf("%w; the answer is 0, no guarantee", err))
	}
	var caps DataInOrderCaps
	if whole {
		caps = DataInOrderWholeMsg | DataInOrderAligned128
	}
	if flags&DataInOrderReturnCaps == 0 {
		caps &= DataInOrderWholeMsg
	}
	return caps, nil
}
