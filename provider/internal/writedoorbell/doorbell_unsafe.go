package writedoorbell

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"github.com/goverbs/goverbs/abi"
)

// CmdSize is the command's size: the 8-byte command header and struct
// ib_uverbs_post_send (32 bytes).
const CmdSize = 8 + int(unsafe.Sizeof(abi.IbUverbsPostSend{}))

// SendWRSize is sizeof(struct ib_uverbs_send_wr) (56 bytes): the smallest
// wqe_size the uverbs core accepts, even for an empty list.
const SendWRSize = int(unsafe.Sizeof(abi.IbUverbsSendWr{}))

// Doorbell is one QP's doorbell command. It lives on the Go heap (never on
// a goroutine stack, which moves), so the response address written into
// Cmd stays valid for the QP's life; keep the Doorbell reachable
// (runtime.KeepAlive) until the write returns.
type Doorbell struct {
	Cmd  [CmdSize]byte // what to write(): abi.File.Doorbell or abi.File.Write
	resp [8]byte       // struct ib_uverbs_post_send_resp {bad_wr} (4 bytes)
}

// New builds the command for the QP with the given handle: POST_SEND, in
// and out sizes, the response address, the handle, wr_count and sge_count
// 0, wqe_size SendWRSize.
//
//go:noinline
func New(qpHandle uint32) *Doorbell {
	d := new(Doorbell)
	ne := binary.NativeEndian
	ne.PutUint32(d.Cmd[0:], abi.IB_USER_VERBS_CMD_POST_SEND)
	ne.PutUint16(d.Cmd[4:], uint16(CmdSize/4))                                   // in_words, header included
	ne.PutUint16(d.Cmd[6:], uint16(unsafe.Sizeof(abi.IbUverbsPostSendResp{})/4)) // out_words
	ne.PutUint64(d.Cmd[8:], uint64(uintptr(unsafe.Pointer(&d.resp))))            // response
	ne.PutUint32(d.Cmd[16:], qpHandle)                                           // qp_handle
	// wr_count and sge_count stay 0.
	ne.PutUint32(d.Cmd[28:], uint32(SendWRSize)) // wqe_size
	return d
}

// RawMax is the most bytes a doorbell may make the kernel send for it to be
// a raw write (abi.File.Doorbell, RawSyscall). rxe and siw ring a PostSend
// list that sends more in parts of at most RawMax, each raw; only a single
// larger request rings a regular write (abi.File.Write, Syscall). Both
// drivers may send inside the doorbell's write(): rxe on Linux 6.1 runs the QP's
// requester there (on loopback the responder too), one packet after
// another until the send queue is empty (up to 1024 packets a run; 6.12
// runs it from a work queue, so the write is short there either way), and
// siw runs its send queue there on 6.1 and 6.12 alike (in_syscall) until
// the queue is empty or the socket is full. A raw syscall keeps its P all
// that time: the GC's stop-the-world waits for it. A regular one that
// outlasts sysmon's 20 µs costs the runtime's hand-off: other threads
// woken through futexes, sysmon's short sleeps and clock reads, which made
// every small rxe send twice as slow under TCG and, at 16 KiB, made
// rsocket's 64 KiB transfers slow: on Linux 6.1 under TCG (docs/COST.md,
// session 24) raising it from 16 to 64 KiB took rsocket's 64 KiB round
// trip from 3929 to 2656 µs on rxe and from 3976 to 1890 on siw (rdma-core's
// rstream: 2425 and 1769), its 1 MiB round trip from 49949 to 44372 and
// from 31173 to 26749, and left perftest's 64 KiB and 4 KiB x 16 rates
// equal or better (rxe send_bw 4 KiB x 16 19.2 -> 29.4 MB/s; siw send_bw
// 64 KiB 45.6 -> 54.4, write_bw 4 KiB x 16 22.6 -> 27.3). 64 KiB covers
// rsocket's largest transfer (RS_MAX_TRANSFER) and is 64 packets at
// rxe's 1024-byte MTU: the longest a stop-the-world waits. (The choice
// stays at the call site: a method making it would be past the inliner's
// budget, a call on PostSend's path.)
const RawMax = 64 << 10

// Ring writes d's command to f for a doorbell that makes the kernel send
// out bytes: raw up to RawMax, a regular write beyond. For the parts of a
// long list (the one-request fast paths make the choice inline).
func Ring(f *abi.File, d *Doorbell, out uint64) error {
	var err error
	if out <= RawMax {
		err = f.Doorbell(d.Cmd[:])
	} else {
		err = f.Write(d.Cmd[:])
	}
	runtime.KeepAlive(d)
	return err
}

// Parse reports whether p is such a command, and for which QP handle: what
// the tests' fake command files check every doorbell write against.
func Parse(p []byte) (qpHandle uint32, ok bool) {
	ne := binary.NativeEndian
	if len(p) != CmdSize || ne.Uint32(p) != abi.IB_USER_VERBS_CMD_POST_SEND ||
		ne.Uint16(p[4:]) != uint16(CmdSize/4) || ne.Uint32(p[20:]) != 0 || ne.Uint32(p[24:]) != 0 ||
		ne.Uint32(p[28:]) != uint32(SendWRSize) {
		return 0, false
	}
	return ne.Uint32(p[16:]), true
}
