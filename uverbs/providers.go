package uverbs

import (
	"github.com/goverbs/goverbs/provider"
)

// drivers maps a kernel driver id to its provider. A provider is chosen by
// the driver id the kernel reports, never by the device's name.
var drivers = map[DriverID]provider.Driver{}

// driverFor returns the provider for id, or the plain provider: no driver
// data and no fast path, enough for the slow path of drivers that take no
// private data.
func driverFor(id DriverID) provider.Driver {
	if d, ok := drivers[id]; ok {
		return d
	}
	return plainDriver{}
}

type plainDriver struct{}

func (plainDriver) Name() string { return "plain" }

func (plainDriver) NewContext(k provider.Kernel) (provider.Context, error) {
	if err := k.GetContext(nil, nil); err != nil {
		return nil, err
	}
	return plainContext{}, nil
}

// plainContext creates objects with no driver data; their fast paths
// report ErrNotSupported.
type plainContext struct{}

func (plainContext) Udata(provider.Verb) (in, out []byte) { return nil, nil }
func (plainContext) Close() error                         { return nil }

func (plainContext) CreateCQ(provider.CQAttr) (provider.Setup[provider.CQCreated, provider.CQ], error) {
	return plainSetup[provider.CQCreated, provider.CQ]{plainCQ{}}, nil
}

func (plainContext) CreateQP(provider.QPAttr) (provider.Setup[provider.QPCreated, provider.QP], error) {
	return plainSetup[provider.QPCreated, provider.QP]{plainQP{}}, nil
}

func (plainContext) CreateSRQ(provider.SRQAttr) (provider.Setup[provider.SRQCreated, provider.SRQ], error) {
	return plainSetup[provider.SRQCreated, provider.SRQ]{plainSRQ{}}, nil
}

func (plainContext) CreateAH(provider.AHAttr) (provider.Setup[provider.AHCreated, provider.AH], error) {
	return plainSetup[provider.AHCreated, provider.AH]{plainAH{}}, nil
}

type plainSetup[C, O any] struct{ obj O }

func (plainSetup[C, O]) Udata() (in, out []byte) { return nil, nil }
func (s plainSetup[C, O]) Complete(C) (O, error) { return s.obj, nil }
func (plainSetup[C, O]) Abort()                  {}

type plainCQ struct{}

func (plainCQ) Poll([]provider.WorkCompletion) (int, error) { return 0, ErrNotSupported }
func (plainCQ) Arm(bool) error                              { return ErrNotSupported }
func (plainCQ) Event()                                      {}
func (plainCQ) Resize(int) (provider.Setup[uint32, struct{}], error) {
	return plainSetup[uint32, struct{}]{}, nil
}
func (plainCQ) Close() error { return nil }

type plainQP struct{}

func (plainQP) PostSend([]provider.SendWR) (int, error) { return 0, ErrNotSupported }
func (plainQP) PostRecv([]provider.RecvWR) (int, error) { return 0, ErrNotSupported }
func (plainQP) Modified(provider.QPState)               {}
func (plainQP) Close() error                            { return nil }

type plainSRQ struct{}

func (plainSRQ) PostRecv([]provider.RecvWR) (int, error) { return 0, ErrNotSupported }
func (plainSRQ) Close() error                            { return nil }

type plainAH struct{}

func (plainAH) Close() error { return nil }
