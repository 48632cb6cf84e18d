// Package siw is the provider for the kernel's software iWARP driver
// (siw). For now it supplies only the driver data siw's create commands
// require, so every slow-path verb works on siw devices; its fast path
// (siw's mapped send/receive/completion rings) is not written yet, and
// PostSend, PostRecv and Poll report provider.ErrNotSupported. siw QPs also
// need the iWARP connection manager (rdma_cm) to reach RTS.
//
// It owns siw's driver data and imports provider and abi; never uverbs.
package siw

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// Driver is the siw provider.
type Driver struct{}

// Name is rdma-core's name for the provider.
func (Driver) Name() string { return "siw" }

// NewContext opens a context: siw answers GET_CONTEXT with
// siw_uresp_alloc_ctx and refuses a shorter response (EINVAL).
func (Driver) NewContext(k provider.Kernel) (provider.Context, error) {
	var resp abi.SiwUrespAllocCtx
	if err := k.GetContext(nil, abi.Bytes(&resp)); err != nil {
		return nil, err
	}
	return &context{devID: resp.DevId}, nil
}

type context struct{ devID uint32 }

// Udata: siw's REG_MR reads siw_ureq_reg_mr and writes siw_uresp_reg_mr,
// and fails when either is missing.
func (c *context) Udata(v provider.Verb) (in, out []byte) {
	if v == provider.VerbRegMR {
		var req abi.SiwUreqRegMr
		var resp abi.SiwUrespRegMr
		return abi.Bytes(&req), abi.Bytes(&resp)
	}
	return nil, nil
}

func (c *context) Close() error { return nil }

func (c *context) CreateCQ(provider.CQAttr) (provider.Setup[provider.CQCreated, provider.CQ], error) {
	var resp abi.SiwUrespCreateCq
	return &setup[provider.CQCreated, provider.CQ]{out: abi.Bytes(&resp), obj: cq{}}, nil
}

func (c *context) CreateQP(provider.QPAttr) (provider.Setup[provider.QPCreated, provider.QP], error) {
	var resp abi.SiwUrespCreateQp
	return &setup[provider.QPCreated, provider.QP]{out: abi.Bytes(&resp), obj: qp{}}, nil
}

func (c *context) CreateSRQ(provider.SRQAttr) (provider.Setup[provider.SRQCreated, provider.SRQ], error) {
	var resp abi.SiwUrespCreateSrq
	return &setup[provider.SRQCreated, provider.SRQ]{out: abi.Bytes(&resp), obj: srq{}}, nil
}

// CreateAH: iWARP has no address handles; the kernel refuses them.
func (c *context) CreateAH(provider.AHAttr) (provider.Setup[provider.AHCreated, provider.AH], error) {
	return &setup[provider.AHCreated, provider.AH]{obj: ah{}}, nil
}

// setup carries a create command's driver response; siw's queues would be
// mapped from it once the fast path exists.
type setup[C, O any] struct {
	out []byte
	obj O
}

func (s *setup[C, O]) Udata() (in, out []byte) { return nil, s.out }
func (s *setup[C, O]) Complete(C) (O, error)   { return s.obj, nil }
func (s *setup[C, O]) Abort()                  {}

type cq struct{}

func (cq) Poll([]provider.WorkCompletion) (int, error) { return 0, provider.ErrNotSupported }
func (cq) Arm(bool) error                              { return provider.ErrNotSupported }
func (cq) Event()                                      {}
func (cq) Resize(int) (provider.Setup[uint32, struct{}], error) {
	return nil, provider.ErrNotSupported
}
func (cq) Close() error { return nil }

type qp struct{}

func (qp) PostSend([]provider.SendWR) (int, error) { return 0, provider.ErrNotSupported }
func (qp) PostRecv([]provider.RecvWR) (int, error) { return 0, provider.ErrNotSupported }
func (qp) Modified(provider.QPState)               {}
func (qp) Close() error                            { return nil }

type srq struct{}

func (srq) PostRecv([]provider.RecvWR) (int, error) { return 0, provider.ErrNotSupported }
func (srq) Close() error                            { return nil }

type ah struct{}

func (ah) Close() error { return nil }
