package hexaddr

import (
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	gid := [16]byte{0xfe, 0x80, 15: 0x01}
	b := Encode(52, "0001:0000a2:00abcd", gid)
	if len(b) != 52 || b[51] != 0 {
		t.Fatalf("Encode: %d bytes, last %#x; want 52, NUL-padded", len(b), b[len(b)-1])
	}
	var v [3]uint64
	got, err := Decode(b, v[:])
	if err != nil {
		t.Fatal(err)
	}
	if v != [3]uint64{1, 0xa2, 0xabcd} || got != gid {
		t.Fatalf("Decode: %x %x, want [1 a2 abcd] %x", v, got, gid)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"0001:000002:" + strings.Repeat("0", 32), "malformed"},                // one number short
		{"10000:000002:000003:" + strings.Repeat("0", 32), "LID out of range"}, // 17-bit LID
		{"0001:xyz:000003:" + strings.Repeat("0", 32), "invalid syntax"},
		{"0001:000002:000003:" + strings.Repeat("0", 30), "bad GID"},
		{"0001:000002:000003:" + strings.Repeat("g", 32), "bad GID"},
	} {
		var v [3]uint64
		if _, err := Decode([]byte(c.msg+"\x00\x00"), v[:]); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v, want an error saying %q", c.msg, err, c.want)
		}
	}
}
