package rxe

import (
	"bytes"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/provider"
)

// TestPlainMatchesGeneric posts random WRs through both writers: every WR
// isPlain takes must pass SendOK and CheckSend, and fillPlain must leave
// the slot (over stale bytes) and the send sequence number exactly as
// fillSend does, with the same length.
func TestPlainMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewSource(27))
	fk, c := testContext(t)
	var buf [512]byte
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	lengths := []uint32{0, 1, 8, 16, 17, 60, 64, 200, 1 << 20, provider.MaxMessage, provider.MaxMessage + 1, 1<<32 - 1}
	plain := 0
	for _, typ := range []provider.QPType{provider.QPTypeRC, provider.QPTypeUC, provider.QPTypeUD} {
		for _, sge := range []uint32{0, 1, 2} {
			for _, inline := range []uint32{0, 16, 64, 200} {
				qp := testQP(t, fk, c, qpSpec{typ: typ, sqSlots: 16, sqLog2: 9,
					cap: provider.QPCap{MaxSendWR: 15, MaxRecvWR: 15, MaxSendSGE: sge, MaxRecvSGE: 1, MaxInlineData: inline}})
				q := qp.sq.q
				size := q.slotSize()
				for k := 0; k < 20000; k++ {
					wr := provider.SendWR{ID: rng.Uint64(), Opcode: provider.WROpcode(rng.Intn(14)),
						Flags: provider.SendFlags(rng.Intn(16)), Imm: rng.Uint32(), InvalidateRKey: rng.Uint32(),
						RemoteAddr: rng.Uint64(), RKey: rng.Uint32()}
					if rng.Intn(20) == 0 {
						wr.Flags |= provider.SendFlags(1 << (4 + rng.Intn(4))) // a flag no one knows
					}
					for n := rng.Intn(3); n > 0; n-- {
						l := lengths[rng.Intn(len(lengths))]
						if rng.Intn(2) == 0 {
							l = uint32(rng.Intn(int(min(inline, 64)) + 2))
						}
						a := uint64(uintptr(unsafe.Pointer(&buf[0])))
						if l > uint32(len(buf)) && wr.Flags&provider.SendInline != 0 {
							l = uint32(len(buf)) // inline bytes are read: keep them in buf (isPlain refuses more)
						}
						wr.SGL = append(wr.SGL, provider.SGE{Addr: a, Length: l, LKey: rng.Uint32()})
					}
					if !qp.sq.isPlain(&wr) {
						continue
					}
					plain++
					if !provider.SendOK(&qp.sq.caps, &wr) || provider.CheckSend(&qp.sq.caps, &wr) != nil {
						t.Fatalf("%v QP (SGEs %d, inline %d): isPlain took %+v, which CheckSend refuses: %v", typ, sge, inline, wr, provider.CheckSend(&qp.sq.caps, &wr))
					}
					slot := uint32(rng.Intn(int(q.mask) + 1))
					stale := make([]byte, size)
					rng.Read(stale)
					mem := unsafe.Slice((*byte)(q.slot(slot)), size)
					ssn := qp.sq.ssn
					copy(mem, stale)
					n1 := qp.fillSend(q, slot, &wr)
					want := bytes.Clone(mem)
					ssn1 := qp.sq.ssn
					copy(mem, stale)
					qp.sq.ssn = ssn
					n2 := qp.fillPlain(q, slot, &wr)
					if n1 != n2 || ssn1 != qp.sq.ssn || !bytes.Equal(want, mem) {
						t.Fatalf("%v QP (SGEs %d, inline %d), %+v: fillPlain wrote length %d, ssn %d and %x; fillSend %d, %d and %x",
							typ, sge, inline, wr, n2, qp.sq.ssn, mem, n1, ssn1, want)
					}
				}
			}
		}
	}
	if plain < 20000 {
		t.Fatalf("only %d plain WRs in the random set: the test checks too little", plain)
	}
	t.Logf("%d plain WRs compared", plain)
}
