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
	"errors"
	"fmt"
	"strings"

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
