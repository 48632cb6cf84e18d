package mlx5

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/goverbs/goverbs/provider"
)

// TestPlainMatchesGeneric checks the plain path against the general one on
// random WRs: every WR isPlain takes passes CheckSend and planSend as one
// WQEBB, and writePlain leaves the ring, the wr_id, next and opcode slots
// and the fence cache exactly as write does.
func TestPlainMatchesGeneric(t *testing.T) {
	const qpn, cnt = 0xabcdef, 8
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []uint32{1, 8, 28, 29, 44, 45, 64, 4096, 0, provider.MaxMessage, provider.MaxMessage + 1, ^uint32(0)}
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(i + 1)
	}
	mem := userMem(t, src) // what inline WRs copy: the first 64 B of their SGE
	types := []provider.QPType{provider.QPTypeRC, provider.QPTypeUC, provider.QPTypeUD, provider.QPTypeXRCIni}
	newSQ := func(shape sqShape, sigAll bool, fm uint8) *sendQueue {
		sq := &sendQueue{ring: make([]byte, cnt*wqeBB), cnt: cnt, slots: make([]sendSlot, cnt),
			shape: shape, sigAll: sigAll, fmCache: fm}
		for i := range sq.ring {
			sq.ring[i] = byte(i * 7) // stale bytes, as a reused ring has
		}
		return sq
	}
	plain, inline, ok := 0, 0, 0
	for range 150000 {
		shape := testShape(types[rng.IntN(len(types))], uint32(rng.IntN(3)), []uint32{0, 16, 28, 64, 256}[rng.IntN(5)],
			uint32(rng.IntN(3)))
		wr := provider.SendWR{ID: rng.Uint64(), Opcode: provider.WROpcode(rng.IntN(11)),
			Flags: provider.SendFlags(rng.IntN(8) | rng.IntN(2)*rng.IntN(32) | rng.IntN(2)*rng.IntN(2)*8), Imm: rng.Uint32(), InvalidateRKey: rng.Uint32(),
			RemoteAddr: rng.Uint64(), RKey: rng.Uint32()}
		for range []int{0, 1, 1, 1, 2}[rng.IntN(5)] {
			wr.SGL = append(wr.SGL, provider.SGE{Addr: rng.Uint64(), Length: lengths[rng.IntN(len(lengths))*rng.IntN(2)], LKey: rng.Uint32()})
		}
		if wr.Flags&provider.SendInline != 0 {
			for i := range wr.SGL {
				if wr.SGL[i].Length <= 64 {
					wr.SGL[i].Addr = mem + uint64(rng.IntN(65-int(wr.SGL[i].Length)))
				}
			}
		}
		p, err := checkSend(&shape, &wr)
		if err == nil {
			ok++
		}
		if !isPlain(&shape, &wr) {
			continue
		}
		plain++
		if wr.Flags&provider.SendInline != 0 {
			inline++
		}
		if err != nil || p.bbs != 1 {
			t.Fatalf("isPlain took %+v on %+v, which checkSend plans as %d WQEBBs, %v", wr, shape, p.bbs, err)
		}
		head, sigAll, fm := rng.Uint32(), rng.IntN(2) == 0, []uint8{0, ctrlSmallFence}[rng.IntN(2)]
		a, b := newSQ(shape, sigAll, fm), newSQ(shape, sigAll, fm)
		a.writePlain(head, qpn, &wr)
		b.write(head, qpn, &wr, &p)
		if !bytes.Equal(a.ring, b.ring) || !slices.Equal(a.slots, b.slots) || a.fmCache != b.fmCache {
			t.Fatalf("%+v at head %d (sigAll %v, fence cache %#x): writePlain and write differ:\n% x\n% x",
				wr, head, sigAll, fm, a.ring, b.ring)
		}
	}
	// Both kinds must have come up often, or the test proves little.
	if plain-inline < 500 || inline < 500 || ok-plain < 500 {
		t.Fatalf("%d plain WRs (%d inline) and %d other accepted ones: too few", plain, inline, ok-plain)
	}
	t.Logf("%d plain WRs (%d inline), %d other accepted ones", plain, inline, ok-plain)
}
