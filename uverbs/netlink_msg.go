package uverbs

// RDMA netlink (NETLINK_RDMA, the "nldev" client): the kernel's own list of
// RDMA devices, their uverbs character devices and the netdevs behind their
// ports. Messages are encoded and decoded here by hand (std lib and x/sys/unix
// only); the socket is reached through the small nlTransport interface so that
// tests can stand in for the kernel.
//
// Facts used (Linux 6.1 drivers/infiniband/core/{netlink,nldev}.c and
// include/uapi/rdma/rdma_netlink.h):
//   - message type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op) = 5<<10 + op;
//   - RDMA_NLDEV_CMD_GET dumps one message per device (NLM_F_MULTI, then
//     NLMSG_DONE) in kernel index order;
//   - RDMA_NLDEV_CMD_GET_CHARDEV needs CHARDEV_TYPE (NUL-terminated string) and,
//     for a per-device char dev, DEV_INDEX; it answers EOPNOTSUPP when the
//     device has no such client;
//   - RDMA_NLDEV_CMD_PORT_GET needs DEV_INDEX and PORT_INDEX; its reply carries
//     the message type of RDMA_NLDEV_CMD_GET, not PORT_GET;
//   - u64 attributes are put with nla_put_u64_64bit and may be preceded by a
//     RDMA_NLDEV_ATTR_PAD (type 0) attribute;
//   - NODE_GUID and SYS_IMAGE_GUID are in host byte order (be64_to_cpu of the
//     wire GUID); UVERBS_DRIVER_ID is put as a u32 although the uapi header
//     comment says u64; CHARDEV is the huge_encode_dev() form of the dev_t.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

var nlEndian = binary.NativeEndian // netlink headers and integers are host order

// nlHeader is struct nlmsghdr.
type nlHeader struct {
	Len   uint32
	Type  uint16
	Flags uint16
	Seq   uint32
	PID   uint32
}

// nlMessage is one netlink message: its header and the payload after it
// (Header.Len - 16 bytes, alignment padding excluded).
type nlMessage struct {
	Header nlHeader
	Data   []byte
}

// nlAttr is one netlink attribute; Type has the flag bits masked off.
type nlAttr struct {
	Type uint16
	Data []byte
}

var errNLTruncated = errors.New("truncated")

func nlAlign(n int) int { return (n + nlmsgAlign - 1) &^ (nlmsgAlign - 1) }

// parseNLMessages splits a datagram into netlink messages. It fails on a
// header whose length is shorter than a header or runs past the buffer;
// trailing bytes too short for a header are an error too.
func parseNLMessages(b []byte) ([]nlMessage, error) {
	var msgs []nlMessage
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return nil, fmt.Errorf("netlink: %d trailing bytes: %w", len(b), errNLTruncated)
		}
		h := nlHeader{
			Len:   nlEndian.Uint32(b[0:4]),
			Type:  nlEndian.Uint16(b[4:6]),
			Flags: nlEndian.Uint16(b[6:8]),
			Seq:   nlEndian.Uint32(b[8:12]),
			PID:   nlEndian.Uint32(b[12:16]),
		}
		if h.Len < nlmsgHdrLen || uint64(h.Len) > uint64(len(b)) {
			return nil, fmt.Errorf("netlink: message length %d of %d bytes: %w", h.Len, len(b), errNLTruncated)
		}
		msgs = append(msgs, nlMessage{Header: h, Data: b[nlmsgHdrLen:h.Len]})
		next := nlAlign(int(h.Len))
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return msgs, nil
}

// parseNLAttrs decodes a stream of attributes. Attribute types are masked
// with RDMA_NLA_TYPE_MASK; PAD attributes (type 0) are kept, callers skip them.
func parseNLAttrs(b []byte) ([]nlAttr, error) {
	var attrs []nlAttr
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return nil, fmt.Errorf("netlink attribute: %d trailing bytes: %w", len(b), errNLTruncated)
		}
		l := int(nlEndian.Uint16(b[0:2]))
		t := nlEndian.Uint16(b[2:4]) & rdmaNLATypeMask
		if l < nlaHdrLen || l > len(b) {
			return nil, fmt.Errorf("netlink attribute %d: length %d of %d bytes: %w", t, l, len(b), errNLTruncated)
		}
		attrs = append(attrs, nlAttr{Type: t, Data: b[nlaHdrLen:l]})
		next := nlAlign(l)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return attrs, nil
}

// nlAttrSet indexes attributes by type; the last occurrence wins, as with
// the kernel's nla_parse.
type nlAttrSet map[uint16][]byte

func newNLAttrSet(attrs []nlAttr) nlAttrSet {
	s := make(nlAttrSet, len(attrs))
	for _, a := range attrs {
		if a.Type == rdmaNldevAttrPad {
			continue
		}
		s[a.Type] = a.Data
	}
	return s
}

func (s nlAttrSet) has(t uint16) bool { _, ok := s[t]; return ok }

func (s nlAttrSet) u8(t uint16) (uint8, error) {
	d, ok := s[t]
	if !ok {
		return 0, fmt.Errorf("attribute %d missing", t)
	}
	if len(d) != 1 {
		return 0, fmt.Errorf("attribute %d: %d bytes, want u8", t, len(d))
	}
	return d[0], nil
}

func (s nlAttrSet) u32(t uint16) (uint32, error) {
	d, ok := s[t]
	if !ok {
		return 0, fmt.Errorf("attribute %d missing", t)
	}
	if len(d) != 4 {
		return 0, fmt.Errorf("attribute %d: %d bytes, want u32", t, len(d))
	}
	return nlEndian.Uint32(d), nil
}

func (s nlAttrSet) u64(t uint16) (uint64, error) {
	d, ok := s[t]
	if !ok {
		return 0, fmt.Errorf("attribute %d missing", t)
	}
	if len(d) != 8 {
		return 0, fmt.Errorf("attribute %d: %d bytes, want u64", t, len(d))
	}
	return nlEndian.Uint64(d), nil
}

// uint reads an unsigned attribute put as u32 or u64 (UVERBS_DRIVER_ID is
// documented as u64 and put as u32).
func (s nlAttrSet) uint(t uint16) (uint64, error) {
	d, ok := s[t]
	if !ok {
		return 0, fmt.Errorf("attribute %d missing", t)
	}
	switch len(d) {
	case 4:
		return uint64(nlEndian.Uint32(d)), nil
	case 8:
		return nlEndian.Uint64(d), nil
	}
	return 0, fmt.Errorf("attribute %d: %d bytes, want u32 or u64", t, len(d))
}

// str reads a string attribute: up to the first NUL (the kernel always puts
// one); a missing NUL is tolerated.
func (s nlAttrSet) str(t uint16) (string, error) {
	d, ok := s[t]
	if !ok {
		return "", fmt.Errorf("attribute %d missing", t)
	}
	if i := indexByte(d, 0); i >= 0 {
		d = d[:i]
	}
	return string(d), nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// nlError is the error carried by an NLMSG_ERROR (or a failed NLMSG_DONE):
// the errno and, when the kernel sent extended ack TLVs, its message.
type nlError struct {
	Errno unix.Errno
	Msg   string
}

func (e *nlError) Error() string {
	if e.Msg != "" {
		return e.Errno.Error() + " (" + e.Msg + ")"
	}
	return e.Errno.Error()
}

func (e *nlError) Unwrap() error { return e.Errno }

// parseNLError decodes the payload of an NLMSG_ERROR message with header
// flags flags. It returns nil for an ACK (error 0).
func parseNLError(data []byte, flags uint16) (*nlError, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("netlink error message: %d bytes: %w", len(data), errNLTruncated)
	}
	code := int32(nlEndian.Uint32(data[0:4]))
	if code == 0 {
		return nil, nil
	}
	e := &nlError{Errno: errnoOf(code)}
	if flags&nlmFAckTLVs == 0 {
		return e, nil
	}
	// The original request header (and its payload unless NLM_F_CAPPED)
	// follows, then the TLVs.
	rest := data[4:]
	if len(rest) < nlmsgHdrLen {
		return e, nil
	}
	skip := nlmsgHdrLen
	if flags&nlmFCapped == 0 {
		skip = int(nlEndian.Uint32(rest[0:4]))
		if skip < nlmsgHdrLen || skip > len(rest) {
			return e, nil
		}
		skip = nlAlign(skip)
		if skip > len(rest) {
			return e, nil
		}
	}
	attrs, err := parseNLAttrs(rest[skip:])
	if err != nil {
		return e, nil // the errno matters more than the diagnostics
	}
	for _, a := range attrs {
		if a.Type&^(nlaFNested|nlaFNetByteorder) == nlmsgerrAttrMsg {
			if i := indexByte(a.Data, 0); i >= 0 {
				e.Msg = string(a.Data[:i])
			} else {
				e.Msg = string(a.Data)
			}
		}
	}
	return e, nil
}

// errnoOf turns a netlink error code (a negative errno; some senders use a
// positive one) into an Errno.
func errnoOf(code int32) unix.Errno {
	if code < 0 {
		code = -code
	}
	if code < 0 { // math.MinInt32
		return unix.EINVAL
	}
	return unix.Errno(code)
}

// nlRequest builds one request message: a header then attributes.
type nlRequest struct {
	b []byte
}

func newNLRequest(typ, flags uint16, seq uint32) *nlRequest {
	r := &nlRequest{b: make([]byte, nlmsgHdrLen, 64)}
	nlEndian.PutUint16(r.b[4:6], typ)
	nlEndian.PutUint16(r.b[6:8], flags)
	nlEndian.PutUint32(r.b[8:12], seq)
	return r
}

func (r *nlRequest) attr(t uint16, data []byte) {
	l := nlaHdrLen + len(data)
	var h [nlaHdrLen]byte
	nlEndian.PutUint16(h[0:2], uint16(l))
	nlEndian.PutUint16(h[2:4], t)
	r.b = append(r.b, h[:]...)
	r.b = append(r.b, data...)
	for len(r.b)%nlmsgAlign != 0 {
		r.b = append(r.b, 0)
	}
}

func (r *nlRequest) u32(t uint16, v uint32) {
	var d [4]byte
	nlEndian.PutUint32(d[:], v)
	r.attr(t, d[:])
}

func (r *nlRequest) str(t uint16, s string) {
	r.attr(t, append([]byte(s), 0))
}

// bytes finishes the message (sets nlmsg_len) and returns it.
func (r *nlRequest) bytes() []byte {
	nlEndian.PutUint32(r.b[0:4], uint32(len(r.b)))
	return r.b
}
