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
