package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
)

// cqAttrModerate is IB_CQ_MODERATE (ib_verbs.h; libibverbs'
// IBV_CQ_ATTR_MODERATE): the only attribute MODIFY_CQ changes.
const cqAttrModerate = 1 << 0

// Moderate sets the CQ's completion event moderation (ibv_modify_cq with
// IBV_CQ_ATTR_MODERATE): the device raises an event once count completions
// arrived or period microseconds passed since the first, whichever comes
// first (count 0 or period 0: that trigger off, as the device defines).
// It runs the extended MODIFY_CQ command (one syscall).
//
// The device's DeviceAttr.CQModerationCaps bound both values; a device
// whose caps are zero (rxe and siw: their drivers have no modify_cq, and
// librxe offers none) refuses with ErrNotSupported before any command.
func (cq *CQ) Moderate(count, period uint16) (err error) {
	const verb = "ModifyCQ"
	if sp := cq.ctx.begin(verb); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	dev := cq.ctx.dev.Name
	if err := cq.use(verb, dev); err != nil {
		return err
	}
	defer cq.done()
	a, err := cq.ctx.capabilities()
	if err != nil {
		return err
	}
	caps := a.CQModerationCaps
	switch {
	case caps.MaxCount == 0 && caps.MaxPeriod == 0:
		return opError(verb, dev, abi.TransportNone,
			fmt.Errorf("%w: the device moderates no CQ (cq_moderation_caps are zero)", ErrNotSupported))
	case count > caps.MaxCount:
		return argError(verb, dev, "count %d: the device takes at most %d", count, caps.MaxCount)
	case period > caps.MaxPeriod:
		return argError(verb, dev, "period %d µs: the device takes at most %d", period, caps.MaxPeriod)
	}
	return cq.modify(count, period)
}

// modify runs MODIFY_CQ (ib_uverbs_ex_modify_cq, write only: the kernel
// has no ioctl method for it).
func (cq *CQ) modify(count, period uint16) error {
	req := abi.IbUverbsExModifyCq{CqHandle: cq.handle, AttrMask: cqAttrModerate,
		Attr: abi.IbUverbsCqModeration{CqCount: count, CqPeriod: period}}
	cmd := abi.Command{Num: abi.IB_USER_VERBS_EX_CMD_MODIFY_CQ | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED, In: abi.Bytes(&req)}
	return cq.ctx.invoke("ModifyCQ", &cmd)
}
