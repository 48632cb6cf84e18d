package uverbs

import (
	"fmt"
	"testing"
)

func TestEnumAndFlagStrings(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{MTU256, "256"}, {MTU1024, "1024"}, {MTU4096, "4096"}, {MTU(0), "MTU(0)"}, {MTU(6), "MTU(6)"},
		{QPAttrMask(0), "0x0"},
		{QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags, "STATE|ACCESS_FLAGS|PKEY_INDEX|PORT"},
		{QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer,
			"AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"},
		{QPAttrRateLimit | 1<<30, "RATE_LIMIT|0x40000000"},
		{MWType1, "TYPE_1"}, {MWType2, "TYPE_2"}, {MWType(3), "MWType(3)"},
		{ReregTranslation | ReregAccess, "TRANS|ACCESS"}, {ReregPD, "PD"}, {Rereg(8), "0x8"},
		{SRQAttrMaxWR | SRQAttrLimit, "MAX_WR|LIMIT"}, {SRQAttrMask(0), "0x0"},
		{PortGRHRequired, "GRH_REQUIRED"}, {PortFlag(0), "0x0"},
		{DeviceBadPKeyCntr | DeviceXRC, "BAD_PKEY_CNTR|XRC"}, {DeviceCap(0), "0x0"},
		{DeviceResizeMaxWR | 1<<40, "RESIZE_MAX_WR|0x10000000000"},
		{ODPSupport | ODPSupportImplicit, "ODP_SUPPORT|ODP_SUPPORT_IMPLICIT"},
		{ODPSupportSend | ODPSupportSRQRecv, "SUPPORT_SEND|SUPPORT_SRQ"},
		{QPTypeMaskRC | QPTypeMaskUD, "RC|UD"},
		{RawPacketScatterFCS, "Scatter FCS offload"},
		{TMCapRC, "IBV_TM_CAP_RC"},
		{PortSM | PortIPBasedGIDs, "SM|IP_BASED_GIDS"},
		{PortSetNodeDescSup | PortLinkSpeedNDRSup, "SET_NODE_DESC_SUP|LINK_SPEED_NDR_SUP"},
		{AccessLocalWrite | AccessRemoteRead, "LOCAL_WRITE|REMOTE_READ"}, {Access(0), "0x0"},
		// The re-exported provider types print the same way.
		{SendSignaled | SendInline, "SIGNALED|INLINE"}, {WCWithImm, "WITH_IMM"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T: String() = %q, want %q", c.v, got, c.want)
		}
	}
	// Every QPAttrMask bit the package defines has a name.
	for b := QPAttrMask(1); b <= QPAttrRateLimit; b <<= 1 {
		if b&(qpAttrLegacy|QPAttrRateLimit) != 0 && b.String()[0] == '0' {
			t.Errorf("QPAttrMask bit %#x has no name", uint32(b))
		}
	}
}
