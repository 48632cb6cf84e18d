package uverbs

import "github.com/goverbs/goverbs/abi"

// MTU is a path MTU (enum ibv_mtu).
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes (0 if invalid).
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// GlobalRoute is the GRH part of an address: needed on RoCE (always) and
// across InfiniBand subnets.
type GlobalRoute struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address: where a QP's packets go (struct ibv_ah_attr).
type AHAttr struct {
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	PortNum     uint8
	// GRH is the global route; nil for a LID-routed InfiniBand address.
	GRH *GlobalRoute
}

// QPAttrMask says which QPAttr fields a Modify sets or a Query wants
// (enum ibv_qp_attr_mask; the bits are the kernel's IB_QP_*).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRDAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRDAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	QPAttrRateLimit        QPAttrMask = 1 << 25

	// qpAttrLegacy is every bit the legacy MODIFY_QP command carries.
	qpAttrLegacy QPAttrMask = 1<<21 - 1
)

// QPAttr is a queue pair's attributes (struct ibv_qp_attr).
type QPAttr struct {
	State, CurState  QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      Access
	Cap              QPCap
	AH, AltAH        AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRDAtomic      uint8
	MaxDestRDAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	RateLimit        uint32
	SignalAllQueried bool // from Query: the QP signals every send
}

func (a *AHAttr) toDest(d *abi.IbUverbsQpDest) {
	d.Dlid, d.Sl, d.SrcPathBits, d.StaticRate, d.PortNum = a.DLID, a.SL, a.SrcPathBits, a.StaticRate, a.PortNum
	if g := a.GRH; g != nil {
		d.IsGlobal = 1
		d.Dgid, d.FlowLabel, d.SgidIndex, d.HopLimit, d.TrafficClass = g.DGID, g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TrafficClass
	}
}

func (a *AHAttr) fromDest(d *abi.IbUverbsQpDest) {
	*a = AHAttr{DLID: d.Dlid, SL: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate, PortNum: d.PortNum}
	if d.IsGlobal != 0 {
		a.GRH = &GlobalRoute{DGID: d.Dgid, FlowLabel: d.FlowLabel, SGIDIndex: d.SgidIndex, HopLimit: d.HopLimit, TrafficClass: d.TrafficClass}
	}
}

// toModify encodes a for MODIFY_QP into *m (in place: the 112-byte
// command is not copied out of a return).
func (a *QPAttr) toModify(m *abi.IbUverbsModifyQp, handle uint32, mask QPAttrMask) {
	*m = abi.IbUverbsModifyQp{
		QpHandle: handle, AttrMask: uint32(mask & qpAttrLegacy),
		Qkey: a.QKey, RqPsn: a.RQPSN, SqPsn: a.SQPSN, DestQpNum: a.DestQPN, QpAccessFlags: uint32(a.AccessFlags),
		PkeyIndex: a.PKeyIndex, AltPkeyIndex: a.AltPKeyIndex, QpState: uint8(a.State), CurQpState: uint8(a.CurState),
		PathMtu: uint8(a.PathMTU), PathMigState: a.PathMigState, EnSqdAsyncNotify: a.EnSQDAsyncNotify,
		MaxRdAtomic: a.MaxRDAtomic, MaxDestRdAtomic: a.MaxDestRDAtomic, MinRnrTimer: a.MinRNRTimer,
		PortNum: a.PortNum, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RnrRetry: a.RNRRetry,
		AltPortNum: a.AltPortNum, AltTimeout: a.AltTimeout,
	}
	a.AH.toDest(&m.Dest)
	a.AltAH.toDest(&m.AltDest)
}

func (a *QPAttr) fromQuery(r *abi.IbUverbsQueryQpResp) {
	*a = QPAttr{
		State: QPState(r.QpState), CurState: QPState(r.CurQpState), PathMTU: MTU(r.PathMtu), PathMigState: r.PathMigState,
		QKey: r.Qkey, RQPSN: r.RqPsn, SQPSN: r.SqPsn, DestQPN: r.DestQpNum, AccessFlags: Access(r.QpAccessFlags),
		Cap:       QPCap{MaxSendWR: r.MaxSendWr, MaxRecvWR: r.MaxRecvWr, MaxSendSGE: r.MaxSendSge, MaxRecvSGE: r.MaxRecvSge, MaxInlineData: r.MaxInlineData},
		PKeyIndex: r.PkeyIndex, AltPKeyIndex: r.AltPkeyIndex, SQDraining: r.SqDraining, MaxRDAtomic: r.MaxRdAtomic,
		MaxDestRDAtomic: r.MaxDestRdAtomic, MinRNRTimer: r.MinRnrTimer, PortNum: r.PortNum, Timeout: r.Timeout,
		RetryCnt: r.RetryCnt, RNRRetry: r.RnrRetry, AltPortNum: r.AltPortNum, AltTimeout: r.AltTimeout,
		SignalAllQueried: r.SqSigAll != 0,
	}
	a.AH.fromDest(&r.Dest)
	a.AltAH.fromDest(&r.AltDest)
}
