package uverbs

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// GRHLen is the size of the GRH at the start of a UD receive buffer: the
// device writes the packet's global route header (or, for RoCE v2 over
// IPv4, the IPv4 header in its last 20 bytes) there when the completion
// has WCWithGRH.
const GRHLen = 40

// InitAHFromWC returns the address that answers the sender of a UD
// receive (ibv_init_ah_from_wc): wc is the receive's completion and grh
// the first GRHLen bytes of its buffer, port the receiving port. Without
// WCWithGRH the answer is LID-routed (DLID = wc.SLID). With it, the header
// is read as libibverbs reads it: an IPv4 header (RoCE v2 over IPv4) when
// the first nibble is not 6, or when the last 20 bytes are an IPv4 header
// of 5 words with a valid checksum; an IPv6 header otherwise (RoCE v2 over
// IPv6 when the next header is UDP, InfiniBand or RoCE v1 when it is
// 0x1b). The source GID index is the port's entry holding the packet's
// destination address with the matching GID type (one QUERY_GID_TABLE).
// A multicast destination is EINVAL (no table holds it), an unknown
// header EPROTONOSUPPORT, a destination not in the table ENOENT.
func (c *Context) InitAHFromWC(port int, wc *WorkCompletion, grh []byte) (AHAttr, error) {
	const verb = "InitAHFromWC"
	dev := c.dev.Name
	if port < 1 || port > 255 || wc == nil {
		return AHAttr{}, argError(verb, dev, "port %d, completion %v", port, wc != nil)
	}
	a := AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, PortNum: uint8(port)}
	if wc.Flags&WCWithGRH == 0 {
		return a, nil
	}
	if len(grh) < GRHLen {
		return AHAttr{}, argError(verb, dev, "the GRH is %d bytes, not %d", len(grh), GRHLen)
	}
	be := binary.BigEndian
	vtf := be.Uint32(grh[0:])
	r := &GlobalRoute{FlowLabel: vtf & 0xfffff}
	var local [16]byte // the packet's destination: one of this port's GIDs
	var types []GIDType
	ip4 := grh[20:40]
	switch {
	case isIPv4Header(vtf>>28, ip4):
		if ip4[16]&0xf0 == 0xe0 { // class D: 224.0.0.0/4
			return AHAttr{}, &OpError{Verb: verb, Device: dev, Err: fmt.Errorf("%w: a multicast destination (%d.%d.%d.%d)", unix.EINVAL, ip4[16], ip4[17], ip4[18], ip4[19])}
		}
		local, r.DGID = v4mapped(ip4[16:20]), v4mapped(ip4[12:16])
		r.HopLimit, r.TrafficClass = ip4[8], ip4[1]
		types = []GIDType{GIDTypeRoCEv2}
	case vtf>>28 == 6:
		if grh[24] == 0xff {
			return AHAttr{}, &OpError{Verb: verb, Device: dev, Err: fmt.Errorf("%w: a multicast destination GID", unix.EINVAL)}
		}
		copy(r.DGID[:], grh[8:24])
		copy(local[:], grh[24:40])
		switch grh[6] {
		case unix.IPPROTO_UDP:
			types = []GIDType{GIDTypeRoCEv2}
		case 0x1b: // IB_NEXT_HDR: the BTH follows
			types = []GIDType{GIDTypeIB, GIDTypeRoCEv1}
		default:
			return AHAttr{}, &OpError{Verb: verb, Device: dev, Err: fmt.Errorf("%w: GRH next header %#x", unix.EPROTONOSUPPORT, grh[6])}
		}
		r.HopLimit, r.TrafficClass = grh[7], uint8(vtf>>20)
	default:
		return AHAttr{}, &OpError{Verb: verb, Device: dev, Err: fmt.Errorf("%w: neither an IPv6 nor an IPv4 header", unix.EPROTONOSUPPORT)}
	}
	tab, err := c.QueryGIDTable()
	if err != nil {
		return AHAttr{}, err
	}
	for _, e := range tab {
		if e.Port != port || e.GID != local {
			continue
		}
		for _, t := range types {
			if e.Type == t {
				r.SGIDIndex = uint8(e.Index)
				a.GRH = r
				return a, nil
			}
		}
	}
	return AHAttr{}, &OpError{Verb: verb, Device: dev,
		Err: fmt.Errorf("%w: port %d has no GID %x of type %v", unix.ENOENT, port, local, types)}
}

// CreateAHFromWC creates the address handle that answers the sender of a
// UD receive (ibv_create_ah_from_wc): InitAHFromWC, then CreateAH.
func (pd *PD) CreateAHFromWC(port int, wc *WorkCompletion, grh []byte) (*AH, error) {
	a, err := pd.ctx.InitAHFromWC(port, wc, grh)
	if err != nil {
		return nil, err
	}
	return pd.CreateAH(a)
}

// isIPv4Header says whether a GRH area holds an IPv4 header in its last
// 20 bytes: always when the first nibble is not 6 and the header's is 4;
// when it is 6, only for a 5-word header whose checksum is right (an IPv6
// header's bytes there are addresses, which rarely pass).
func isIPv4Header(v6version uint32, ip4 []byte) bool {
	if v6version != 6 {
		return ip4[0]>>4 == 4
	}
	if ip4[0]&0xf != 5 {
		return false
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue // the checksum field, taken as 0
		}
		sum += uint32(ip4[i])<<8 | uint32(ip4[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(^sum) == uint16(ip4[10])<<8|uint16(ip4[11])
}

// v4mapped is the IPv4-mapped IPv6 address ::ffff:a.b.c.d.
func v4mapped(ip4 []byte) (g [16]byte) {
	g[10], g[11] = 0xff, 0xff
	copy(g[12:], ip4)
	return g
}
