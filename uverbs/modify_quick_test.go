package uverbs

import "testing"

// TestModifyIsQuick: which MODIFY_QPs go as raw syscalls. Only CPU-only
// (software) devices' do; there, a RoCE address vector the kernel must
// resolve (it may wait for ARP) makes the command ordinary unless the
// caller knows it resolved, and an iWARP AV never does (the kernel
// resolves none).
func TestModifyIsQuick(t *testing.T) {
	rtr := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
	for _, c := range []struct {
		name     string
		cpuOnly  bool
		tr       Transport
		mask     QPAttrMask
		resolved bool
		want     bool
	}{
		{"rxe INIT", true, TransportIB, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags, false, true},
		{"rxe RTR", true, TransportIB, rtr, false, false},
		{"rxe RTR, resolved", true, TransportIB, rtr, true, true},
		{"siw RTR", true, TransportIWARP, rtr, false, true},
		{"siw ERR", true, TransportIWARP, QPAttrState, false, true},
		{"mlx5 INIT", false, TransportIB, QPAttrState, false, false},
		{"mlx5 RTR, resolved", false, TransportIB, rtr, true, false},
		{"hardware iWARP RTR", false, TransportIWARP, rtr, false, false},
	} {
		if got := modifyIsQuick(c.cpuOnly, c.tr, c.mask, c.resolved); got != c.want {
			t.Errorf("%s: modifyIsQuick = %v, want %v", c.name, got, c.want)
		}
	}
}
