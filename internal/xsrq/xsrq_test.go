package xsrq

import (
	"net"
	"strings"
	"testing"
)

// TestWire: the address message is xsrq_pingpong's MSG_FORMAT
// "%04x:%06x:%06x:%06x:%06x:%32s" with gid_to_wire_gid's 32 hex digits,
// NUL-padded to MSG_SIZE (66), and decodes back.
func TestWire(t *testing.T) {
	var gid [16]byte
	copy(gid[:], net.ParseIP("fe80::1234:5678"))
	d := dest{lid: 0x1b, recvQPN: 0x123, sendQPN: 0x10456, psn: 0xabcdef, srqn: 0x12, gid: gid}
	b := d.encode()
	const want = "001b:000123:010456:abcdef:000012:fe800000000000000000000012345678"
	if len(b) != msgSize || string(b[:len(want)]) != want || strings.Trim(string(b[len(want):]), "\x00") != "" {
		t.Fatalf("encode: %q, want %q NUL-padded to %d", b, want, msgSize)
	}
	got, err := decode(b)
	if err != nil || got.lid != d.lid || got.recvQPN != d.recvQPN || got.sendQPN != d.sendQPN || got.psn != d.psn || got.srqn != d.srqn || got.gid != d.gid {
		t.Errorf("decode: %+v, %v; want %+v", got, err, d)
	}
	for _, bad := range []string{"", "0001:000123:000456:abcdef:000012", "10000:0:0:0:0:" + strings.Repeat("0", 32), "1:2:3:4:5:xyz", "1:2:3:4:z:" + strings.Repeat("0", 32)} {
		if _, err := decode([]byte(bad)); err == nil {
			t.Errorf("decode(%q) succeeded", bad)
		}
	}
}
