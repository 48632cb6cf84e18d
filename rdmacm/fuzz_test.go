package rdmacm

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
)

// eventBytes encodes an event the way the kernel writes it.
func eventBytes(typ EventType, status int32, ud bool, data []byte) []byte {
	var r abi.RdmaUcmEventResp
	r.Uid, r.Id, r.Event, r.Status = 7, 3, uint32(typ), uint32(status)
	if ud {
		var u abi.RdmaUcmUdParam
		u.QpNum, u.Qkey = 0xffffff, 0x01234567
		u.AhAttr.IsGlobal, u.AhAttr.PortNum = 1, 1
		u.AhAttr.Grh.Dgid[15] = 9
		u.PrivateDataLen = uint8(copy(u.PrivateData[:], data))
		copy(r.Param[:], abi.Bytes(&u))
	} else {
		var c abi.RdmaUcmConnParam
		c.QpNum, c.ResponderResources, c.InitiatorDepth, c.RnrRetryCount = 0x11, 1, 2, 7
		c.PrivateDataLen = uint8(copy(c.PrivateData[:], data))
		copy(r.Param[:], abi.Bytes(&c))
	}
	r.Ece.VendorId = 0x15b3
	return append([]byte(nil), abi.Bytes(&r)...)
}

func TestDecodeEvent(t *testing.T) {
	b := eventBytes(EventConnectRequest, 0, false, []byte("hello"))
	ev, err := decodeEvent(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != EventConnectRequest || ev.uid != 7 || ev.id != 3 || string(ev.PrivateData) != "hello" ||
		ev.Conn.QPN != 0x11 || ev.Conn.ResponderResources != 1 || ev.Conn.InitiatorDepth != 2 ||
		ev.Conn.RNRRetryCount != 7 || ev.ECE.VendorID != 0x15b3 {
		t.Errorf("decoded %+v", ev)
	}
	ev, err = decodeEvent(eventBytes(EventMulticastJoin, 0, true, nil), func(uint64, EventType) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if ev.UD.QPN != 0xffffff || ev.UD.QKey != 0x01234567 || ev.UD.AH.GRH == nil || ev.UD.AH.GRH.DGID[15] != 9 || ev.UD.AH.PortNum != 1 {
		t.Errorf("decoded UD %+v", ev.UD)
	}
	// The shortest event the kernel writes has no ECE.
	if ev, err := decodeEvent(b[:eventRespMin], nil); err != nil || ev.ECE != (ECE{}) {
		t.Errorf("short event: %+v, %v", ev, err)
	}
	if _, err := decodeEvent(b[:eventRespMin-1], nil); err == nil {
		t.Error("a truncated event decoded")
	}
	ev, _ = decodeEvent(eventBytes(EventRejected, 28, false, nil), nil)
	if e := (&EventError{Event: ev}); e.Unwrap() != nil || ev.Reason() != 28 {
		t.Errorf("rejected: %v, %v", e, e.Unwrap())
	}
}

func TestEventTypeNames(t *testing.T) {
	// The values of enum rdma_cm_event_type, in order (rdma_cma.h).
	for i, n := range []string{"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
		"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED", "DISCONNECTED",
		"DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT"} {
		if got := EventType(i).String(); got != n {
			t.Errorf("EventType(%d) = %s, want %s", i, got, n)
		}
	}
	if EventTimewaitExit != 15 || EventType(16).String() != "EVENT_16" {
		t.Error("event numbering")
	}
}

func TestSockaddrRoundTrip(t *testing.T) {
	b := make([]byte, 128)
	for _, s := range []string{"10.0.2.15:7174", "[fe80::1]:1", "[2001:db8::5]:65535", "0.0.0.0:0"} {
		ap := netip.MustParseAddrPort(s)
		n := putSockaddr(b, ap, false)
		got, err := parseSockaddr(b[:n])
		if err != nil || got != ap {
			t.Errorf("%s: %v, %v", s, got, err)
		}
	}
	if n := putSockaddr(b, netip.AddrPort{}, true); n != sizeofSockaddrIn6 {
		t.Errorf("IPv6 wildcard: %d bytes", n)
	}
	if n := putSockaddr(b, netip.MustParseAddrPort("[::ffff:10.1.2.3]:5"), true); n != sizeofSockaddrIn {
		t.Errorf("IPv4-mapped: %d bytes, want a sockaddr_in", n)
	}
}

func TestDecodeQPAttr(t *testing.T) {
	var r abi.IbUverbsQpAttr
	r.QpAttrMask = 1<<0 | 1<<7 | 1<<8 | 1<<20 | 0xe00000
	r.QpState, r.PathMtu, r.DestQpNum, r.MaxDestRdAtomic = 2, 3, 0x123, 4
	r.AhAttr.IsGlobal, r.AhAttr.Grh.SgidIndex, r.AhAttr.Grh.HopLimit, r.AhAttr.PortNum = 1, 1, 64, 1
	a, m, err := decodeQPAttr(abi.Bytes(&r))
	if err != nil {
		t.Fatal(err)
	}
	if m != 1<<0|1<<7|1<<8|1<<20 {
		t.Errorf("mask %#x: bits 21-23 must be cleared", m)
	}
	if a.State != 2 || a.PathMTU != 3 || a.DestQPN != 0x123 || a.MaxDestRDAtomic != 4 || a.AH.GRH == nil ||
		a.AH.GRH.SGIDIndex != 1 || a.AH.GRH.HopLimit != 64 || a.AH.PortNum != 1 {
		t.Errorf("decoded %+v", a)
	}
	if _, _, err := decodeQPAttr(make([]byte, 143)); err == nil {
		t.Error("a short qp_attr decoded")
	}
}

func TestDecodeQueryAddr(t *testing.T) {
	var r abi.RdmaUcmQueryAddrResp
	b := abi.Bytes(&r)
	binary.BigEndian.PutUint64(b, 0x0002c90300498f20)
	r.PortNum, r.IbdevIndex = 1, 4
	r.SrcSize = uint16(putSockaddr(abi.Bytes(&r.SrcAddr), netip.MustParseAddrPort("10.0.2.15:7174"), false))
	q, err := decodeQueryAddr(b)
	if err != nil {
		t.Fatal(err)
	}
	if q.NodeGUID != 0x0002c90300498f20 || q.Port != 1 || q.IBDevIndex != 4 {
		t.Errorf("decoded %+v", q)
	}
	if a, err := parseSockaddr(q.Src); err != nil || a.String() != "10.0.2.15:7174" {
		t.Errorf("src %v, %v", a, err)
	}
	r.DstSize = 129
	if _, err := decodeQueryAddr(b); err == nil {
		t.Error("an address size beyond the storage decoded")
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(eventBytes(EventConnectRequest, 0, false, []byte("x")), false)
	f.Add(eventBytes(EventMulticastJoin, 0, true, nil), true)
	f.Add(eventBytes(EventRejected, 28, false, make([]byte, 148))[:eventRespMin], false)
	f.Fuzz(func(t *testing.T, b []byte, ud bool) {
		ev, err := decodeEvent(b, func(uint64, EventType) bool { return ud })
		if err != nil {
			if len(b) >= eventRespMin {
				t.Fatalf("%d bytes refused: %v", len(b), err)
			}
			return
		}
		if len(ev.PrivateData) > abi.RDMA_MAX_PRIVATE_DATA {
			t.Fatalf("%d bytes of private data", len(ev.PrivateData))
		}
		_ = (&EventError{Event: ev}).Error()
		_ = ev.Type.String()
	})
}

func FuzzDecodeQPAttr(f *testing.F) {
	var r abi.IbUverbsQpAttr
	r.QpAttrMask = 0x1fffff
	f.Add(append([]byte(nil), abi.Bytes(&r)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, m, err := decodeQPAttr(b)
		if err != nil {
			if len(b) >= int(unsafe.Sizeof(r)) {
				t.Fatalf("%d bytes refused: %v", len(b), err)
			}
			return
		}
		if m&^knownQPMask != 0 {
			t.Fatalf("mask %#x has bits MODIFY_QP cannot carry", m)
		}
	})
}

func FuzzDecodeQueryAddr(f *testing.F) {
	var r abi.RdmaUcmQueryAddrResp
	r.SrcSize = uint16(putSockaddr(abi.Bytes(&r.SrcAddr), netip.MustParseAddrPort("[fe80::1%2]:9"), true))
	f.Add(append([]byte(nil), abi.Bytes(&r)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := decodeQueryAddr(b)
		if err != nil {
			return
		}
		if len(q.Src) > 128 || len(q.Dst) > 128 {
			t.Fatalf("address of %d, %d bytes", len(q.Src), len(q.Dst))
		}
		parseSockaddr(q.Src)
		parseSockaddr(q.Dst)
	})
}

func FuzzParseSockaddr(f *testing.F) {
	b := make([]byte, 128)
	n := putSockaddr(b, netip.MustParseAddrPort("10.0.2.15:7174"), false)
	f.Add(append([]byte(nil), b[:n]...))
	n = putSockaddr(b, netip.MustParseAddrPort("[2001:db8::1]:80"), true)
	f.Add(append([]byte(nil), b[:n]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		ap, err := parseSockaddr(b)
		if err != nil || !ap.IsValid() {
			return
		}
		// What decodes encodes back to the same address and port.
		buf := make([]byte, 128)
		m := putSockaddr(buf, ap, ap.Addr().Is6())
		back, err := parseSockaddr(buf[:m])
		if err != nil || back.Addr().WithZone("").Unmap() != ap.Addr().WithZone("").Unmap() || back.Port() != ap.Port() {
			t.Fatalf("%v → %v, %v", ap, back, err)
		}
	})
}

// packPath packs p as struct ib_path_rec_data (IBA's PathRecord layout),
// the test's own encoder for decodePathRecord.
func packPath(p PathRecord) []byte {
	b := make([]byte, pathRecDataSize)
	binary.NativeEndian.PutUint32(b, p.Flags)
	r := b[8:]
	be := binary.BigEndian
	be.PutUint64(r[0:], p.ServiceID)
	copy(r[8:], p.DGID[:])
	copy(r[24:], p.SGID[:])
	be.PutUint16(r[40:], p.DLID)
	be.PutUint16(r[42:], p.SLID)
	w := p.FlowLabel<<8 | uint32(p.HopLimit)
	if p.RawTraffic {
		w |= 1 << 31
	}
	be.PutUint32(r[44:], w)
	r[48] = p.TrafficClass
	r[49] = p.NumbPath
	if p.Reversible {
		r[49] |= 0x80
	}
	be.PutUint16(r[50:], p.PKey)
	be.PutUint16(r[52:], p.QoSClass<<4|uint16(p.SL))
	r[54] = p.MTUSelector<<6 | p.MTU
	r[55] = p.RateSelector<<6 | p.Rate
	r[56] = p.PacketLifeTimeSelector<<6 | p.PacketLifeTime
	r[57] = p.Preference
	return b
}

func TestDecodePathRecord(t *testing.T) {
	// A RoCE v2 path as 6.1 packs it (bytes by hand from IBA's layout).
	b := make([]byte, 8+pathRecDataSize)
	binary.NativeEndian.PutUint32(b, 1)
	binary.NativeEndian.PutUint32(b[8:], PathGMP|PathPrimary|PathBidirectional)
	r := b[16:]
	d := netip.MustParseAddr("::ffff:10.99.0.2").As16()
	s := netip.MustParseAddr("::ffff:10.99.0.1").As16()
	copy(r[8:], d[:])
	copy(r[24:], s[:])
	copy(r[44:], []byte{0x80, 0x12, 0x34, 64}) // raw traffic, flow label 0x01234, hop limit 64
	r[48], r[49] = 0x20, 0x81                  // tclass, reversible, 1 path
	r[50], r[51] = 0xff, 0xff
	r[52], r[53] = 0x00, 0x03 // SL 3
	r[54], r[55], r[56], r[57] = 2<<6|3, 2<<6|16, 2<<6|18, 7
	paths, err := decodeQueryPath(b)
	if err != nil || len(paths) != 1 {
		t.Fatalf("%d paths, %v", len(paths), err)
	}
	want := PathRecord{Flags: PathGMP | PathPrimary | PathBidirectional, DGID: d, SGID: s, RawTraffic: true, FlowLabel: 0x1234,
		HopLimit: 64, TrafficClass: 0x20, Reversible: true, NumbPath: 1, PKey: 0xffff, SL: 3, MTUSelector: 2, MTU: 3,
		RateSelector: 2, Rate: 16, PacketLifeTimeSelector: 2, PacketLifeTime: 18, Preference: 7}
	if paths[0] != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", paths[0], want)
	}
	if got := packPath(want); string(got) != string(b[8:]) {
		t.Errorf("packPath disagrees with the hand-made bytes:\n%x\n%x", got, b[8:])
	}
	if _, err := decodeQueryPath(b[:8+pathRecDataSize-1]); err == nil {
		t.Error("a truncated record decoded")
	}
}

func FuzzDecodeQueryPath(f *testing.F) {
	one := append(make([]byte, 8), packPath(PathRecord{PKey: 0xffff, MTU: 3, Reversible: true, NumbPath: 1})...)
	binary.NativeEndian.PutUint32(one, 1)
	f.Add(one)
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		paths, err := decodeQueryPath(b)
		if err != nil {
			return
		}
		if 8+len(paths)*pathRecDataSize > len(b) {
			t.Fatalf("%d paths from %d bytes", len(paths), len(b))
		}
		for i, p := range paths {
			// Every field decoded packs back to the bytes it came from
			// (the reserved bits aside).
			got := packPath(p)
			in := b[8+i*pathRecDataSize : 8+(i+1)*pathRecDataSize]
			back, err := decodePathRecord(got)
			if err != nil || back != p {
				t.Fatalf("path %d: %+v → %+v, %v", i, p, back, err)
			}
			if string(got[8:52]) != string(in[8:52]) && in[8+44]&0x70 == 0 {
				t.Fatalf("path %d: packed %x from %x", i, got, in)
			}
		}
	})
}

func FuzzParseSockaddrIB(f *testing.F) {
	b := make([]byte, sizeofSockaddrIB)
	binary.NativeEndian.PutUint16(b, 27) // AF_IB
	binary.BigEndian.PutUint16(b[2:], 0xffff)
	binary.BigEndian.PutUint64(b[24:], 0x01060000|7174)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseSockaddrIB(b)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes.
		if out := make([]byte, sizeofSockaddrIB); putSockaddrIB(out, a) != sizeofSockaddrIB || string(out) != string(b[:sizeofSockaddrIB]) {
			t.Fatalf("%x → %+v → %x", b[:sizeofSockaddrIB], a, out)
		}
		if binary.BigEndian.Uint64(b[24:]) != a.SID || binary.BigEndian.Uint16(b[2:]) != a.PKey || string(b[8:24]) != string(a.GID[:]) {
			t.Fatalf("%x → %+v", b[:sizeofSockaddrIB], a)
		}
	})
}
