package rxe

import (
	"encoding/binary"
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// CreateAH prepares an address handle. Since Linux 5.16 the kernel answers
// with struct rxe_create_ah_resp {ah_num}, and a UD send names its AH by
// that number; older kernels read the address vector copied into each WQE
// instead, which needs the destination MAC that only librxe's neighbour
// resolution knows, so this provider requires ah_num.
func (c *Context) CreateAH(a provider.AHAttr) (provider.Setup[provider.AHCreated, provider.AH], error) {
	return &setup[provider.AHCreated, provider.AH]{
		out: make([]byte, len(abi.Bytes(new(abi.RxeCreateAhResp)))),
		complete: func(_ provider.AHCreated, out []byte) (provider.AH, error) {
			var resp abi.RxeCreateAhResp
			copy(abi.Bytes(&resp), out)
			if resp.AhNum == 0 {
				return nil, fmt.Errorf("rxe: the kernel returned no ah_num for the address handle (Linux before 5.16): UD sends need Linux 5.16 or newer: %w", provider.ErrNotSupported)
			}
			ah := &AH{num: resp.AhNum}
			av := buildAV(a)
			copy(ah.av[:], abi.Bytes(&av))
			return ah, nil
		},
	}, nil
}

// AH is an rxe address handle: the kernel's AH number, and the address
// vector librxe would also copy into each UD WQE (the kernel ignores it when
// the number is set).
type AH struct {
	num uint32
	av  [avSize]byte
}

var _ provider.AH = (*AH)(nil)

// Num is the AH number UD WQEs carry.
func (ah *AH) Num() uint32 { return ah.num }

// Close releases nothing.
func (ah *AH) Close() error { return nil }

// buildAV fills struct rxe_av from what the caller knows: port, GRH and the
// destination address derived from the GID. The destination MAC and the
// source address stay zero (the kernel resolved them when it created the AH).
func buildAV(a provider.AHAttr) abi.RxeAv {
	var av abi.RxeAv
	av.PortNum = a.PortNum
	if !a.IsGlobal {
		return av
	}
	av.Grh = abi.RxeGlobalRoute{
		Dgid:         a.DGID,
		FlowLabel:    a.FlowLabel,
		SgidIndex:    a.SGIDIndex,
		HopLimit:     a.HopLimit,
		TrafficClass: a.TrafficClass,
	}
	ne := binary.NativeEndian
	if isV4Mapped(a.DGID) {
		av.NetworkType = abi.RXE_NETWORK_TYPE_IPV4
		ne.PutUint16(av.DgidAddr[0:], unix.AF_INET) // sockaddr_in
		copy(av.DgidAddr[4:8], a.DGID[12:16])
	} else {
		av.NetworkType = abi.RXE_NETWORK_TYPE_IPV6
		ne.PutUint16(av.DgidAddr[0:], unix.AF_INET6) // sockaddr_in6
		copy(av.DgidAddr[8:24], a.DGID[:])
	}
	return av
}

// isV4Mapped reports whether gid is an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d), as RoCEv2 GIDs of IPv4 addresses are.
func isV4Mapped(gid [16]byte) bool {
	for _, b := range gid[:10] {
		if b != 0 {
			return false
		}
	}
	return gid[10] == 0xff && gid[11] == 0xff
}
