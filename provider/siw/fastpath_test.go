package siw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// The tests here give PostRecv and Poll the shape of their fast paths
// (issue 16): one receive of one SGE per call, one completion per poll.
// Every refusal of the fast path's shape must answer as the general path
// does and leave the ring as it was.

// recv1 is a one-request, one-SGE receive list.
func recv1(id uint64, length uint32) []provider.RecvWR {
	return []provider.RecvWR{{ID: id, SGL: []provider.SGE{{Addr: 0x4000 + id, Length: length, LKey: uint32(id)}}}}
}

func TestPostRecvOneSGE(t *testing.T) {
	fk, c := testContext(t)
	qp, _, rq := testQP(t, fk, c, 4, 4, false, false)
	for i := uint64(0); i < 4; i++ {
		if n, err := qp.PostRecv(recv1(i, 64)); n != 1 || err != nil {
			t.Fatalf("PostRecv %d = %d, %v", i, n, err)
		}
		e := rq.rqe(uint32(i))
		f, nsge, op := flagsOf(rq.word(uint32(i), offRqFlags).Load())
		if e.Id != i || f != abi.SIW_WQE_VALID || nsge != 1 || op != 0 ||
			e.Sge[0] != (abi.SiwSge{Laddr: 0x4000 + i, Length: 64, Lkey: uint32(i)}) {
			t.Errorf("rqe %d: id %d flags %#x num_sge %d opcode %d sge %+v", i, e.Id, f, nsge, op, e.Sge[0])
		}
	}
	// Full: the kernel took none. ENOMEM, request 0, the ring unchanged.
	before := bytes.Clone(rq.mem)
	var we *WRError
	n, err := qp.PostRecv(recv1(9, 64))
	if n != 0 || !errors.Is(err, unix.ENOMEM) || !errors.As(err, &we) || we.Index != 0 || we.Verb != "PostRecv" {
		t.Errorf("PostRecv into a full ring = %d, %v; want 0 and a PostRecv WRError wrapping ENOMEM", n, err)
	}
	if !bytes.Equal(before, rq.mem) {
		t.Error("a receive refused for room changed the ring")
	}
	// Too long for one receive (2^31 bytes at most): EINVAL. The entry
	// is ours: post may have written its id and SGE, but its flags stay.
	rq.word(0, offRqFlags).Store(0) // the kernel took entry 0
	words := flagWords(rq)
	if n, err := qp.PostRecv(recv1(9, 1<<31+1)); n != 0 || !errors.Is(err, unix.EINVAL) || !errors.As(err, &we) || we.Index != 0 {
		t.Errorf("PostRecv of one 2^31+1-byte SGE = %d, %v; want 0 and a WRError wrapping EINVAL", n, err)
	}
	if !slices.Equal(words, flagWords(rq)) {
		t.Errorf("a refused receive changed flags words: %#x, were %#x", flagWords(rq), words)
	}
	// The next one goes into entry 0, the one the kernel gave back.
	if n, err := qp.PostRecv(recv1(10, 1<<31)); n != 1 || err != nil || rq.rqe(0).Id != 10 {
		t.Errorf("PostRecv after the refusals = %d, %v (rqe 0 id %d, want 10)", n, err, rq.rqe(0).Id)
	}
	// ERR sticks and refuses.
	rq.word(1, offRqFlags).Store(0)
	before = bytes.Clone(rq.mem)
	qp.Modified(provider.QPStateErr)
	if n, err := qp.PostRecv(recv1(11, 8)); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv in ERR = %d, %v; want 0 and EINVAL", n, err)
	}
	if !bytes.Equal(before, rq.mem) {
		t.Error("a receive refused in ERR changed the ring")
	}
	qp.Close()
	if n, err := qp.PostRecv(recv1(12, 8)); n != 0 || !errors.Is(err, provider.ErrClosed) {
		t.Errorf("PostRecv after Close = %d, %v; want 0 and ErrClosed", n, err)
	}
	if fk.doorbells.Load() != 0 {
		t.Error("PostRecv made a syscall")
	}
}

// TestPostRecvOneSGELimits: a QP whose receives carry no SGE, a QP on an
// SRQ and a lost device refuse the fast path's shape too.
func TestPostRecvOneSGELimits(t *testing.T) {
	fk, c := testContext(t)
	st, err := c.CreateQP(provider.QPAttr{Type: provider.QPTypeRC})
	if err != nil {
		t.Fatal(err)
	}
	_, out := st.Udata()
	resp := abi.SiwUrespCreateQp{NumSqe: 4, NumRqe: 4, SqKey: fk.addRing(4 * sqeSize), RqKey: fk.addRing(4 * rqeSize)}
	copy(out, abi.Bytes(&resp))
	pq, err := st.Complete(provider.QPCreated{Handle: 7, QPN: 9, Cap: provider.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	noSGE := pq.(*QP)
	defer noSGE.Close()
	rq := fk.ringAt(resp.RqKey, 4, rqeSize, 0)
	if n, err := noSGE.PostRecv(recv1(1, 8)); n != 0 || !errors.Is(err, unix.EINVAL) || rq.word(0, offRqFlags).Load() != 0 {
		t.Errorf("one SGE on a QP of max_recv_sge 0 = %d, %v; want 0 and EINVAL, nothing posted", n, err)
	}
	onSRQ, _, _ := testQP(t, fk, c, 4, 0, true, false)
	if n, err := onSRQ.PostRecv(recv1(1, 8)); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv on a QP with an SRQ = %d, %v; want 0 and EINVAL", n, err)
	}
	qp, _, rq2 := testQP(t, fk, c, 4, 4, false, false)
	fk.dbErr = unix.EIO
	c.DeviceLost()
	var we *WRError
	if n, err := qp.PostRecv(recv1(1, 8)); n != 0 || !errors.Is(err, unix.EIO) || !errors.As(err, &we) || rq2.word(0, offRqFlags).Load() != 0 {
		t.Errorf("PostRecv after DeviceLost = %d, %v; want 0 and a WRError wrapping EIO, nothing posted", n, err)
	}
}

// TestPostRecvConcurrent: posters on one receive queue, one request each
// call, while a goroutine plays siw_rqe_get (takes valid entries in order
// from its own index, reads them, clears the flags) and the QP is closed
// at the end. Every receive posted is taken exactly once, with its SGE;
// a post refused for room is retried; after Close every post says
// ErrClosed. Run with -race.
func TestPostRecvConcurrent(t *testing.T) {
	fk, c := testContext(t)
	qp, _, rq := testQP(t, fk, c, 4, 8, false, false)
	const posters, each = 4, 2000
	seen := make([]int, posters*each)
	done := make(chan struct{})
	var kernel sync.WaitGroup
	kernel.Add(1)
	go func() { // the kernel: it may stop only once every receive came
		defer kernel.Done()
		get, got := uint32(0), 0
		for got < len(seen) {
			w := rq.word(get, offRqFlags)
			v := w.Load()
			if v&wqeValid == 0 {
				select {
				case <-done:
					return
				default:
					continue
				}
			}
			e := rq.rqe(get)
			_, nsge, _ := flagsOf(v)
			id := e.Id
			if nsge != 1 || id >= uint64(len(seen)) || e.Sge[0] != (abi.SiwSge{Laddr: 0x4000 + id, Length: 8, Lkey: uint32(id)}) {
				t.Errorf("entry %d: num_sge %d id %d sge %+v", get, nsge, id, e.Sge[0])
			} else {
				seen[id]++
			}
			w.Store(0)
			get++
			got++
		}
	}()
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := uint64(p*each + i)
				for {
					n, err := qp.PostRecv(recv1(id, 8))
					if err == nil && n == 1 {
						break
					}
					if !errors.Is(err, unix.ENOMEM) {
						t.Errorf("PostRecv %d = %d, %v", id, n, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	kernel.Wait()
	close(done)
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("receive %d taken %d times", id, k)
		}
	}
	// Close races posters: each post either lands or says ErrClosed.
	var closing sync.WaitGroup
	for range posters {
		closing.Add(1)
		go func() {
			defer closing.Done()
			for i := 0; ; i++ {
				rq.word(uint32(i), offRqFlags).Store(0)
				_, err := qp.PostRecv(recv1(1, 8))
				if errors.Is(err, provider.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, unix.ENOMEM) {
					t.Errorf("PostRecv racing Close: %v", err)
					return
				}
			}
		}()
	}
	qp.Close()
	closing.Wait()
}

// TestPollConversions: what Poll writes for the completions TestPollArm
// does not make (an opcode siw never completes, an unknown status, a
// remote invalidation), and that it overwrites every field of the
// caller's entry.
func TestPollConversions(t *testing.T) {
	fk, c := testContext(t)
	cq, k := testCQ(t, fk, c, 4)
	kernelComplete(k, 0, 1, abi.SIW_OP_READ_RESPONSE, abi.SIW_WC_SUCCESS, 8, 9)
	kernelComplete(k, 1, 2, 200, 0x1234, 16, 10)
	kernelComplete(k, 2, 3, abi.SIW_OP_RECEIVE, abi.SIW_WC_SUCCESS, 24, 11)
	k.cqe(2).SetInvalStag(0xabcd)
	var b [4]byte
	b[0], b[1] = abi.SIW_WQE_VALID|abi.SIW_WQE_REM_INVAL, abi.SIW_OP_RECEIVE
	k.word(2, offCqFlags).Store(binary.NativeEndian.Uint32(b[:]))
	dirty := provider.WorkCompletion{ID: ^uint64(0), Status: 99, Opcode: 99, VendorErr: 99, ByteLen: 99, Imm: 99, QPNum: 99,
		SrcQP: 99, Flags: 99, PKeyIndex: 99, SLID: 99, SL: 99, DLIDPathBits: 99, Port: 99}
	wc := []provider.WorkCompletion{dirty, dirty, dirty, dirty}
	for i := range 3 {
		if n, err := cq.Poll(wc[i : i+1]); n != 1 || err != nil {
			t.Fatalf("Poll %d = %d, %v", i, n, err)
		}
	}
	want := []provider.WorkCompletion{
		{ID: 1, Status: provider.WCSuccess, Opcode: wcUnknown, ByteLen: 8, QPNum: 9},
		{ID: 2, Status: provider.WCGeneralErr, Opcode: wcUnknown, VendorErr: 0x1234, ByteLen: 16, QPNum: 10},
		{ID: 3, Status: provider.WCSuccess, Opcode: provider.WCRecv, ByteLen: 24, QPNum: 11, Flags: provider.WCWithInv, Imm: 0xabcd},
		dirty,
	}
	if !slices.Equal(wc, want) {
		for i := range wc {
			if wc[i] != want[i] {
				t.Errorf("completion %d: %+v, want %+v", i, wc[i], want[i])
			}
		}
	}
}

// TestPostSendOne: PostSend's one-request fast path writes what the
// general path (postSend) writes, rings when it rings and refuses what it
// refuses with the same answer: each case runs on two fresh QPs, one
// through PostSend, one through postSend, and the rings, results and
// doorbells are compared.
func TestPostSendOne(t *testing.T) {
	sge := func(n int) []provider.SGE {
		s := make([]provider.SGE, n)
		for i := range s {
			s[i] = provider.SGE{Addr: 0x1000 * uint64(i+1), Length: uint32(10 * (i + 1)), LKey: uint32(0x11 * (i + 1))}
		}
		return s
	}
	type setup struct {
		sigAll bool
		state  provider.QPState
		busy   bool  // the entry before the first is still valid: no doorbell
		full   bool  // every entry is the kernel's
		closed bool  // the QP was closed
		lost   bool  // the device is gone
		dbErr  error // the doorbell's error
		take   bool  // the kernel takes the entry before the doorbell fails
	}
	cases := []struct {
		name string
		s    setup
		wr   provider.SendWR
	}{
		{"SEND, no SGE", setup{}, provider.SendWR{ID: 1, Opcode: provider.WRSend}},
		{"SEND signaled solicited, 1 SGE", setup{}, provider.SendWR{ID: 2, Opcode: provider.WRSend, Flags: provider.SendSignaled | provider.SendSolicited, SGL: sge(1)}},
		{"SEND, 6 SGEs", setup{}, provider.SendWR{ID: 3, Opcode: provider.WRSend, SGL: sge(6)}},
		{"WRITE fenced, 2 SGEs", setup{}, provider.SendWR{ID: 4, Opcode: provider.WRRDMAWrite, Flags: provider.SendFence, RemoteAddr: 0xabc0, RKey: 0x77, SGL: sge(2)}},
		{"WRITE on a QP signaling all", setup{sigAll: true}, provider.SendWR{ID: 5, Opcode: provider.WRRDMAWrite, RemoteAddr: 0x10, RKey: 1, SGL: sge(1)}},
		{"SEND behind a busy entry", setup{busy: true}, provider.SendWR{ID: 6, Opcode: provider.WRSend, SGL: sge(1)}},
		{"SEND into a full ring", setup{full: true}, provider.SendWR{ID: 7, Opcode: provider.WRSend, SGL: sge(1)}},
		{"SEND in RESET", setup{state: provider.QPStateReset}, provider.SendWR{ID: 8, Opcode: provider.WRSend}},
		{"SEND in ERR", setup{state: provider.QPStateErr}, provider.SendWR{ID: 9, Opcode: provider.WRSend}},
		{"SEND on a closed QP", setup{closed: true}, provider.SendWR{ID: 10, Opcode: provider.WRSend}},
		{"SEND on a lost device", setup{lost: true}, provider.SendWR{ID: 11, Opcode: provider.WRSend}},
		{"SEND, doorbell refused", setup{dbErr: unix.ENOTCONN}, provider.SendWR{ID: 12, Opcode: provider.WRSend, SGL: sge(1)}},
		{"SEND, doorbell refused after the kernel took it", setup{dbErr: unix.ENOTCONN, take: true}, provider.SendWR{ID: 13, Opcode: provider.WRSend}},
		{"SEND, 7 SGEs", setup{}, provider.SendWR{ID: 14, Opcode: provider.WRSend, SGL: sge(7)}},
		{"SEND, unknown flag", setup{}, provider.SendWR{ID: 15, Opcode: provider.WRSend, Flags: 1 << 6}},
		{"WRITE of 2^31+1 bytes", setup{}, provider.SendWR{ID: 16, Opcode: provider.WRRDMAWrite, SGL: []provider.SGE{{Length: 1 << 31}, {Length: 1}}}},
	}
	type result struct {
		n         int
		err       string
		ring      []byte
		doorbells int64
	}
	run := func(s setup, wr provider.SendWR, post func(*QP, []provider.SendWR) (int, error)) result {
		fk, c := testContext(t)
		qp, sq, _ := testQP(t, fk, c, 4, 4, false, s.sigAll)
		qp.Modified(provider.QPStateRTS)
		if s.state != 0 {
			qp.Modified(s.state)
		}
		var get uint32
		if s.busy || s.full {
			n := 1 // entry 0 valid: the kernel has yet to take it
			if s.full {
				n = 4
			}
			if _, err := qp.PostSend(make([]provider.SendWR, n)); err != nil {
				t.Fatal(err)
			}
		}
		if s.lost {
			fk.dbErr = unix.EIO
			c.DeviceLost()
		}
		fk.dbErr = s.dbErr
		if s.take {
			fk.onDoorbell = func(uint32) { kernelTake(sq, &get) }
		}
		if s.closed {
			qp.Close()
		}
		dbs := fk.doorbells.Load()
		n, err := post(qp, []provider.SendWR{wr})
		r := result{n: n, ring: bytes.Clone(sq.mem), doorbells: fk.doorbells.Load() - dbs}
		if err != nil {
			r.err = err.Error()
		}
		return r
	}
	for _, tc := range cases {
		fast := run(tc.s, tc.wr, (*QP).PostSend)
		general := run(tc.s, tc.wr, (*QP).postSend)
		if fast.n != general.n || fast.err != general.err || fast.doorbells != general.doorbells {
			t.Errorf("%s: PostSend = %d, %q, %d doorbells; postSend = %d, %q, %d doorbells",
				tc.name, fast.n, fast.err, fast.doorbells, general.n, general.err, general.doorbells)
		}
		if !bytes.Equal(fast.ring, general.ring) {
			t.Errorf("%s: PostSend and postSend wrote different rings", tc.name)
		}
	}
}
