package provider

import (
	"fmt"
	"testing"
)

func TestStrings(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{SendFlags(0), "0x0"},
		{SendSignaled, "SIGNALED"},
		{SendFence | SendSignaled | SendSolicited | SendInline, "FENCE|SIGNALED|SOLICITED|INLINE"},
		{SendSignaled | 1<<9, "SIGNALED|0x200"},
		{WCFlags(0), "0x0"},
		{WCWithGRH | WCWithImm, "GRH|WITH_IMM"},
		{WCIPCSumOK | WCWithInv, "IP_CSUM_OK|WITH_INV"},
		{WCFlags(1 << 31), "0x80000000"},
		{WRSend, "SEND"},
		{WROpcode(77), "WROpcode(77)"},
		{WCRecvRDMAWithImm, "RECV_RDMA_WITH_IMM"},
		{WCWRFlushErr, "Work Request Flushed Error"},
		{QPTypeUD, "UD"},
		{QPStateRTS, "RTS"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T: String() = %q, want %q", c.v, got, c.want)
		}
	}
}
