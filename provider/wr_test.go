package provider

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

type testAH struct{}

func (testAH) ProviderAH() AH { return nil }

// TestCheckSend: the shared rules, case by case; each refusal wraps EINVAL
// and says why.
func TestCheckSend(t *testing.T) {
	sge := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	rc := SendQueueCaps{Type: QPTypeRC, MaxSGE: 2, MaxInline: 16}
	uc := SendQueueCaps{Type: QPTypeUC, MaxSGE: 2, MaxInline: 16}
	ud := SendQueueCaps{Type: QPTypeUD, MaxSGE: 2, MaxInline: 16}
	bind := MWBind{MWRKey: 0x1200, NewRKey: 0x1201, Addr: 0x1000, Length: 64, Access: accessRemoteWrite}
	for _, c := range []struct {
		caps SendQueueCaps
		wr   SendWR
		want string // "" for accepted
	}{
		{rc, SendWR{Opcode: WRSend, SGL: sge}, ""},
		{rc, SendWR{Opcode: WRSendWithInv, SGL: sge}, ""},
		{uc, SendWR{Opcode: WRSendWithInv, SGL: sge}, "SEND_WITH_INV is not valid on a UC QP"},
		{uc, SendWR{Opcode: WRRDMARead, SGL: sge}, "RDMA_READ is not valid on a UC QP"},
		{uc, SendWR{Opcode: WRLocalInv}, "LOCAL_INV is not valid on a UC QP"},
		{uc, SendWR{Opcode: WRBindMW, Bind: bind}, ""},
		{ud, SendWR{Opcode: WRRDMAWrite, SGL: sge}, "RDMA_WRITE is not valid on a UD QP"},
		{rc, SendWR{Opcode: 10}, "unknown opcode 10"},
		{rc, SendWR{Opcode: WRSend, Flags: SendSignaled | 1<<4}, "unknown send flags 0x10"},
		{rc, SendWR{Opcode: WRSend, SGL: make([]SGE, 3)}, "3 SGEs, the QP takes at most 2"},
		{rc, SendWR{Opcode: WRSend, SGL: []SGE{{Length: 1 << 31}, {Length: 1}}}, "more than the 2^31"},
		{rc, SendWR{Opcode: WRSend, Flags: SendInline, SGL: []SGE{{Length: 17}}}, "17 bytes inline"},
		{rc, SendWR{Opcode: WRRDMARead, Flags: SendInline, SGL: sge}, "inline data on RDMA_READ"},
		{rc, SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{{Length: 4}}}, "one 8-byte SGE"},
		{rc, SendWR{Opcode: WRAtomicCmpAndSwp, SGL: sge, RemoteAddr: 4}, "not 8-byte aligned"},
		{rc, SendWR{Opcode: WRAtomicCmpAndSwp, SGL: sge, RemoteAddr: 8}, ""},
		{rc, SendWR{Opcode: WRLocalInv, SGL: sge}, "carries no SGL"},
		{rc, SendWR{Opcode: WRBindMW, Bind: MWBind{MWRKey: 0x1200, NewRKey: 0x1301}}, "another index"},
		{rc, SendWR{Opcode: WRBindMW, Bind: MWBind{Access: 1 << 4}}, "window access 0x10"},
		{rc, SendWR{Opcode: WRBindMW, Bind: MWBind{Addr: ^uint64(0), Length: 2}}, "wraps around"},
		{ud, SendWR{Opcode: WRSend, SGL: sge}, "needs an address handle"},
		{ud, SendWR{Opcode: WRSend, SGL: sge, UD: UDDest{AH: testAH{}, RemoteQPN: 1 << 24}}, "does not fit in 24 bits"},
		{ud, SendWR{Opcode: WRSendWithImm, SGL: sge, UD: UDDest{AH: testAH{}, RemoteQPN: 0xffffff}}, ""},
	} {
		err := CheckSend(&c.caps, &c.wr)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v %v: refused: %v", c.caps.Type, c.wr.Opcode, err)
		case c.want != "" && (!errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v %v: %v; want EINVAL and %q", c.caps.Type, c.wr.Opcode, err, c.want)
		}
	}
	if err := CheckRecv(1, &RecvWR{SGL: make([]SGE, 2)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CheckRecv with 2 SGEs for 1: %v", err)
	}
	if err := CheckRecv(2, &RecvWR{SGL: []SGE{{Length: 1 << 31}, {Length: 1}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("CheckRecv over 2^31: %v", err)
	}
	e := error(&WRError{Provider: "rxe", Verb: "PostSend", Index: 3, Opcode: WRSend, Err: Invalid("x")})
	var we *WRError
	if !errors.As(e, &we) || we.Index != 3 || !errors.Is(e, unix.EINVAL) || e.Error() != "rxe: PostSend: work request 3 (SEND): invalid argument: x; nothing was posted" {
		t.Errorf("WRError: %v", e)
	}
	if testing.AllocsPerRun(100, func() { CheckSend(&rc, &SendWR{Opcode: WRSend, SGL: sge}) }) != 0 {
		t.Errorf("CheckSend of a good request allocates")
	}
}

// TestCheckSendShortcut: SendOK, CheckSend's shortcut, accepts only what
// every rule (checkSend) accepts, and CheckSend agrees with checkSend, over
// requests drawn around each rule's edges.
func TestCheckSendShortcut(t *testing.T) {
	x := uint64(0x9e3779b97f4a7c15)
	rnd := func(n int) int { // xorshift: the same requests every run
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(n))
	}
	lengths := []uint32{0, 1, 8, 16, 17, 1 << 30, 1 << 31, 1<<31 + 1, ^uint32(0)}
	types := []QPType{QPTypeRC, QPTypeUC, QPTypeUD, 0, 7}
	flags := []SendFlags{0, SendSignaled, SendInline, SendInline | SendSignaled | SendSolicited | SendFence, 1 << 7, SendInline | 1<<5}
	accepted := 0
	for i := 0; i < 200000; i++ {
		c := SendQueueCaps{Type: types[rnd(len(types))], MaxSGE: uint32(rnd(4)), MaxInline: uint32(rnd(3) * 8)}
		wr := SendWR{Opcode: WROpcode(rnd(12)), Flags: flags[rnd(len(flags))], RemoteAddr: uint64(rnd(3) * 4)}
		for k := rnd(4); k > 0; k-- {
			wr.SGL = append(wr.SGL, SGE{Addr: 0x1000, Length: lengths[rnd(len(lengths))], LKey: 1})
		}
		if rnd(4) != 0 {
			wr.UD.AH = testAH{}
		}
		wr.UD.RemoteQPN = []uint32{1, 0xffffff, 0x1000000}[rnd(3)]
		ok, fast, full := SendOK(&c, &wr), CheckSend(&c, &wr), checkSend(&c, &wr)
		if (fast == nil) != (full == nil) || (ok && full != nil) {
			t.Fatalf("caps %+v, %+v: SendOK %v, CheckSend %v, every rule %v", c, wr, ok, fast, full)
		}
		if ok {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("SendOK accepted no request: the shortcut was never taken")
	}
}

// TestRecvOK: RecvOK is true exactly when CheckRecv accepts, and both
// accept exactly what the rule says (at most maxSGE SGEs, at most 2^31
// bytes; CheckRecv calls RecvOK first, so agreeing is not enough): for one
// SGE (RecvOK's shortcut) and for lists.
func TestRecvOK(t *testing.T) {
	lengths := []uint32{0, 1, 1 << 30, 1 << 31, 1<<31 + 1, ^uint32(0)}
	for maxSGE := uint32(0); maxSGE < 4; maxSGE++ {
		for n := 0; n < 4; n++ {
			for _, l := range lengths {
				wr := RecvWR{}
				for i := 0; i < n; i++ {
					wr.SGL = append(wr.SGL, SGE{Length: l})
				}
				want := uint32(n) <= maxSGE && uint64(n)*uint64(l) <= 1<<31
				if ok, err := RecvOK(maxSGE, &wr), CheckRecv(maxSGE, &wr); ok != want || (err == nil) != want {
					t.Errorf("max %d SGEs, %d of %d bytes: RecvOK %v, CheckRecv %v; want accepted %v", maxSGE, n, l, ok, err, want)
				}
			}
		}
	}
}
