package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// ---- a small test encoder for netlink messages --------------------------------

type tAttr struct {
	typ  uint16
	data []byte
}

func tU8(t uint16, v uint8) tAttr { return tAttr{t, []byte{v}} }
func tU32(t uint16, v uint32) tAttr {
	b := make([]byte, 4)
	nlEndian.PutUint32(b, v)
	return tAttr{t, b}
}
func tU64(t uint16, v uint64) tAttr {
	b := make([]byte, 8)
	nlEndian.PutUint64(b, v)
	return tAttr{t, b}
}
func tStr(t uint16, s string) tAttr { return tAttr{t, append([]byte(s), 0)} }
func tPad() tAttr                   { return tAttr{rdmaNldevAttrPad, nil} }

func encodeAttrs(attrs ...tAttr) []byte {
	var b []byte
	for _, a := range attrs {
		var h [4]byte
		nlEndian.PutUint16(h[0:2], uint16(4+len(a.data)))
		nlEndian.PutUint16(h[2:4], a.typ)
		b = append(b, h[:]...)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	return b
}

func encodeMsg(typ, flags uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, 16, 16+len(payload)+3)
	nlEndian.PutUint32(b[0:4], uint32(16+len(payload)))
	nlEndian.PutUint16(b[4:6], typ)
	nlEndian.PutUint16(b[6:8], flags)
	nlEndian.PutUint32(b[8:12], seq)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// encodeErr builds an NLMSG_ERROR answering req with errno (0 = ACK) and,
// when msg is not empty, an extended-ack message TLV after the capped
// request header.
func encodeErr(req []byte, seq uint32, errno unix.Errno, msg string) []byte {
	p := make([]byte, 4)
	nlEndian.PutUint32(p, uint32(-int32(errno)))
	flags := uint16(0)
	if msg != "" {
		flags = nlmFCapped | nlmFAckTLVs
		p = append(p, req[:16]...)
		p = append(p, encodeAttrs(tStr(nlmsgerrAttrMsg, msg))...)
	} else {
		p = append(p, req...)
	}
	return encodeMsg(nlmsgError, flags, seq, p)
}

// ---- a fake kernel behind nlTransport ------------------------------------------

type fakeNLDev struct {
	nd       nlDevice
	chardev  *nlChardev // nil: no uverbs client (EOPNOTSUPP)
	ports    map[uint32]nlPort
	portErr  unix.Errno // returned by PORT_GET when not 0
	chardevE unix.Errno // returned by GET_CHARDEV when not 0
}

// fakeKernel answers RDMA netlink requests from a device table, the way
// 6.1's nldev.c does (reply types, NLM_F_MULTI, ACKs, errors).
type fakeKernel struct {
	devs      []fakeNLDev
	perDgram  int        // dump messages per datagram (0: all in one)
	dumpErr   unix.Errno // the dump fails with this
	queue     [][]byte
	requests  [][]byte
	sendErr   error
	extraJunk bool // put a stale reply (wrong seq) and a NOOP before each answer
}

func (k *fakeKernel) send(b []byte) error {
	if k.sendErr != nil {
		return k.sendErr
	}
	k.requests = append(k.requests, append([]byte(nil), b...))
	msgs, err := parseNLMessages(b)
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("fake kernel: bad request: %v", err)
	}
	m := msgs[0]
	seq := m.Header.Seq
	if k.extraJunk {
		k.queue = append(k.queue, append(encodeMsg(rdmaNldevGetType, 0, seq-1, nil), encodeMsg(nlmsgNoop, 0, seq, nil)...))
	}
	attrs, err := parseNLAttrs(m.Data)
	if err != nil {
		k.queue = append(k.queue, encodeErr(b, seq, unix.EINVAL, ""))
		return nil
	}
	s := newNLAttrSet(attrs)
	ack := m.Header.Flags&nlmFAck != 0
	reply := func(payload []byte) {
		d := encodeMsg(rdmaNldevGetType, 0, seq, payload)
		if ack {
			d = append(d, encodeErr(b, seq, 0, "")...)
		}
		k.queue = append(k.queue, d)
	}
	fail := func(e unix.Errno, msg string) { k.queue = append(k.queue, encodeErr(b, seq, e, msg)) }
	find := func() *fakeNLDev {
		idx, err := s.u32(rdmaNldevAttrDevIndex)
		if err != nil {
			return nil
		}
		for i := range k.devs {
			if k.devs[i].nd.Index == idx {
				return &k.devs[i]
			}
		}
		return nil
	}
	switch m.Header.Type {
	case rdmaNldevGetType:
		if m.Header.Flags&nlmFDump != nlmFDump {
			fail(unix.EOPNOTSUPP, "fake: only dumps")
			return nil
		}
		if k.dumpErr != 0 {
			fail(k.dumpErr, "")
			return nil
		}
		var d []byte
		for i, fd := range k.devs {
			nd := fd.nd
			attrs := []tAttr{
				tU32(rdmaNldevAttrDevIndex, nd.Index), tStr(rdmaNldevAttrDevName, nd.Name),
				tU32(rdmaNldevAttrPortIndex, nd.Ports), tU64(4, 0x1234), // CAP_FLAGS
			}
			if nd.FWVersion != "" {
				attrs = append(attrs, tStr(rdmaNldevAttrFWVersion, nd.FWVersion))
			}
			attrs = append(attrs, tPad(), tU64(rdmaNldevAttrNodeGUID, nd.NodeGUID),
				tU64(rdmaNldevAttrSysImageGUID, nd.SysImageGUID),
				tU8(rdmaNldevAttrDevNodeType, nd.NodeType), tU8(108, 0)) // DEV_DIM
			if nd.Protocol != "" {
				attrs = append(attrs, tStr(rdmaNldevAttrDevProtocol, nd.Protocol))
			}
			d = append(d, encodeMsg(rdmaNldevGetType, nlmFMulti, seq, encodeAttrs(attrs...))...)
			if k.perDgram > 0 && (i+1)%k.perDgram == 0 {
				k.queue = append(k.queue, d)
				d = nil
			}
		}
		d = append(d, encodeMsg(nlmsgDone, nlmFMulti, seq, []byte{0, 0, 0, 0})...)
		k.queue = append(k.queue, d)
	case rdmaNldevGetChardevType:
		typ, err := s.str(rdmaNldevAttrChardevType)
		if err != nil {
			fail(unix.EINVAL, "")
			return nil
		}
		dev := find()
		if dev == nil {
			fail(unix.EINVAL, "")
			return nil
		}
		if dev.chardevE != 0 {
			fail(dev.chardevE, "")
			return nil
		}
		if typ != "uverbs" || dev.chardev == nil {
			fail(unix.EOPNOTSUPP, "")
			return nil
		}
		c := dev.chardev
		var attrs []tAttr
		if c.HasDriverID {
			attrs = append(attrs, tU32(rdmaNldevAttrUverbsDriverID, c.DriverID))
		}
		attrs = append(attrs, tU64(rdmaNldevAttrChardev, c.Dev), tU64(rdmaNldevAttrChardevABI, c.ABI),
			tStr(rdmaNldevAttrChardevName, c.Name))
		reply(encodeAttrs(attrs...))
	case rdmaNldevPortGetType:
		dev := find()
		port, err := s.u32(rdmaNldevAttrPortIndex)
		if dev == nil || err != nil {
			fail(unix.EINVAL, "")
			return nil
		}
		if dev.portErr != 0 {
			fail(dev.portErr, "")
			return nil
		}
		p, ok := dev.ports[port]
		if !ok {
			fail(unix.EINVAL, "")
			return nil
		}
		attrs := []tAttr{tU32(rdmaNldevAttrDevIndex, dev.nd.Index), tStr(rdmaNldevAttrDevName, dev.nd.Name),
			tU32(rdmaNldevAttrPortIndex, port), tU8(12, 4), tU8(13, 5)}
		if p.Netdev != "" {
			attrs = append(attrs, tU32(rdmaNldevAttrNdevIndex, p.NetdevIndex), tStr(rdmaNldevAttrNdevName, p.Netdev))
		}
		reply(encodeAttrs(attrs...))
	default:
		fail(unix.EOPNOTSUPP, "")
	}
	return nil
}

func (k *fakeKernel) recv() ([]byte, error) {
	if len(k.queue) == 0 {
		return nil, fmt.Errorf("fake kernel: nothing to read: %w", unix.ETIMEDOUT)
	}
	b := k.queue[0]
	k.queue = k.queue[1:]
	return b, nil
}

func (k *fakeKernel) close() error { return nil }

// ---- recording and replaying real exchanges --------------------------------------

// An exchange recording is a sequence of records: one byte ('S' for a
// request sent, 'R' for a datagram received), a little-endian u32 length,
// the bytes.

type recordingTransport struct {
	t   nlTransport
	buf bytes.Buffer
}

func (r *recordingTransport) rec(kind byte, b []byte) {
	r.buf.WriteByte(kind)
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(b)))
	r.buf.Write(l[:])
	r.buf.Write(b)
}

func (r *recordingTransport) send(b []byte) error {
	r.rec('S', b)
	return r.t.send(b)
}

func (r *recordingTransport) recv() ([]byte, error) {
	b, err := r.t.recv()
	if err == nil {
		r.rec('R', b)
	}
	return b, err
}

func (r *recordingTransport) close() error { return r.t.close() }

type nlRecord struct {
	kind byte
	b    []byte
}

func parseRecording(b []byte) ([]nlRecord, error) {
	var out []nlRecord
	for len(b) > 0 {
		if len(b) < 5 {
			return nil, io.ErrUnexpectedEOF
		}
		k, l := b[0], binary.LittleEndian.Uint32(b[1:5])
		if (k != 'S' && k != 'R') || uint64(l) > uint64(len(b)-5) {
			return nil, fmt.Errorf("bad record %q/%d", k, l)
		}
		out = append(out, nlRecord{k, b[5 : 5+l]})
		b = b[5+l:]
	}
	return out, nil
}

// replayTransport plays a recording back: each request must equal the
// recorded one except for its sequence number, and the recorded answers are
// returned with their sequence numbers rewritten to the new request's.
type replayTransport struct {
	t       testing.TB
	recs    []nlRecord
	oldSeq  uint32
	newSeq  uint32
	matched int
}

func (r *replayTransport) send(b []byte) error {
	if len(r.recs) == 0 || r.recs[0].kind != 'S' {
		r.t.Errorf("replay: unexpected request % x", b)
		return unix.EIO
	}
	want := r.recs[0].b
	r.recs = r.recs[1:]
	if len(b) != len(want) || len(b) < 16 || !bytes.Equal(b[:8], want[:8]) || !bytes.Equal(b[12:], want[12:]) {
		r.t.Errorf("replay: request\n% x\nwant\n% x", b, want)
		return unix.EIO
	}
	r.oldSeq, r.newSeq = nlEndian.Uint32(want[8:12]), nlEndian.Uint32(b[8:12])
	r.matched++
	return nil
}

func (r *replayTransport) recv() ([]byte, error) {
	if len(r.recs) == 0 || r.recs[0].kind != 'R' {
		r.t.Errorf("replay: unexpected recv")
		return nil, unix.EIO
	}
	b := append([]byte(nil), r.recs[0].b...)
	r.recs = r.recs[1:]
	for off := 0; off+16 <= len(b); {
		l := int(nlEndian.Uint32(b[off : off+4]))
		if nlEndian.Uint32(b[off+8:off+12]) == r.oldSeq {
			nlEndian.PutUint32(b[off+8:off+12], r.newSeq)
		}
		if l < 16 {
			break
		}
		off += nlAlign(l)
	}
	return b, nil
}

func (r *replayTransport) close() error { return nil }

// ---- tests --------------------------------------------------------------------

func TestNLRequestEncoding(t *testing.T) {
	r := newNLRequest(rdmaNldevGetChardevType, nlmFRequest|nlmFAck, 7)
	r.u32(rdmaNldevAttrDevIndex, 3)
	r.str(rdmaNldevAttrChardevType, "uverbs")
	got := r.bytes()
	// Built by hand from rdma_netlink.h and netlink(7): header, then
	// {len 8, type 1, u32 3}, {len 11, type 69, "uverbs\0", 1 byte pad}.
	want := encodeMsg(5135, 0x5, 7, encodeAttrs(tU32(1, 3), tStr(69, "uverbs")))
	if !bytes.Equal(got, want) {
		t.Fatalf("request\n% x\nwant\n% x", got, want)
	}
	if len(got) != 16+8+12 {
		t.Fatalf("length %d, want 36", len(got))
	}
	if nlEndian.Uint16(got[16+8:]) != 11 {
		t.Errorf("string attribute length %d, want 11 (header + 6 + NUL, padding excluded)", nlEndian.Uint16(got[24:]))
	}
}

func TestMessageTypes(t *testing.T) {
	// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op), numbers from ABI-NOTES §2.
	for _, c := range []struct{ got, want uint16 }{
		{rdmaNldevGetType, 5121}, {rdmaNldevPortGetType, 5125}, {rdmaNldevGetChardevType, 5135},
	} {
		if c.got != c.want {
			t.Errorf("type %d, want %d", c.got, c.want)
		}
	}
}

func TestParseNLAttrsFlagsAndPad(t *testing.T) {
	b := encodeAttrs(tPad(), tAttr{rdmaNldevAttrDevIndex | nlaFNested | rdmaNLAFMandatory, []byte{1, 0, 0, 0}},
		tStr(rdmaNldevAttrDevName, "mlx5_0"), tU8(rdmaNldevAttrDevNodeType, 1))
	attrs, err := parseNLAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(attrs) != 4 || attrs[0].Type != 0 || attrs[1].Type != rdmaNldevAttrDevIndex {
		t.Fatalf("attrs %+v", attrs)
	}
	s := newNLAttrSet(attrs)
	if v, err := s.u32(rdmaNldevAttrDevIndex); err != nil || v != 1 {
		t.Errorf("u32 = %d, %v", v, err)
	}
	if v, err := s.str(rdmaNldevAttrDevName); err != nil || v != "mlx5_0" {
		t.Errorf("str = %q, %v", v, err)
	}
	if _, err := s.u64(rdmaNldevAttrDevIndex); err == nil {
		t.Errorf("u64 of a 4-byte attribute: no error")
	}
	if _, err := s.u8(rdmaNldevAttrNodeGUID); err == nil {
		t.Errorf("missing attribute: no error")
	}
	for _, bad := range [][]byte{{1}, {3, 0, 1, 0}, {9, 0, 1, 0, 1, 2, 3, 4}} {
		if _, err := parseNLAttrs(bad); !errors.Is(err, errNLTruncated) {
			t.Errorf("parseNLAttrs(% x) = %v, want truncated", bad, err)
		}
	}
}

func TestParseNLMessages(t *testing.T) {
	b := append(encodeMsg(rdmaNldevGetType, nlmFMulti, 1, encodeAttrs(tStr(2, "a"))),
		encodeMsg(nlmsgDone, nlmFMulti, 1, []byte{0, 0, 0, 0})...)
	msgs, err := parseNLMessages(b)
	if err != nil || len(msgs) != 2 || msgs[1].Header.Type != nlmsgDone || len(msgs[0].Data) != 8 {
		t.Fatalf("parseNLMessages = %+v, %v", msgs, err)
	}
	for _, bad := range [][]byte{b[:10], b[:20], {15, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := parseNLMessages(bad); err == nil {
			t.Errorf("parseNLMessages(% x): no error", bad)
		}
	}
}

func TestParseNLError(t *testing.T) {
	req := newNLRequest(rdmaNldevPortGetType, nlmFRequest|nlmFAck, 9).bytes()
	e, err := parseNLError(encodeErr(req, 9, unix.EPERM, "")[16:], 0)
	if err != nil || e == nil || !errors.Is(e, unix.EPERM) || e.Msg != "" {
		t.Fatalf("plain error: %v, %v", e, err)
	}
	msg := encodeErr(req, 9, unix.EINVAL, "Port index is invalid")
	e, err = parseNLError(msg[16:], nlEndian.Uint16(msg[6:8]))
	if err != nil || e == nil || !errors.Is(e, unix.EINVAL) || e.Msg != "Port index is invalid" {
		t.Fatalf("extended ack: %v, %v", e, err)
	}
	if e.Error() != "invalid argument (Port index is invalid)" {
		t.Errorf("Error() = %q", e.Error())
	}
	e, err = parseNLError(encodeErr(req, 9, 0, "")[16:], 0)
	if e != nil || err != nil {
		t.Fatalf("ACK: %v, %v", e, err)
	}
	if _, err := parseNLError([]byte{1, 2}, 0); err == nil {
		t.Errorf("short error: no error")
	}
}

func rigLikeKernel() *fakeKernel {
	dev := func(idx uint32, name string, guid uint64, nt uint8, drv uint32, abi uint64, minor uint32, nd string, ndi uint32) fakeNLDev {
		return fakeNLDev{
			nd:      nlDevice{Index: idx, Name: name, Ports: 1, NodeGUID: guid, SysImageGUID: guid, NodeType: nt, Protocol: "roce"},
			chardev: &nlChardev{Dev: hugeEncodeDev(231, minor), ABI: abi, Name: fmt.Sprintf("uverbs%d", minor-192), DriverID: drv, HasDriverID: true},
			ports:   map[uint32]nlPort{1: {Port: 1, Netdev: nd, NetdevIndex: ndi}},
		}
	}
	return &fakeKernel{devs: []fakeNLDev{
		dev(0, "rxe0", 0x505400fffe123456, 1, 14, 2, 192, "eth0", 2),
		dev(1, "siw0", 0x0cbaaffffe76ae48, 4, 18, 1, 193, "siwnet", 3),
		dev(2, "rxea", 0x108468fffe120156, 1, 14, 2, 194, "va", 5),
		dev(3, "rxeb", 0xdc06c9fffe11b1e2, 1, 14, 2, 195, "vb", 4),
	}}
}

func TestNLClientAgainstFakeKernel(t *testing.T) {
	for _, per := range []int{0, 1, 3} {
		for _, junk := range []bool{false, true} {
			k := rigLikeKernel()
			k.perDgram, k.extraJunk = per, junk
			c := newNLClient(k)
			devs, err := c.getDevices()
			if err != nil {
				t.Fatalf("per %d junk %v: %v", per, junk, err)
			}
			if len(devs) != 4 || devs[1].Name != "siw0" || devs[1].NodeType != 4 || devs[3].NodeGUID != 0xdc06c9fffe11b1e2 || devs[0].Protocol != "roce" {
				t.Fatalf("devices %+v", devs)
			}
			cd, err := c.getChardev(2)
			if err != nil || cd.Name != "uverbs2" || cd.ABI != 2 || !cd.HasDriverID || cd.DriverID != 14 {
				t.Fatalf("chardev %+v, %v", cd, err)
			}
			if ma, mi := hugeDecodeDev(cd.Dev); ma != 231 || mi != 194 {
				t.Errorf("chardev number %d:%d", ma, mi)
			}
			p, err := c.getPort(1, 1)
			if err != nil || p.Netdev != "siwnet" || p.NetdevIndex != 3 {
				t.Fatalf("port %+v, %v", p, err)
			}
			if _, err := c.getPort(1, 2); !errors.Is(err, unix.EINVAL) {
				t.Errorf("port 2: %v, want EINVAL", err)
			}
			if _, err := c.getChardev(99); !errors.Is(err, unix.EINVAL) {
				t.Errorf("chardev of index 99: %v, want EINVAL", err)
			}
		}
	}
}

func TestNLClientErrors(t *testing.T) {
	k := rigLikeKernel()
	k.dumpErr = unix.EPERM
	if _, err := newNLClient(k).getDevices(); !errors.Is(err, unix.EPERM) {
		t.Errorf("dump error: %v", err)
	}
	k = rigLikeKernel()
	k.sendErr = os.NewSyscallError("sendto", unix.ECONNREFUSED)
	if _, err := newNLClient(k).getDevices(); !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("send error: %v", err)
	}
	// NLMSG_DONE carrying an error (a dump that failed half way).
	done := &scriptTransport{answers: [][]byte{encodeMsg(nlmsgDone, nlmFMulti, 0, tU32(0, uint32(0xfffffff3)).data)}}
	if _, err := newNLClient(done).getDevices(); !errors.Is(err, unix.Errno(13)) {
		t.Errorf("DONE with -13: %v, want EACCES", err)
	}
	over := &scriptTransport{answers: [][]byte{encodeMsg(nlmsgOverrun, 0, 0, nil)}}
	if _, err := newNLClient(over).getDevices(); !errors.Is(err, unix.ENOBUFS) {
		t.Errorf("overrun: %v, want ENOBUFS", err)
	}
	bad := &scriptTransport{answers: [][]byte{{1, 2, 3}}}
	if _, err := newNLClient(bad).getDevices(); err == nil {
		t.Errorf("garbage datagram: no error")
	}
	// A device message without a required attribute.
	miss := &scriptTransport{answers: [][]byte{append(
		encodeMsg(rdmaNldevGetType, nlmFMulti, 0, encodeAttrs(tU32(1, 0), tStr(2, "x"))),
		encodeMsg(nlmsgDone, nlmFMulti, 0, []byte{0, 0, 0, 0})...)}}
	if _, err := newNLClient(miss).getDevices(); err == nil {
		t.Errorf("device without PORT_INDEX: no error")
	}
}

// scriptTransport answers every request with the next scripted datagram,
// its sequence numbers set to the request's.
type scriptTransport struct {
	answers [][]byte
	seq     uint32
}

func (s *scriptTransport) send(b []byte) error {
	if len(b) >= 12 {
		s.seq = nlEndian.Uint32(b[8:12])
	}
	return nil
}

func (s *scriptTransport) recv() ([]byte, error) {
	if len(s.answers) == 0 {
		return nil, unix.ETIMEDOUT
	}
	b := append([]byte(nil), s.answers[0]...)
	s.answers = s.answers[1:]
	for off := 0; off+16 <= len(b); {
		nlEndian.PutUint32(b[off+8:off+12], s.seq)
		l := int(nlEndian.Uint32(b[off : off+4]))
		if l < 16 {
			break
		}
		off += nlAlign(l)
	}
	return b, nil
}

func (s *scriptTransport) close() error { return nil }

func TestHugeDev(t *testing.T) {
	for _, c := range []struct {
		major, minor uint32
		enc          uint64
	}{
		{231, 192, 0xe7c0}, {8, 1, 0x801}, {231, 0x12345, 0x1230e745},
	} {
		if got := hugeEncodeDev(c.major, c.minor); got != c.enc {
			t.Errorf("encode(%d,%d) = %#x, want %#x", c.major, c.minor, got, c.enc)
		}
		if ma, mi := hugeDecodeDev(c.enc); ma != c.major || mi != c.minor {
			t.Errorf("decode(%#x) = %d,%d", c.enc, ma, mi)
		}
	}
}
