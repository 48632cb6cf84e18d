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
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/abi"
)

// Netlink constants (from x/sys/unix) and RDMA netlink constants (from the
// generated abi/zconst.go), under short local names; the comment of each
// gives its C name.
const (
	netlinkRDMA = unix.NETLINK_RDMA // NETLINK_RDMA (20)

	nlmsgHdrLen = unix.NLMSG_HDRLEN  // NLMSG_HDRLEN, sizeof(struct nlmsghdr)
	nlaHdrLen   = unix.NLA_HDRLEN    // NLA_HDRLEN, sizeof(struct nlattr)
	nlmsgAlign  = unix.NLMSG_ALIGNTO // NLMSG_ALIGNTO (= NLA_ALIGNTO)

	nlmsgNoop    = unix.NLMSG_NOOP    // NLMSG_NOOP
	nlmsgError   = unix.NLMSG_ERROR   // NLMSG_ERROR
	nlmsgDone    = unix.NLMSG_DONE    // NLMSG_DONE
	nlmsgOverrun = unix.NLMSG_OVERRUN // NLMSG_OVERRUN

	nlmFRequest = unix.NLM_F_REQUEST  // NLM_F_REQUEST
	nlmFMulti   = unix.NLM_F_MULTI    // NLM_F_MULTI
	nlmFAck     = unix.NLM_F_ACK      // NLM_F_ACK
	nlmFDump    = unix.NLM_F_DUMP     // NLM_F_DUMP (NLM_F_ROOT|NLM_F_MATCH)
	nlmFCapped  = unix.NLM_F_CAPPED   // NLM_F_CAPPED (in NLMSG_ERROR)
	nlmFAckTLVs = unix.NLM_F_ACK_TLVS // NLM_F_ACK_TLVS (in NLMSG_ERROR)

	nlaFNested        = unix.NLA_F_NESTED        // NLA_F_NESTED
	nlaFNetByteorder  = unix.NLA_F_NET_BYTEORDER // NLA_F_NET_BYTEORDER
	rdmaNLAFMandatory = abi.RDMA_NLA_F_MANDATORY // RDMA_NLA_F_MANDATORY
	// RDMA_NLA_TYPE_MASK: the attribute type with the flag bits removed.
	rdmaNLATypeMask = uint16(abi.RDMA_NLA_TYPE_MASK & 0xffff)

	nlmsgerrAttrMsg = unix.NLMSGERR_ATTR_MSG // NLMSGERR_ATTR_MSG

	rdmaNLNldev = abi.RDMA_NL_NLDEV // RDMA_NL_NLDEV (5)

	rdmaNldevCmdGet        = abi.RDMA_NLDEV_CMD_GET         // 1
	rdmaNldevCmdPortGet    = abi.RDMA_NLDEV_CMD_PORT_GET    // 5
	rdmaNldevCmdGetChardev = abi.RDMA_NLDEV_CMD_GET_CHARDEV // 15

	// Attribute types and, as 6.1's nldev.c puts them, their payloads.
	rdmaNldevAttrPad            = abi.RDMA_NLDEV_ATTR_PAD              // 0
	rdmaNldevAttrDevIndex       = abi.RDMA_NLDEV_ATTR_DEV_INDEX        // 1, u32
	rdmaNldevAttrDevName        = abi.RDMA_NLDEV_ATTR_DEV_NAME         // 2, string
	rdmaNldevAttrPortIndex      = abi.RDMA_NLDEV_ATTR_PORT_INDEX       // 3, u32 (the port count in CMD_GET)
	rdmaNldevAttrFWVersion      = abi.RDMA_NLDEV_ATTR_FW_VERSION       // 5, string (absent when empty)
	rdmaNldevAttrNodeGUID       = abi.RDMA_NLDEV_ATTR_NODE_GUID        // 6, u64, host order
	rdmaNldevAttrSysImageGUID   = abi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID   // 7, u64, host order
	rdmaNldevAttrDevNodeType    = abi.RDMA_NLDEV_ATTR_DEV_NODE_TYPE    // 14, u8
	rdmaNldevAttrNdevIndex      = abi.RDMA_NLDEV_ATTR_NDEV_INDEX       // 50, u32
	rdmaNldevAttrNdevName       = abi.RDMA_NLDEV_ATTR_NDEV_NAME        // 51, string
	rdmaNldevAttrDevProtocol    = abi.RDMA_NLDEV_ATTR_DEV_PROTOCOL     // 67, string
	rdmaNldevAttrChardevType    = abi.RDMA_NLDEV_ATTR_CHARDEV_TYPE     // 69, string
	rdmaNldevAttrChardevName    = abi.RDMA_NLDEV_ATTR_CHARDEV_NAME     // 70, string
	rdmaNldevAttrChardevABI     = abi.RDMA_NLDEV_ATTR_CHARDEV_ABI      // 71, u64
	rdmaNldevAttrChardev        = abi.RDMA_NLDEV_ATTR_CHARDEV          // 72, u64, huge_encode_dev
	rdmaNldevAttrUverbsDriverID = abi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID // 73, u32 on the wire
)

// rdmaNLGetType is RDMA_NL_GET_TYPE(client, op).
func rdmaNLGetType(client, op uint16) uint16 { return client<<10 + op }

// Message types of the three requests discovery makes.
var (
	rdmaNldevGetType        = rdmaNLGetType(rdmaNLNldev, rdmaNldevCmdGet)        // 5121
	rdmaNldevPortGetType    = rdmaNLGetType(rdmaNLNldev, rdmaNldevCmdPortGet)    // 5125
	rdmaNldevGetChardevType = rdmaNLGetType(rdmaNLNldev, rdmaNldevCmdGetChardev) // 5135
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

// nlTransport is a connected NETLINK_RDMA socket, or a test's stand-in.
type nlTransport interface {
	// send writes one request to the kernel.
	send(b []byte) error
	// recv reads one datagram from the kernel.
	recv() ([]byte, error)
	close() error
}

// nlSocket is the real transport.
type nlSocket struct {
	fd  int
	buf []byte
}

// nlRecvTimeout bounds each receive so that a kernel that never answers
// cannot hang discovery.
const nlRecvTimeout = 10 * time.Second

func dialNetlink() (nlTransport, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, netlinkRDMA)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	// Extended acks add the kernel's error text to NLMSG_ERROR; older
	// kernels reject the option, which is harmless.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	tv := unix.NsecToTimeval(nlRecvTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt SO_RCVTIMEO", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	return &nlSocket{fd: fd, buf: make([]byte, 64<<10)}, nil
}

func (s *nlSocket) send(b []byte) error {
	for {
		err := unix.Sendto(s.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("sendto", err)
		}
		return nil
	}
}

func (s *nlSocket) recv() ([]byte, error) {
	for {
		n, _, rflags, from, err := unix.Recvmsg(s.fd, s.buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return nil, fmt.Errorf("recvmsg: no answer from the kernel in %v: %w", nlRecvTimeout, unix.ETIMEDOUT)
		}
		if err != nil {
			return nil, os.NewSyscallError("recvmsg", err)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); ok && sa.Pid != 0 {
			continue // not from the kernel
		}
		if rflags&unix.MSG_TRUNC != 0 {
			return nil, fmt.Errorf("recvmsg: datagram larger than %d bytes: %w", len(s.buf), unix.EMSGSIZE)
		}
		out := make([]byte, n)
		copy(out, s.buf[:n])
		return out, nil
	}
}

func (s *nlSocket) close() error { return unix.Close(s.fd) }

// nlClient runs request/response exchanges over a transport.
type nlClient struct {
	t   nlTransport
	seq uint32
}

var nlSeqBase atomic.Uint32

func newNLClient(t nlTransport) *nlClient {
	// Distinct sequence numbers per client make stale replies recognisable.
	return &nlClient{t: t, seq: nlSeqBase.Add(1000)}
}

// exchange sends a request and collects the reply messages of its sequence
// number. A dump ends with NLMSG_DONE; a plain request is sent with NLM_F_ACK
// and ends with the ACK, so both yield every data message and then stop.
func (c *nlClient) exchange(typ uint16, dump bool, fill func(*nlRequest)) ([]nlMessage, error) {
	c.seq++
	seq := c.seq
	flags := uint16(nlmFRequest)
	if dump {
		flags |= nlmFDump
	} else {
		flags |= nlmFAck
	}
	req := newNLRequest(typ, flags, seq)
	if fill != nil {
		fill(req)
	}
	if err := c.t.send(req.bytes()); err != nil {
		return nil, err
	}
	var out []nlMessage
	for {
		b, err := c.t.recv()
		if err != nil {
			return nil, err
		}
		msgs, err := parseNLMessages(b)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // a stale reply to an earlier request
			}
			switch m.Header.Type {
			case nlmsgNoop:
				continue
			case nlmsgOverrun:
				return nil, fmt.Errorf("netlink overrun: %w", unix.ENOBUFS)
			case nlmsgError:
				e, perr := parseNLError(m.Data, m.Header.Flags)
				if perr != nil {
					return nil, perr
				}
				if e != nil {
					return nil, e
				}
				return out, nil // the ACK
			case nlmsgDone:
				if len(m.Data) >= 4 {
					if code := int32(nlEndian.Uint32(m.Data[0:4])); code != 0 {
						return nil, &nlError{Errno: errnoOf(code)}
					}
				}
				return out, nil
			}
			out = append(out, m)
		}
	}
}

// nlDevice is what RDMA_NLDEV_CMD_GET says about one device.
type nlDevice struct {
	Index        uint32
	Name         string
	Ports        uint32
	NodeGUID     uint64
	SysImageGUID uint64
	NodeType     uint8
	FWVersion    string
	Protocol     string
}

// decodeNLDevice decodes the attributes of one RDMA_NLDEV_CMD_GET reply.
// DEV_INDEX, DEV_NAME, PORT_INDEX, NODE_GUID and DEV_NODE_TYPE are required
// (as rdma-core requires them); the rest is optional.
func decodeNLDevice(data []byte) (nlDevice, error) {
	attrs, err := parseNLAttrs(data)
	if err != nil {
		return nlDevice{}, err
	}
	s := newNLAttrSet(attrs)
	var d nlDevice
	if d.Index, err = s.u32(rdmaNldevAttrDevIndex); err != nil {
		return d, err
	}
	if d.Name, err = s.str(rdmaNldevAttrDevName); err != nil {
		return d, err
	}
	if d.Name == "" {
		return d, errors.New("empty device name")
	}
	if d.Ports, err = s.u32(rdmaNldevAttrPortIndex); err != nil {
		return d, err
	}
	if d.NodeGUID, err = s.u64(rdmaNldevAttrNodeGUID); err != nil {
		return d, err
	}
	if d.NodeType, err = s.u8(rdmaNldevAttrDevNodeType); err != nil {
		return d, err
	}
	if s.has(rdmaNldevAttrSysImageGUID) {
		if d.SysImageGUID, err = s.u64(rdmaNldevAttrSysImageGUID); err != nil {
			return d, err
		}
	}
	if s.has(rdmaNldevAttrFWVersion) {
		d.FWVersion, _ = s.str(rdmaNldevAttrFWVersion)
	}
	if s.has(rdmaNldevAttrDevProtocol) {
		d.Protocol, _ = s.str(rdmaNldevAttrDevProtocol)
	}
	return d, nil
}

// nlChardev is what RDMA_NLDEV_CMD_GET_CHARDEV says about a device's uverbs
// character device.
type nlChardev struct {
	Dev         uint64 // huge_encode_dev form
	ABI         uint64
	Name        string
	DriverID    uint32
	HasDriverID bool
}

// decodeNLChardev decodes a GET_CHARDEV reply. CHARDEV, CHARDEV_ABI and
// CHARDEV_NAME are required; UVERBS_DRIVER_ID is absent for drivers that set
// uverbs_no_driver_id_binding (mthca and hns in 6.1).
func decodeNLChardev(data []byte) (nlChardev, error) {
	attrs, err := parseNLAttrs(data)
	if err != nil {
		return nlChardev{}, err
	}
	s := newNLAttrSet(attrs)
	var c nlChardev
	if c.Dev, err = s.u64(rdmaNldevAttrChardev); err != nil {
		return c, err
	}
	if c.ABI, err = s.u64(rdmaNldevAttrChardevABI); err != nil {
		return c, err
	}
	if c.Name, err = s.str(rdmaNldevAttrChardevName); err != nil {
		return c, err
	}
	if c.Name == "" || strings.ContainsRune(c.Name, '/') || c.Name == "." || c.Name == ".." {
		return c, fmt.Errorf("bad char device name %q", c.Name)
	}
	if s.has(rdmaNldevAttrUverbsDriverID) {
		v, err := s.uint(rdmaNldevAttrUverbsDriverID)
		if err != nil {
			return c, err
		}
		if v > 0xffffffff {
			return c, fmt.Errorf("driver id %d out of range", v)
		}
		c.DriverID, c.HasDriverID = uint32(v), true
	}
	return c, nil
}

// hugeDecodeDev splits the kernel's huge_encode_dev() form of a dev_t into
// major and minor (as rdma-core's ibdev_nl.c does).
func hugeDecodeDev(v uint64) (major, minor uint32) {
	major = uint32((v & 0xfff00) >> 8)
	minor = uint32((v & 0xff) | ((v >> 12) & 0xfff00))
	return major, minor
}

// hugeEncodeDev is the inverse of hugeDecodeDev for 12-bit majors and 20-bit
// minors (the kernel's huge_encode_dev).
func hugeEncodeDev(major, minor uint32) uint64 {
	return uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12
}

// nlPort is what RDMA_NLDEV_CMD_PORT_GET says about one port.
type nlPort struct {
	Port        uint32
	NetdevIndex uint32
	Netdev      string
}

// decodeNLPort decodes a PORT_GET reply. NDEV_* are absent when the port has
// no netdev (InfiniBand) or it lives in another network namespace.
func decodeNLPort(data []byte) (nlPort, error) {
	attrs, err := parseNLAttrs(data)
	if err != nil {
		return nlPort{}, err
	}
	s := newNLAttrSet(attrs)
	var p nlPort
	if p.Port, err = s.u32(rdmaNldevAttrPortIndex); err != nil {
		return p, err
	}
	if s.has(rdmaNldevAttrNdevIndex) {
		if p.NetdevIndex, err = s.u32(rdmaNldevAttrNdevIndex); err != nil {
			return p, err
		}
	}
	if s.has(rdmaNldevAttrNdevName) {
		p.Netdev, _ = s.str(rdmaNldevAttrNdevName)
	}
	return p, nil
}

// getDevices dumps RDMA_NLDEV_CMD_GET.
func (c *nlClient) getDevices() ([]nlDevice, error) {
	msgs, err := c.exchange(rdmaNldevGetType, true, nil)
	if err != nil {
		return nil, err
	}
	devs := make([]nlDevice, 0, len(msgs))
	for _, m := range msgs {
		d, err := decodeNLDevice(m.Data)
		if err != nil {
			return nil, fmt.Errorf("decoding device: %w", err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// getChardev asks for the uverbs char device of device index.
func (c *nlClient) getChardev(index uint32) (nlChardev, error) {
	msgs, err := c.exchange(rdmaNldevGetChardevType, false, func(r *nlRequest) {
		r.u32(rdmaNldevAttrDevIndex, index)
		r.str(rdmaNldevAttrChardevType, "uverbs")
	})
	if err != nil {
		return nlChardev{}, err
	}
	if len(msgs) != 1 {
		return nlChardev{}, fmt.Errorf("%d replies, want 1", len(msgs))
	}
	return decodeNLChardev(msgs[0].Data)
}

// getPort asks for port port of device index.
func (c *nlClient) getPort(index, port uint32) (nlPort, error) {
	msgs, err := c.exchange(rdmaNldevPortGetType, false, func(r *nlRequest) {
		r.u32(rdmaNldevAttrDevIndex, index)
		r.u32(rdmaNldevAttrPortIndex, port)
	})
	if err != nil {
		return nlPort{}, err
	}
	if len(msgs) != 1 {
		return nlPort{}, fmt.Errorf("%d replies, want 1", len(msgs))
	}
	p, err := decodeNLPort(msgs[0].Data)
	if err != nil {
		return p, err
	}
	if p.Port != port {
		return p, fmt.Errorf("reply for port %d, want %d", p.Port, port)
	}
	return p, nil
}
