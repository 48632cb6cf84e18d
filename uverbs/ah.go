package uverbs

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// AH is an address handle: a destination for UD sends. It is safe for
// concurrent use; Close is idempotent and returns nil after the Context
// closed. Do not close an AH while UD sends naming it are outstanding.
type AH struct {
	pd     *PD
	prov   provider.AH
	handle uint32
	attr   AHAttr      // its GRH, if any, points to grh
	grh    GlobalRoute // the caller's, copied: it may change theirs
	lifetime
}

// CreateAH creates an address handle (CREATE_AH: one syscall).
func (pd *PD) CreateAH(a AHAttr) (_ *AH, err error) {
	if sp := pd.ctx.begin("CreateAH"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	c := pd.ctx
	dev := c.dev.Name
	if a.PortNum == 0 {
		return nil, argError("CreateAH", dev, "port number 0 (ports count from 1)")
	}
	pa := provider.AHAttr{DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, PortNum: a.PortNum}
	req := abi.IbUverbsCreateAh{Attr: abi.IbUverbsAhAttr{Dlid: a.DLID, Sl: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate, PortNum: a.PortNum}}
	if g := a.GRH; g != nil {
		pa.IsGlobal, pa.DGID, pa.FlowLabel, pa.SGIDIndex, pa.HopLimit, pa.TrafficClass = true, g.DGID, g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TrafficClass
		req.Attr.IsGlobal = 1
		req.Attr.Grh = abi.IbUverbsGlobalRoute{Dgid: g.DGID, FlowLabel: g.FlowLabel, SgidIndex: g.SGIDIndex, HopLimit: g.HopLimit, TrafficClass: g.TrafficClass}
	}
	if err := pd.use("CreateAH", dev); err != nil {
		return nil, err
	}
	defer pd.done()
	setup, err := c.prov.CreateAH(pa)
	if err != nil {
		return nil, opError("CreateAH", dev, abi.TransportNone, err)
	}
	in, out := setup.Udata()
	req.PdHandle = pd.handle
	var resp abi.IbUverbsCreateAhResp
	cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_CREATE_AH, In: abi.Bytes(&req), Out: abi.Bytes(&resp), DriverIn: in, DriverOut: out}
	if err := c.invoke("CreateAH", &cmd); err != nil {
		setup.Abort()
		return nil, err
	}
	ah := &AH{pd: pd, handle: resp.AhHandle, attr: a}
	if a.GRH != nil {
		ah.grh = *a.GRH
		ah.attr.GRH = &ah.grh
	}
	prov, err := setup.Complete(provider.AHCreated{Handle: resp.AhHandle})
	if err != nil {
		ah.destroyKernel()
		return nil, opError("CreateAH", dev, abi.TransportNone, err)
	}
	ah.prov = prov
	return ah, nil
}

// ProviderAH is the provider's form of the address, for UD work requests.
func (ah *AH) ProviderAH() provider.AH { return ah.prov }

// Attr is the address the AH was created with. Its GRH is a copy: a
// change to it, or to the one CreateAH was given, changes nothing.
func (ah *AH) Attr() AHAttr {
	a := ah.attr
	if a.GRH != nil {
		g := *a.GRH
		a.GRH = &g
	}
	return a
}

// Handle is the kernel's handle for the AH.
func (ah *AH) Handle() uint32 { return ah.handle }

func (ah *AH) destroyKernel() error {
	req := abi.IbUverbsDestroyAh{AhHandle: ah.handle}
	return ah.pd.ctx.destroyObject("DestroyAH", abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY, ah.handle, 0, nil,
		&abi.Command{Num: abi.IB_USER_VERBS_CMD_DESTROY_AH, In: abi.Bytes(&req)})
}

// Close destroys the AH. Idempotent.
func (ah *AH) Close() error {
	// The span starts inside close: a Close after success is a no-op, not a call.
	return ah.close(func() (err error) {
		if sp := ah.pd.ctx.begin("DestroyAH"); sp.rec != nil {
			defer func() { sp.end(err) }()
		}
		if err := ah.destroyKernel(); err != nil {
			return err
		}
		return ah.prov.Close()
	})
}
