package uverbs

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"
)

// Fuzzers for every decoder of device discovery: netlink messages,
// attributes, the three nldev replies, NLMSG_ERROR, whole exchanges, and
// the sysfs value parsers. Each asserts no panic and, where the decoder has
// an inverse, a round trip.

// seedDatagrams are answers recorded from the real kernel (6.1 in the rig).
func seedDatagrams(f *testing.F) [][]byte {
	b, err := testdata.ReadFile("testdata/discovery/netlink/rig-6.1.nlrec")
	if err != nil {
		f.Fatal(err)
	}
	recs, err := parseRecording(b)
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, r := range recs {
		if r.kind == 'R' {
			out = append(out, r.b)
		}
	}
	return out
}

// seedPayloads are the payloads (attributes) of the recorded messages.
func seedPayloads(f *testing.F) [][]byte {
	var out [][]byte
	for _, d := range seedDatagrams(f) {
		msgs, err := parseNLMessages(d)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range msgs {
			out = append(out, m.Data)
		}
	}
	return out
}

func FuzzParseNLMessages(f *testing.F) {
	for _, d := range seedDatagrams(f) {
		f.Add(d)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add(encodeMsg(nlmsgDone, 0, 1, nil)[:15])
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := parseNLMessages(b)
		if err != nil {
			return
		}
		var re []byte
		for _, m := range msgs {
			if int(m.Header.Len) != 16+len(m.Data) {
				t.Fatalf("header length %d, data %d", m.Header.Len, len(m.Data))
			}
			e := encodeMsg(m.Header.Type, m.Header.Flags, m.Header.Seq, m.Data)
			nlEndian.PutUint32(e[12:16], m.Header.PID)
			re = append(re, e...)
		}
		again, err := parseNLMessages(re)
		if err != nil || !reflect.DeepEqual(normMsgs(again), normMsgs(msgs)) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, again, msgs)
		}
	})
}

func normMsgs(ms []nlMessage) []nlMessage {
	out := make([]nlMessage, len(ms))
	for i, m := range ms {
		out[i] = nlMessage{m.Header, append([]byte{}, m.Data...)}
	}
	return out
}

func FuzzParseNLAttrs(f *testing.F) {
	for _, p := range seedPayloads(f) {
		f.Add(p)
	}
	f.Add([]byte{4, 0, 0, 0})
	f.Add([]byte{5, 0, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		attrs, err := parseNLAttrs(b)
		if err != nil {
			return
		}
		var ta []tAttr
		for _, a := range attrs {
			if a.Type&^rdmaNLATypeMask != 0 {
				t.Fatalf("type %#x keeps flag bits", a.Type)
			}
			ta = append(ta, tAttr{a.Type, a.Data})
		}
		again, err := parseNLAttrs(encodeAttrs(ta...))
		if err != nil || len(again) != len(attrs) {
			t.Fatalf("round trip: %v, %d attrs, want %d", err, len(again), len(attrs))
		}
		for i := range again {
			if again[i].Type != attrs[i].Type || !bytes.Equal(again[i].Data, attrs[i].Data) {
				t.Fatalf("attr %d: %+v, want %+v", i, again[i], attrs[i])
			}
		}
		// The typed getters never panic, whatever the sizes.
		s := newNLAttrSet(attrs)
		for _, a := range attrs {
			s.u8(a.Type)
			s.u32(a.Type)
			s.u64(a.Type)
			s.uint(a.Type)
			s.str(a.Type)
		}
	})
}

func encodeNLDevice(d nlDevice) []byte {
	return encodeAttrs(tU32(rdmaNldevAttrDevIndex, d.Index), tStr(rdmaNldevAttrDevName, d.Name),
		tU32(rdmaNldevAttrPortIndex, d.Ports), tStr(rdmaNldevAttrFWVersion, d.FWVersion), tPad(),
		tU64(rdmaNldevAttrNodeGUID, d.NodeGUID), tU64(rdmaNldevAttrSysImageGUID, d.SysImageGUID),
		tU8(rdmaNldevAttrDevNodeType, d.NodeType), tStr(rdmaNldevAttrDevProtocol, d.Protocol))
}

func FuzzDecodeNLDevice(f *testing.F) {
	for _, p := range seedPayloads(f) {
		f.Add(p)
	}
	f.Add(encodeNLDevice(nlDevice{Index: 7, Name: "mlx5_0", Ports: 2, NodeGUID: 0x0002c90300498f20, NodeType: 1, FWVersion: "16.35.2000"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeNLDevice(b)
		if err != nil {
			return
		}
		if d.Name == "" {
			t.Fatal("empty name accepted")
		}
		again, err := decodeNLDevice(encodeNLDevice(d))
		if err != nil || again != d {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, again, d)
		}
	})
}

func encodeNLChardev(c nlChardev) []byte {
	attrs := []tAttr{tU64(rdmaNldevAttrChardev, c.Dev), tU64(rdmaNldevAttrChardevABI, c.ABI), tStr(rdmaNldevAttrChardevName, c.Name)}
	if c.HasDriverID {
		attrs = append(attrs, tU32(rdmaNldevAttrUverbsDriverID, c.DriverID))
	}
	return encodeAttrs(attrs...)
}

func FuzzDecodeNLChardev(f *testing.F) {
	for _, p := range seedPayloads(f) {
		f.Add(p)
	}
	f.Add(encodeNLChardev(nlChardev{Dev: hugeEncodeDev(231, 192), ABI: 1, Name: "uverbs0", DriverID: 1, HasDriverID: true}))
	f.Add(encodeAttrs(tU64(72, 1), tU64(71, 1), tStr(70, "uverbs0"), tU64(73, 14)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeNLChardev(b)
		if err != nil {
			return
		}
		if !validName(c.Name) {
			t.Fatalf("name %q accepted", c.Name)
		}
		again, err := decodeNLChardev(encodeNLChardev(c))
		if err != nil || again != c {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, again, c)
		}
	})
}

func FuzzDecodeNLPort(f *testing.F) {
	for _, p := range seedPayloads(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeNLPort(b)
		if err != nil {
			return
		}
		enc := encodeAttrs(tU32(rdmaNldevAttrPortIndex, p.Port), tU32(rdmaNldevAttrNdevIndex, p.NetdevIndex),
			tStr(rdmaNldevAttrNdevName, p.Netdev))
		again, err := decodeNLPort(enc)
		if err != nil || again != p {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, again, p)
		}
	})
}

func FuzzParseNLError(f *testing.F) {
	req := newNLRequest(rdmaNldevPortGetType, nlmFRequest|nlmFAck, 3)
	req.u32(rdmaNldevAttrDevIndex, 1)
	rb := req.bytes()
	for _, e := range []struct {
		errno unix.Errno
		msg   string
	}{{0, ""}, {unix.EINVAL, ""}, {unix.EPERM, "Operation needs CAP_NET_ADMIN"}} {
		m := encodeErr(rb, 3, e.errno, e.msg)
		f.Add(m[16:], nlEndian.Uint16(m[6:8]))
	}
	f.Add([]byte{0, 0, 0, 0x80}, uint16(0x300))
	f.Fuzz(func(t *testing.T, b []byte, flags uint16) {
		e, err := parseNLError(b, flags)
		if err != nil || e == nil {
			return
		}
		if e.Errno == 0 || !errors.Is(e, e.Errno) || e.Error() == "" {
			t.Fatalf("error %#v", e)
		}
	})
}

// splitChunks cuts b into datagrams at each "\xff\xfe" marker, so one fuzz
// input scripts a whole conversation.
func splitChunks(b []byte) [][]byte { return bytes.Split(b, []byte{0xff, 0xfe}) }

func FuzzNLExchange(f *testing.F) {
	f.Add(bytes.Join(seedDatagrams(f), []byte{0xff, 0xfe}), uint8(0))
	f.Add([]byte{}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, op uint8) {
		st := &scriptTransport{answers: splitChunks(b)}
		c := newNLClient(st)
		switch op % 3 {
		case 0:
			c.getDevices()
		case 1:
			c.getChardev(1)
		case 2:
			c.getPort(1, 1)
		}
	})
}

// FuzzNetlinkDevices runs the whole netlink discovery on scripted answers
// (seeded with the real kernel's) over the rig-like sysfs tree.
func FuzzNetlinkDevices(f *testing.F) {
	f.Add(bytes.Join(seedDatagrams(f), []byte{0xff, 0xfe}))
	f.Fuzz(func(t *testing.T, b []byte) {
		st := &scriptTransport{answers: splitChunks(b)}
		d := discovery{sys: sysfsReader{fsys: rigSysfs()}, dial: func() (nlTransport, error) { return st, nil }}
		devs, err := d.netlinkDevices()
		if err != nil {
			return
		}
		for i, dev := range devs {
			if !validName(dev.Name) || !validName(dev.UverbsName) || dev.CharDev != "/dev/infiniband/"+dev.UverbsName {
				t.Fatalf("device %+v", dev)
			}
			if len(dev.Ports) > maxPorts || dev.Source != "netlink" || dev.Transport != dev.NodeType.transport() {
				t.Fatalf("device %+v", dev)
			}
			if i > 0 && devs[i-1].Index > dev.Index {
				t.Fatalf("not in index order")
			}
		}
	})
}

func FuzzParseGUID(f *testing.F) {
	for _, s := range []string{"0002:c903:0049:8f20", "5054:00ff:fe12:3456", "0:0:0:0", "ffff:ffff:ffff:ffff", "0002:c903:0049", "::::"} {
		f.Add(s, uint64(0x0002c90300498f20))
	}
	f.Fuzz(func(t *testing.T, s string, g uint64) {
		if v, err := parseGUID(s); err == nil {
			if w, err := parseGUID(formatGUID(v)); err != nil || w != v {
				t.Fatalf("%q → %#x → %q → %#x, %v", s, v, formatGUID(v), w, err)
			}
			if !strings.EqualFold(strings.ReplaceAll(formatGUID(v), "0", ""), strings.ReplaceAll(s, "0", "")) {
				t.Fatalf("%q printed back as %q", s, formatGUID(v))
			}
		}
		fg := formatGUID(g)
		if v, err := parseGUID(fg); err != nil || v != g || len(fg) != 19 {
			t.Fatalf("%#x → %q → %#x, %v", g, fg, v, err)
		}
	})
}

func FuzzParseNodeType(f *testing.F) {
	for _, s := range []string{"1: CA", "2: switch", "4: RNIC", "7: unspecified", "300: x", "CA", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nt, err := parseNodeType(s)
		if err != nil {
			return
		}
		if again, err := parseNodeType(fmt.Sprintf("%d: %s", nt, nt)); err != nil || again != nt {
			t.Fatalf("%q → %d → %d, %v", s, nt, again, err)
		}
		_ = nt.String() + nt.transport().String()
	})
}

func FuzzParseSysfsInt(f *testing.F) {
	for _, s := range []string{"6", "2", " 1", "-1", "2147483648", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSysfsInt(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("%q → %d", s, v)
		}
		if again, err := parseSysfsInt(strconv.Itoa(v)); err != nil || again != v {
			t.Fatalf("%q → %d → %d, %v", s, v, again, err)
		}
	})
}

func FuzzParseDevNumber(f *testing.F) {
	for _, s := range []string{"231:192", "0:0", "4294967295:1", "231", ":", "1:-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ma, mi, err := parseDevNumber(s)
		if err != nil {
			return
		}
		if a, b, err := parseDevNumber(fmt.Sprintf("%d:%d", ma, mi)); err != nil || a != ma || b != mi {
			t.Fatalf("%q → %d:%d → %d:%d, %v", s, ma, mi, a, b, err)
		}
	})
}

func FuzzHugeDev(f *testing.F) {
	f.Add(uint32(231), uint32(192), uint64(0xe7c0))
	f.Add(uint32(0xfff), uint32(0xfffff), ^uint64(0))
	f.Fuzz(func(t *testing.T, major, minor uint32, v uint64) {
		major &= 0xfff // the kernel's 12-bit major, 20-bit minor
		minor &= 0xfffff
		if a, b := hugeDecodeDev(hugeEncodeDev(major, minor)); a != major || b != minor {
			t.Fatalf("%d:%d → %#x → %d:%d", major, minor, hugeEncodeDev(major, minor), a, b)
		}
		a, b := hugeDecodeDev(v)
		if a > 0xfff || b > 0xfffff {
			t.Fatalf("%#x → %d:%d out of range", v, a, b)
		}
	})
}

func FuzzParseIndexedName(f *testing.F) {
	for _, s := range []string{"uverbs0", "uverbs12", "uverbs", "uverbs01", "uverbs+1", "abi_version", "1", "10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, prefix := range []string{"uverbs", ""} {
			n, ok := parseIndexedName(s, prefix)
			if ok && (n < 0 || prefix+strconv.Itoa(n) != s) {
				t.Fatalf("%q (prefix %q) → %d", s, prefix, n)
			}
		}
	})
}

// FuzzSysfsDevices runs sysfs discovery over the rig-like tree with
// fuzzed values in the files it parses.
func FuzzSysfsDevices(f *testing.F) {
	f.Add("1: CA", "5054:00ff:fe12:3456", "231:192", "2", "rxe0", "eth0", "6", "1")
	f.Add("4: RNIC", "", "x", "", "..", "../../x", "", "")
	f.Fuzz(func(t *testing.T, nodeType, guid, dev, abi, ibdev, ndev, core, ifindex string) {
		m := rigSysfs()
		set := func(p, v string) { m[p] = &fstest.MapFile{Data: []byte(v + "\n")} }
		set("class/infiniband/rxe0/node_type", nodeType)
		set("class/infiniband/rxe0/node_guid", guid)
		set("class/infiniband_verbs/uverbs0/dev", dev)
		set("class/infiniband_verbs/uverbs0/abi_version", abi)
		set("class/infiniband_verbs/uverbs2/ibdev", ibdev)
		set("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", ndev)
		set("class/infiniband/rxe0/parent", ndev)
		set("class/infiniband_verbs/abi_version", core)
		set("class/net/eth0/ifindex", ifindex)
		devs, err := sysfsReader{fsys: m}.devices()
		if err != nil {
			return
		}
		for _, d := range devs {
			if !validName(d.Name) || d.Source != "sysfs" || d.Transport != d.NodeType.transport() {
				t.Fatalf("device %+v", d)
			}
			for _, p := range d.Ports {
				if p.Netdev != "" && !validName(p.Netdev) {
					t.Fatalf("netdev %q", p.Netdev)
				}
			}
		}
	})
}
