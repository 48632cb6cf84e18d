package rxe

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// CreateAH prepares an address handle. The kernel's answer decides how UD
// sends name it:
//   - Since Linux 5.16 the kernel answers with struct rxe_create_ah_resp
//     {ah_num} and keeps the address vector itself; a UD WQE carries the
//     number, and the vector copied beside it is ignored.
//   - Before, the response stays zero (the kernel writes no driver data),
//     and the kernel reads the whole struct rxe_av from each UD WQE: its
//     network type, the source and destination IP addresses of the IP
//     header, the GRH fields and the destination MAC, which only decides
//     whether the packet is looped back inside rxe (it equals the sending
//     netdev's own MAC) or handed to the IP stack (rxe_net.c rxe_prepare).
//     The provider then builds the vector as the kernel would have: the
//     source address from the GID table entry (provider.GIDQuerier), the
//     destination MAC of a local destination address from the interface
//     that holds it, and zero otherwise (the IP stack resolves neighbours).
func (c *Context) CreateAH(a provider.AHAttr) (provider.Setup[provider.AHCreated, provider.AH], error) {
	return &ahSetup{c: c, attr: a}, nil
}

// ahSetup is CreateAH's setup and, once complete, the AH's memory: one
// allocation for the whole verb, where a SetupFunc, its closure, the
// response buffer and the AH were four (uverbs' TestAllocsCreateAH;
// BenchmarkCreateAH under callgrind: 3,942 -> 3,238 instructions a
// create and destroy, the fake kernel's ~650 included).
type ahSetup struct {
	ah   AH
	c    *Context
	attr provider.AHAttr
	resp abi.RxeCreateAhResp
}

// Udata is the response buffer: struct rxe_create_ah_resp.
func (s *ahSetup) Udata() (in, out []byte) { return nil, abi.Bytes(&s.resp) }

// Complete builds the address vector and returns the AH. The vector is
// built in place: the setup's memory is fresh (zero) and is the AH's.
func (s *ahSetup) Complete(provider.AHCreated) (provider.AH, error) {
	buildAV(&s.ah.av, &s.attr)
	if s.resp.AhNum == 0 {
		if err := s.c.userAV(&s.attr, &s.ah.av); err != nil {
			return nil, fmt.Errorf("rxe: the kernel returned no AH number, so UD sends carry the address vector (Linux before 5.16): %w", err)
		}
	}
	s.ah.num = s.resp.AhNum
	return &s.ah, nil
}

// Abort does nothing: the setup holds no resource.
func (s *ahSetup) Abort() {}

// AH is an rxe address handle: the kernel's AH number (0 when the kernel
// gave none), and the address vector UD WQEs carry when there is none.
type AH struct {
	num uint32
	av  abi.RxeAv
}

var _ provider.AH = (*AH)(nil)

// Num is the AH number UD WQEs carry (0: the kernel reads the vector).
func (ah *AH) Num() uint32 { return ah.num }

// Close releases nothing.
func (ah *AH) Close() error { return nil }

// buildAV fills struct rxe_av, zero on entry, from what the caller knows:
// port, GRH and the destination address derived from the GID. The
// destination MAC and the source address stay zero (userAV adds them
// where the kernel reads them).
func buildAV(av *abi.RxeAv, a *provider.AHAttr) {
	av.PortNum = a.PortNum
	if !a.IsGlobal {
		return
	}
	g := &av.Grh
	g.Dgid, g.FlowLabel, g.SgidIndex, g.HopLimit, g.TrafficClass = a.DGID, a.FlowLabel, a.SGIDIndex, a.HopLimit, a.TrafficClass
	if isV4Mapped(a.DGID) {
		av.NetworkType = abi.RXE_NETWORK_TYPE_IPV4
	} else {
		av.NetworkType = abi.RXE_NETWORK_TYPE_IPV6
	}
	putSockaddr(av.DgidAddr[:], a.DGID)
}

// userAV completes av for a kernel that reads it from the WQE: the source
// address and network type from the source GID (the kernel accepted the AH,
// so it is a RoCE v2 GID: IPv4 if v4-mapped, as rdma_gid_attr_network_type
// decides), and the destination MAC.
func (c *Context) userAV(a *provider.AHAttr, av *abi.RxeAv) error {
	if !a.IsGlobal {
		return provider.Invalid("a RoCE address handle needs a GRH")
	}
	q, ok := c.k.(provider.GIDQuerier)
	if !ok {
		return fmt.Errorf("cannot read the source GID: %w", provider.ErrNotSupported)
	}
	sgid, err := q.QueryGID(int(a.PortNum), int(a.SGIDIndex))
	if err != nil {
		return fmt.Errorf("source GID %d of port %d: %w", a.SGIDIndex, a.PortNum, err)
	}
	if isV4Mapped(sgid) {
		av.NetworkType = abi.RXE_NETWORK_TYPE_IPV4
	} else {
		av.NetworkType = abi.RXE_NETWORK_TYPE_IPV6
	}
	putSockaddr(av.SgidAddr[:], sgid)
	mac, err := localMAC(gidIP(a.DGID))
	if err != nil {
		return fmt.Errorf("destination MAC of %v: %w", gidIP(a.DGID), err)
	}
	av.Dmac = mac
	return nil
}

// putSockaddr writes gid as the kernel's rdma_gid2ip does: a sockaddr_in
// for an IPv4-mapped GID, else a sockaddr_in6.
func putSockaddr(b []byte, gid [16]byte) {
	ne := binary.NativeEndian
	if isV4Mapped(gid) {
		ne.PutUint16(b[0:], unix.AF_INET) // sockaddr_in
		copy(b[4:8], gid[12:16])
	} else {
		ne.PutUint16(b[0:], unix.AF_INET6) // sockaddr_in6
		copy(b[8:24], gid[:])
	}
}

// gidIP is the IP address a RoCE v2 GID stands for.
func gidIP(gid [16]byte) net.IP {
	if isV4Mapped(gid) {
		return net.IPv4(gid[12], gid[13], gid[14], gid[15]).To4()
	}
	return net.IP(gid[:])
}

// localMAC is the MAC address of the local interface that holds ip, or
// zero if none does: what the kernel's address resolution gives a local
// destination (the netdev owning the address, rdma_find_ndev_for_src_ip),
// and, for a remote one, a MAC that cannot equal the sender's own, which
// is all rxe reads it for. A variable so that unit tests can stand in for
// the host's interfaces.
var localMAC = func(ip net.IP) ([6]byte, error) {
	var mac [6]byte
	ifs, err := net.Interfaces()
	if err != nil {
		return mac, err
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue // gone meanwhile
		}
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && n.IP.Equal(ip) {
				copy(mac[:], ifc.HardwareAddr)
				return mac, nil
			}
		}
	}
	return mac, nil
}

// isV4Mapped reports whether gid is an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d), as RoCEv2 GIDs of IPv4 addresses are. Two word loads,
// not a byte loop: a create_ah asks twice (the loop was ~60 instructions
// a call under callgrind).
func isV4Mapped(gid [16]byte) bool {
	le := binary.LittleEndian
	return le.Uint64(gid[0:8]) == 0 && le.Uint32(gid[8:12]) == 0xffff_0000
}
