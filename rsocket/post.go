package rsocket

import (
	"encoding/binary"
	"sync/atomic"
	"syscall"

	"github.com/goverbs/goverbs/uverbs"
)

// targetView is one entry of the target SGL: the peer RDMA-writes it in
// our host order (a credit update), so it is read and written atomically.
type targetView struct {
	addr        *atomic.Uint64
	key, length *atomic.Uint32
}

func (c *Conn) targetLen(i int) uint32 { return c.tgt[i].length.Load() }

func (c *Conn) storeTarget(i int, s sge) {
	t := &c.tgt[i]
	t.addr.Store(s.Addr)
	t.key.Store(s.Key)
	t.length.Store(s.Length)
}

// peerOrder is the byte order of SGEs and iWARP words for the peer.
func (c *Conn) peerOrder() binary.ByteOrder {
	if c.peerBig {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

func (c *Conn) postRecv() error {
	w := &c.rwr[0]
	*w = uverbs.RecvWR{ID: wrRecv}
	if c.msgSend {
		w.ID = wrRecv | uint64(c.msgIndex)
		c.rsge[0] = uverbs.SGE{Addr: c.rAddr + uint64(c.msgInOff-c.tgtOff+c.msgIndex*msgSize), Length: msgSize, LKey: c.rKey}
		w.SGL = c.rsge[:1]
		if c.msgIndex++; c.msgIndex == c.rqSize {
			c.msgIndex = 0
		}
	}
	_, err := c.qp.PostRecv(c.rwr[:1])
	return c.postErr(err)
}

// postErr is a refused post's error. With the QP in the error state (the
// CM moved it there when the connection went down: the peer died or
// disconnected, and siw refuses posts to a QP in ERR) the connection was
// reset, whatever the provider's words for the refusal.
func (c *Conn) postErr(err error) error {
	if err != nil && c.qp.State() == uverbs.QPStateErr {
		return resetError{err}
	}
	return err
}

// resetError is a post refused because the connection went down:
// ECONNRESET, with the provider's refusal in its text.
type resetError struct{ post error }

func (e resetError) Error() string   { return syscall.ECONNRESET.Error() + " (" + e.post.Error() + ")" }
func (e resetError) Unwrap() error   { return syscall.ECONNRESET }
func (e resetError) Timeout() bool   { return false }
func (e resetError) Temporary() bool { return false }

// postMsg sends a message without payload (rs_post_msg): a zero-length
// RDMA WRITE WITH IMM, or on iWARP a 4-byte inline SEND.
func (c *Conn) postMsg(msg uint32) error {
	w := &c.swr[0]
	if !c.msgSend {
		// The write moves no bytes; it still names a valid buffer of the
		// peer's (librdmacm leaves these fields uninitialized).
		*w = uverbs.SendWR{ID: uint64(msg), Opcode: uverbs.WRRDMAWriteWithImm, Imm: msg,
			RemoteAddr: c.remoteSGL.Addr, RKey: c.remoteSGL.Key}
		_, err := c.qp.PostSend(c.swr[:1])
		return c.postErr(err)
	}
	*w = c.msgWR(uint64(msg), msg)
	_, err := c.qp.PostSend(c.swr[:1])
	return c.postErr(err)
}

// msgWR is the inline SEND of an iWARP message word.
func (c *Conn) msgWR(id uint64, msg uint32) uverbs.SendWR {
	c.peerOrder().PutUint32(c.mem.Bytes()[c.msgOutOff:], msg)
	c.ssge[1] = uverbs.SGE{Addr: c.sAddr + uint64(c.msgOutOff), Length: msgSize, LKey: c.sKey}
	return uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: c.ssge[1:2]}
}

// postWriteMsg writes sgl to addr/rkey with msg as immediate data
// (rs_post_write_msg); on iWARP an RDMA WRITE then the message SEND.
func (c *Conn) postWriteMsg(sgl []uverbs.SGE, msg uint32, flags uverbs.SendFlags, addr uint64, rkey uint32) error {
	if !c.msgSend {
		w := &c.dwr[0]
		w.ID, w.Opcode, w.Flags, w.SGL = uint64(msg), uverbs.WRRDMAWriteWithImm, flags, sgl
		w.Imm, w.RemoteAddr, w.RKey = msg, addr, rkey
		_, err := c.qp.PostSend(c.dwr[:])
		return c.postErr(err)
	}
	c.swr[0] = uverbs.SendWR{ID: uint64(msg), Opcode: uverbs.WRRDMAWrite, Flags: flags, SGL: sgl, RemoteAddr: addr, RKey: rkey}
	c.swr[1] = c.msgWR(uint64(msgSet(msgOp(msg), 0))|wrMsgSend, msg)
	_, err := c.qp.PostSend(c.swr[:2])
	return c.postErr(err)
}

// sendCredits offers the peer receive credits and, when half the receive
// buffer is free, that half as a new target buffer (rs_send_credits).
// Called with mu held.
func (c *Conn) sendCredits() {
	c.ctrlSeq++
	c.rseqComp = c.rseqNo + uint16(c.rqSize/2)
	credits := uint32(c.rseqNo) + uint32(c.rqSize)
	var err error
	if c.rbufAvail >= c.rbufSize/2 {
		if c.msgSend {
			c.ctrlSeq++
		}
		slot := c.ctrlOff + int(c.ctrlSeq&(qpCtrlSize-1))*sgeSize
		b := c.mem.Bytes()[slot : slot+sgeSize]
		o := c.peerOrder()
		o.PutUint64(b, c.rAddr+uint64(c.rbufOff-c.tgtOff+c.rbufFree))
		o.PutUint32(b[8:], c.rRKey)
		o.PutUint32(b[12:], uint32(c.rbufSize/2))
		var flags uverbs.SendFlags
		if c.inline >= sgeSize {
			flags = uverbs.SendInline
		}
		c.ssge[0] = uverbs.SGE{Addr: c.sAddr + uint64(slot), Length: sgeSize, LKey: c.sKey}
		err = c.postWriteMsg(c.ssge[:1], msgSet(opSGL, credits), flags,
			c.remoteSGL.Addr+uint64(c.remoteSGE*sgeSize), c.remoteSGL.Key)
		c.rbufAvail -= c.rbufSize / 2
		if c.rbufFree += c.rbufSize / 2; c.rbufFree >= c.rbufSize {
			c.rbufFree = 0
		}
		if c.remoteSGE++; c.remoteSGE == int(c.remoteSGL.Length) {
			c.remoteSGE = 0
		}
	} else {
		err = c.postMsg(msgSet(opSGL, credits))
	}
	if err != nil {
		c.fail(err)
	}
}

func (c *Conn) ctrlAvail() bool { return c.ctrlSeq != c.ctrlMax }

// ctrl2Avail: iWARP credit updates may take two control slots.
func (c *Conn) ctrl2Avail() bool { return int32(c.ctrlSeq+1-c.ctrlMax) < 0 }

// updateCredits sends credits when half the receive credits or half the
// receive buffer can be given back (rs_give_credits). mu held.
func (c *Conn) updateCredits() {
	if c.state&stConnected == 0 || c.stillQuiet() {
		return
	}
	if c.rbufAvail < c.rbufSize/2 && int16(c.rseqNo-c.rseqComp) < 0 {
		return
	}
	if (!c.msgSend && c.ctrlAvail()) || (c.msgSend && c.ctrl2Avail()) {
		c.sendCredits()
	}
}
