package main

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// ib_send_bw's receive credits on iWARP (send_rcredit): iWARP has no RNR
// retry, so a SEND that finds no posted receive breaks the connection.
// perftest's send_bw therefore runs a credit window on iWARP devices: each
// side registers a small credit buffer (ctx_alloc_credit: one 32-bit
// source word per QP, then one target word per QP) and advertises its
// target words in place of its receive buffer in the first exchange of QP
// addresses. The server RDMA-WRITEs its receive count into the client's
// word every rx_depth/3 receives (run_iter_bw_server), and the client
// keeps scnt + post_list - credit below rx_depth (run_iter_bw). A peer
// without the credit writes would leave perftest's client waiting for
// ever after rx_depth sends.
type credits struct {
	mem *mmap.Region
	mr  *uverbs.MR
	cnt int // receives between two credit writes: rx_depth/3
	nqp int
}

// setupCredits is ctx_alloc_credit: for ib_send_bw on an iWARP device it
// registers the credit buffer and points this side's advertised addresses
// at its target words. It changes nothing for other tests and transports.
func (s *session) setupCredits() error {
	c := s.c
	if c.verb != verbSend || c.kind != bw || s.dev.Transport != uverbs.TransportIWARP {
		return nil
	}
	mem, err := mmap.Anonymous(max(8*c.numQP, 4096))
	if err != nil {
		return failf("Couldn't allocate the credit buffer: %v", err)
	}
	mr, err := s.pd.RegMR(mem.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		mem.Close()
		return failf("Couldn't allocate MR: %v", err)
	}
	s.credit = &credits{mem: mem, mr: mr, cnt: c.rxDepth / 3, nqp: c.numQP}
	for i := range s.mine {
		s.mine[i].rkey = mr.RKey()
		s.mine[i].vaddr = mr.Addr() + uint64(4*(c.numQP+i))
	}
	return nil
}

// granted is the receive count the server last wrote for QP i.
func (cr *credits) granted(i int) int {
	return int(loadUint32(cr.mem.Bytes(), 4*(cr.nqp+i)))
}

// writeWR is the credit write for QP i carrying rcnt (ctrl_wr): a
// signaled 4-byte RDMA WRITE of QP i's source word to the peer's target
// word.
func (cr *credits) writeWR(i, rcnt int, peer dest) []uverbs.SendWR {
	binary.NativeEndian.PutUint32(cr.mem.Bytes()[4*i:], uint32(rcnt))
	return []uverbs.SendWR{{ID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: peer.vaddr, RKey: peer.rkey,
		SGL: []uverbs.SGE{{Addr: cr.mr.Addr() + uint64(4*i), Length: 4, LKey: cr.mr.LKey()}}}}
}

func (cr *credits) close() error {
	err := cr.mr.Close()
	if e := cr.mem.Close(); err == nil {
		err = e
	}
	return err
}
