package inet

import (
	"net/netip"
	"testing"
)

func TestNtop6(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fe80::5054:ff:fe12:3456", "fe80::5054:ff:fe12:3456"},
		{"::ffff:10.0.2.15", "::ffff:10.0.2.15"},
		{"::", "::"},
		{"::1", "::1"},
		{"::1.2.3.4", "::1.2.3.4"}, // IPv4-compatible: glibc keeps the dotted quad
		{"1::", "1::"},
		{"1:0:1::", "1:0:1::"},
		{"1:0:0:1:0:0:0:1", "1:0:0:1::1"},
		{"1:0:0:1:0:0:1:1", "1::1:0:0:1:1"},
		{"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"},
		{"1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"},
		{"::ffff:0:1.2.3.4", "::ffff:0:102:304"},
		{"fec0::5054:ff:fe12:3456", "fec0::5054:ff:fe12:3456"},
		{"::10.0.2.15", "::10.0.2.15"},
		{"::ffff:0:a00:20f", "::ffff:0:a00:20f"}, // not mapped
		{"1:0:1:0:0:1:0:0", "1:0:1::1:0:0"},      // the first of equal runs
		{"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
	} {
		a := netip.MustParseAddr(tc.in).As16()
		if got := Ntop6(a); got != tc.want {
			t.Errorf("Ntop6(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzNtop6: glibc's form parses back to the same address, and equals
// Go's except where glibc prints an IPv4-compatible address.
func FuzzNtop6(f *testing.F) {
	f.Add([]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56})
	f.Add(make([]byte, 16))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 15})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a [16]byte
		copy(a[:], b)
		s := Ntop6(a)
		back, err := netip.ParseAddr(s)
		if err != nil || back.As16() != a {
			t.Fatalf("Ntop6(%x) = %q, which parses as %v, %v", a, s, back, err)
		}
		ipv4compat := [12]byte(a[:12]) == [12]byte{} && (a[12] != 0 || a[13] != 0)
		if goStr := netip.AddrFrom16(a).String(); !ipv4compat && goStr != s {
			t.Fatalf("Ntop6(%x) = %q, netip %q", a, s, goStr)
		}
	})
}
