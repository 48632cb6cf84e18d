package uverbs

import (
	"fmt"
	"strings"
)

// String methods of the enums and flag sets that have no other home. Flag
// sets print their set bits by libibverbs' names without the C prefix,
// joined by "|", unnamed bits last in hexadecimal, and the empty set as
// "0x0" (Access's format); Names, where a type has it, is the same list
// unjoined.

// joinFlags is a flag set's String from its Names.
func joinFlags(names []string) string {
	if len(names) == 0 {
		return "0x0"
	}
	return strings.Join(names, "|")
}

// String is the MTU in bytes ("1024"), or "MTU(N)" for a value that is
// not an MTU.
func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

var qpAttrMaskNames = []flagName{
	{uint64(QPAttrState), "STATE"}, {uint64(QPAttrCurState), "CUR_STATE"},
	{uint64(QPAttrEnSQDAsyncNotify), "EN_SQD_ASYNC_NOTIFY"}, {uint64(QPAttrAccessFlags), "ACCESS_FLAGS"},
	{uint64(QPAttrPKeyIndex), "PKEY_INDEX"}, {uint64(QPAttrPort), "PORT"}, {uint64(QPAttrQKey), "QKEY"},
	{uint64(QPAttrAV), "AV"}, {uint64(QPAttrPathMTU), "PATH_MTU"}, {uint64(QPAttrTimeout), "TIMEOUT"},
	{uint64(QPAttrRetryCnt), "RETRY_CNT"}, {uint64(QPAttrRNRRetry), "RNR_RETRY"},
	{uint64(QPAttrRQPSN), "RQ_PSN"}, {uint64(QPAttrMaxQPRDAtomic), "MAX_QP_RD_ATOMIC"},
	{uint64(QPAttrAltPath), "ALT_PATH"}, {uint64(QPAttrMinRNRTimer), "MIN_RNR_TIMER"},
	{uint64(QPAttrSQPSN), "SQ_PSN"}, {uint64(QPAttrMaxDestRDAtomic), "MAX_DEST_RD_ATOMIC"},
	{uint64(QPAttrPathMigState), "PATH_MIG_STATE"}, {uint64(QPAttrCap), "CAP"},
	{uint64(QPAttrDestQPN), "DEST_QPN"}, {uint64(QPAttrRateLimit), "RATE_LIMIT"},
}

// String is the mask's bits by their libibverbs names without the IBV_QP_
// prefix ("STATE|PKEY_INDEX|PORT|ACCESS_FLAGS" in bit order).
func (m QPAttrMask) String() string { return joinFlags(flagNames(uint64(m), qpAttrMaskNames)) }

// String is "TYPE_1" or "TYPE_2" (IBV_MW_TYPE_*), or "MWType(N)".
func (t MWType) String() string {
	switch t {
	case MWType1:
		return "TYPE_1"
	case MWType2:
		return "TYPE_2"
	}
	return fmt.Sprintf("MWType(%d)", uint8(t))
}

var reregNames = []flagName{{uint64(ReregTranslation), "TRANS"}, {uint64(ReregPD), "PD"}, {uint64(ReregAccess), "ACCESS"}}

// String is the flags by their libibverbs names without the IBV_REREG_MR_CHANGE_
// prefix ("TRANS|ACCESS").
func (f Rereg) String() string { return joinFlags(flagNames(uint64(f), reregNames)) }

var srqAttrMaskNames = []flagName{{uint64(SRQAttrMaxWR), "MAX_WR"}, {uint64(SRQAttrLimit), "LIMIT"}}

// String is the mask's bits by their libibverbs names without the IBV_SRQ_
// prefix ("MAX_WR|LIMIT").
func (m SRQAttrMask) String() string { return joinFlags(flagNames(uint64(m), srqAttrMaskNames)) }

// String is "GRH_REQUIRED" for PortGRHRequired (IB_UVERBS_QPF_GRH_REQUIRED).
func (f PortFlag) String() string {
	return joinFlags(flagNames(uint64(f), []flagName{{uint64(PortGRHRequired), "GRH_REQUIRED"}}))
}

// String is Names joined by "|".
func (f DeviceCap) String() string { return joinFlags(f.Names()) }

// String is Names joined by "|".
func (f ODPGeneralCap) String() string { return joinFlags(f.Names()) }

// String is Names joined by "|".
func (f ODPTransportCap) String() string { return joinFlags(f.Names()) }

// String is Names joined by "|".
func (m QPTypeMask) String() string { return joinFlags(m.Names()) }

// String is Names joined by "|".
func (f RawPacketCap) String() string { return joinFlags(f.Names()) }

// String is Names joined by "|".
func (f TMCap) String() string { return joinFlags(f.Names()) }

// String is Names joined by "|".
func (f PortCap) String() string { return joinFlags(f.Names()) }

// String is Names joined by "|".
func (f PortCap2) String() string { return joinFlags(f.Names()) }
