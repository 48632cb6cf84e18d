package siw

import (
	"errors"
	"slices"
	"testing"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// TestDoorbellLongListInParts: a list that sends more than
// writedoorbell.RawMax bytes is written and kicked in parts of at most
// RawMax, each by the doorbell rule (a raw doorbell when the kernel may be
// idle, none while it has yet to reach the part); a single larger request
// is a part of its own and rings a regular write; a refused part's entries
// come back and the parts before it stay posted.
func TestDoorbellLongListInParts(t *testing.T) {
	const max = writedoorbell.RawMax
	write := func(n uint32) provider.SendWR {
		return provider.SendWR{Opcode: provider.WRRDMAWrite, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: n, LKey: 1}}}
	}
	read := provider.SendWR{Opcode: provider.WRRDMARead, RemoteAddr: 0x2000, RKey: 2, SGL: []provider.SGE{{Addr: 0x1000, Length: 1 << 20, LKey: 1}}}
	list := func(k int, wr provider.SendWR) []provider.SendWR {
		return slices.Repeat([]provider.SendWR{wr}, k)
	}
	for _, tc := range []struct {
		name  string
		wrs   []provider.SendWR
		idle  bool  // the kernel takes every valid entry at a doorbell
		takes []int // entries taken at each doorbell (idle), or nil
		dbs   int   // doorbells
		raw   int   // of which raw
	}{
		{"16 of RawMax", list(16, write(max)), true, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 16, 16},
		{"20 of RawMax/16", list(20, write(max/16)), true, []int{16, 4}, 2, 2},
		{"RawMax/2, READs, RawMax/2", append(append([]provider.SendWR{write(max / 2)}, list(8, read)...), write(max/2)), true, []int{10}, 1, 1},
		{"a larger one then RawMax/2", []provider.SendWR{write(max + 1), write(max / 2)}, true, []int{1, 1}, 2, 1},
		{"16 of RawMax, the kernel still busy", list(16, write(max)), false, nil, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk, c := testContext(t)
			qp, sq, _ := testQP(t, fk, c, 32, 4, false, false)
			var get uint32
			var takes []int
			if tc.idle {
				fk.onDoorbell = func(uint32) { takes = append(takes, kernelTake(sq, &get)) }
			}
			if n, err := qp.PostSend(tc.wrs); n != len(tc.wrs) || err != nil {
				t.Fatalf("PostSend = %d, %v", n, err)
			}
			if !slices.Equal(takes, tc.takes) || int(fk.doorbells.Load()) != tc.dbs || int(fk.raw.Load()) != tc.raw {
				t.Errorf("doorbells took %v, %d doorbells, %d raw; want %v, %d, %d raw", takes, fk.doorbells.Load(), fk.raw.Load(), tc.takes, tc.dbs, tc.raw)
			}
			if !tc.idle {
				for i := range uint32(16) {
					if sq.word(i, offFlags).Load()&wqeValid == 0 {
						t.Errorf("entry %d not valid: the busy kernel would never see it", i)
					}
				}
			}
		})
	}
	t.Run("the second part refused", func(t *testing.T) {
		fk, c := testContext(t)
		qp, sq, _ := testQP(t, fk, c, 32, 4, false, false)
		var get uint32
		calls := 0
		fk.onDoorbell = func(uint32) {
			if calls++; calls == 1 {
				kernelTake(sq, &get) // the first part goes
				return
			}
			fk.dbErr = unix.ENOTCONN // the next doorbell fails, its part not taken
		}
		wrs := list(4, write(max))
		n, err := qp.PostSend(wrs)
		var we *WRError
		if n != 1 || !errors.As(err, &we) || we.Index != 1 || !errors.Is(err, unix.ENOTCONN) {
			t.Fatalf("PostSend = %d, %v; want 1 and a WRError for request 1 wrapping ENOTCONN", n, err)
		}
		for i := uint32(1); i < 4; i++ {
			if sq.word(i, offFlags).Load()&wqeValid != 0 {
				t.Errorf("entry %d still valid after the refused part", i)
			}
		}
		fk.dbErr, fk.onDoorbell = nil, nil
		if n, err := qp.PostSend(wrs[:1]); n != 1 || err != nil || sq.word(1, offFlags).Load()&wqeValid == 0 {
			t.Errorf("the next post = %d, %v; want it in entry 1", n, err)
		}
	})
}
