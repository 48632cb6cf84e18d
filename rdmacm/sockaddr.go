package rdmacm

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Socket address sizes the kernel checks (rdma_addr_size in addr.c).
const (
	sizeofSockaddrIn  = 16
	sizeofSockaddrIn6 = 28
	sizeofSockaddrIB  = 48
)

// putSockaddr encodes ap as a struct sockaddr_in or sockaddr_in6 into b
// (128 bytes: a __kernel_sockaddr_storage) and returns its size. An IPv4
// address (also an IPv4-mapped one) becomes AF_INET; an invalid address is
// the IPv4 wildcard when v6 is false, the IPv6 wildcard otherwise.
func putSockaddr(b []byte, ap netip.AddrPort, v6 bool) int {
	clear(b)
	a := ap.Addr()
	if !a.IsValid() {
		if v6 {
			a = netip.IPv6Unspecified()
		} else {
			a = netip.IPv4Unspecified()
		}
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	port := ap.Port()
	if a.Is4() {
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], port)
		a4 := a.As4()
		copy(b[4:8], a4[:])
		return sizeofSockaddrIn
	}
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], port)
	a16 := a.As16()
	copy(b[8:24], a16[:])
	if z := a.Zone(); z != "" {
		if ifi, err := netInterfaceIndex(z); err == nil {
			binary.NativeEndian.PutUint32(b[24:], uint32(ifi))
		}
	}
	return sizeofSockaddrIn6
}

// parseSockaddr decodes a struct sockaddr_in or sockaddr_in6 the kernel
// wrote. AF_IB and anything unknown are an error.
func parseSockaddr(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, fmt.Errorf("sockaddr: %d bytes", len(b))
	}
	switch fam := binary.NativeEndian.Uint16(b); fam {
	case unix.AF_INET:
		if len(b) < sizeofSockaddrIn {
			return netip.AddrPort{}, fmt.Errorf("sockaddr_in: %d bytes", len(b))
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), nil
	case unix.AF_INET6:
		if len(b) < sizeofSockaddrIn6 {
			return netip.AddrPort{}, fmt.Errorf("sockaddr_in6: %d bytes", len(b))
		}
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.NativeEndian.Uint32(b[24:]); scope != 0 && a.IsLinkLocalUnicast() {
			a = a.WithZone(fmt.Sprint(scope))
		}
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[2:])), nil
	case 0:
		return netip.AddrPort{}, nil
	default:
		return netip.AddrPort{}, fmt.Errorf("sockaddr: address family %d", fam)
	}
}
