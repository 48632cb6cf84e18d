package provider

import (
	"strconv"
	"strings"
)

// bitName names one bit of a flag set.
type bitName struct {
	bit  uint64
	name string
}

// flagString is the set bits of v by name, joined by "|", in the table's
// order; bits without a name come last as one hexadecimal number, and an
// empty set is "0x0" (the format of uverbs.Access).
func flagString(v uint64, names []bitName) string {
	var b strings.Builder
	for _, n := range names {
		if v&n.bit != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n.name)
			v &^= n.bit
		}
	}
	if v != 0 || b.Len() == 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x" + strconv.FormatUint(v, 16))
	}
	return b.String()
}

var sendFlagNames = []bitName{
	{uint64(SendFence), "FENCE"}, {uint64(SendSignaled), "SIGNALED"},
	{uint64(SendSolicited), "SOLICITED"}, {uint64(SendInline), "INLINE"},
}

// String is the set flags by their libibverbs names without the IBV_SEND_
// prefix, joined by "|" ("SIGNALED|INLINE"); unnamed bits come last in
// hexadecimal, and no flag is "0x0".
func (f SendFlags) String() string { return flagString(uint64(f), sendFlagNames) }

var wcFlagNames = []bitName{
	{uint64(WCWithGRH), "GRH"}, {uint64(WCWithImm), "WITH_IMM"},
	{uint64(WCIPCSumOK), "IP_CSUM_OK"}, {uint64(WCWithInv), "WITH_INV"},
}

// String is the set flags by their libibverbs names without the IBV_WC_
// prefix, joined by "|" ("GRH|WITH_IMM"); unnamed bits come last in
// hexadecimal, and no flag is "0x0".
func (f WCFlags) String() string { return flagString(uint64(f), wcFlagNames) }
