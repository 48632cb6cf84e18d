package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// ECE is a QP's enhanced connection establishment options (struct
// ibv_ece): vendor-defined options the two sides' devices agree on while
// connecting. rdma_cm carries them between the sides (rdmacm.Config.ECE,
// rdmacm.Conn.PeerECE); the device answers which it takes.
type ECE struct {
	VendorID uint32 // the IEEE vendor ID the options belong to
	Options  uint32
}

// SetECE sets the options the QP's next Modify offers the device
// (ibv_set_ece); the device's answer is QueryECE's after that Modify (and
// 0 until then). No syscall. A zero VendorID, or a device whose provider
// has no ECE (rxe, siw, as libibverbs' default for them) or that does not
// take options (an mlx5 device without ece_support), is ErrNotSupported;
// another vendor's options are EINVAL.
func (qp *QP) SetECE(e ECE) error {
	const verb = "SetECE"
	c := qp.pd.ctx
	dev := c.dev.Name
	if err := qp.use(verb, dev); err != nil {
		return err
	}
	defer qp.done()
	if e.VendorID == 0 {
		return opError(verb, dev, abi.TransportNone, fmt.Errorf("%w: no vendor ID (libibverbs' rule)", ErrNotSupported))
	}
	eq, ok := qp.prov.(provider.ECEQP)
	if !ok {
		return opError(verb, dev, abi.TransportNone, fmt.Errorf("%w: the %s provider has no ECE", ErrNotSupported, c.dev.Driver))
	}
	if v := eq.ECEVendorID(); e.VendorID != v {
		return argError(verb, dev, "ECE vendor ID %#x: the device takes vendor %#x's options only", e.VendorID, v)
	}
	if !eq.ECESupported() {
		return opError(verb, dev, abi.TransportNone, fmt.Errorf("%w: the device does not take ECE options", ErrNotSupported))
	}
	qp.modify.Lock()
	eq.SetECE(e.Options)
	qp.modify.Unlock()
	return nil
}

// QueryECE is the options the device answered last for the QP
// (ibv_query_ece): at its creation, or at the last Modify that carried
// options set by SetECE. No syscall. ErrNotSupported where the provider
// has no ECE (rxe, siw). An XRC target QP (XRCD.CreateTargetQP, OpenQP)
// answers 0 until a Modify carried options: the kernel creates it without
// the driver's data, so no options reach the device at its creation.
func (qp *QP) QueryECE() (ECE, error) {
	const verb = "QueryECE"
	c := qp.pd.ctx
	dev := c.dev.Name
	if err := qp.use(verb, dev); err != nil {
		return ECE{}, err
	}
	defer qp.done()
	eq, ok := qp.prov.(provider.ECEQP)
	if !ok {
		return ECE{}, opError(verb, dev, abi.TransportNone, fmt.Errorf("%w: the %s provider has no ECE", ErrNotSupported, c.dev.Driver))
	}
	qp.modify.Lock()
	defer qp.modify.Unlock()
	return ECE{VendorID: eq.ECEVendorID(), Options: eq.ECE()}, nil
}
