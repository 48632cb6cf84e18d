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
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

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
