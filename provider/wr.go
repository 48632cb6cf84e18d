package provider

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// WRError is a fast-path call refused before anything was posted: the
// whole list is left unposted and the queue is exactly as it was. Every
// provider returns it, from PostSend, PostRecv and an SRQ's PostRecv.
//
// Err is the cause, and errors.Is/errors.As reach it as they reach a slow
// path verb's: unix.EINVAL for a malformed request (or a QP not in a state
// to post), unix.ENOMEM for a queue without room for the whole list,
// ErrNotSupported for what the provider or device cannot carry, ErrClosed
// for a queue that was closed. The text after the errno says why.
type WRError struct {
	Provider string   // "rxe", "mlx5"
	Verb     string   // "PostSend", "PostRecv", "PostSRQRecv"
	Index    int      // index of the refused request in the list
	Opcode   WROpcode // the refused send request's opcode (PostSend only)
	Err      error
}

// Error names the provider, the verb, the refused request and the cause.
func (e *WRError) Error() string {
	if e.Verb == "PostSend" {
		return fmt.Sprintf("%s: %s: work request %d (%v): %v; nothing was posted", e.Provider, e.Verb, e.Index, e.Opcode, e.Err)
	}
	return fmt.Sprintf("%s: %s: work request %d: %v; nothing was posted", e.Provider, e.Verb, e.Index, e.Err)
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *WRError) Unwrap() error { return e.Err }

// Invalid is an EINVAL with the reason: errors.Is(err, unix.EINVAL) holds.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", unix.EINVAL, fmt.Sprintf(format, args...))
}

// MaxMessage is the largest message a work request may describe (2^31
// bytes, the InfiniBand limit).
const MaxMessage = 1 << 31

// SendQueueCaps is what checking a send request needs to know of its QP.
type SendQueueCaps struct {
	Type      QPType
	MaxSGE    uint32 // SGEs per request, as the QP was created
	MaxInline uint32 // bytes of inline data per request
}

// IB access bits a memory window may be bound with (IB_ACCESS_*, the
// values of IBV_ACCESS_*).
const (
	accessLocalWrite   = 1 << 0
	accessRemoteWrite  = 1 << 1
	accessRemoteRead   = 1 << 2
	accessRemoteAtomic = 1 << 3
	accessZeroBased    = 1 << 5
	mwAccess           = accessLocalWrite | accessRemoteWrite | accessRemoteRead | accessRemoteAtomic | accessZeroBased
)

// CheckSend is the provider-independent check of one send request, which
// every provider runs before its own (queue room, device limits, address
// handle type): the rules of the InfiniBand transports and of the kernel
// drivers, so that a request is refused alike whichever device takes it.
//
//   - The opcode is known and valid for the QP type: UD carries SEND and
//     SEND_WITH_IMM; UC adds RDMA_WRITE(_WITH_IMM) and BIND_MW; RC has them
//     all. SEND_WITH_INV is RC only (UC has no invalidate opcodes on the
//     wire), and so is LOCAL_INV (as rxe executes it). An XRC initiator
//     carries the RC operations that reach its target (not BIND_MW or
//     LOCAL_INV).
//   - Flags are FENCE, SIGNALED, SOLICITED and INLINE only.
//   - At most MaxSGE SGEs, describing at most 2^31 bytes.
//   - INLINE only on an operation that sends data (SEND*, RDMA_WRITE*),
//     with at most MaxInline bytes.
//   - An atomic has exactly one SGE of 8 bytes and an 8-byte aligned
//     remote address.
//   - LOCAL_INV and BIND_MW carry no SGL; a bind's access bits are local
//     write, remote read/write/atomic and zero-based only, its new rkey
//     keeps the window's index (only the low 8 bits, the key, change) and
//     its range does not wrap around.
//   - A UD send names an address handle and a 24-bit remote QPN.
//
// The error wraps unix.EINVAL and says why; it allocates only then.
func CheckSend(c *SendQueueCaps, wr *SendWR) error {
	if SendOK(c, wr) {
		return nil
	}
	return checkSend(c, wr)
}

// SendOK reports whether CheckSend accepts wr, without the reason, for the
// fast path's requests (a SEND, RDMA WRITE or READ of a few SGEs on an RC
// or UC QP): it is short enough to be inlined into a provider's PostSend
// loop, which calls CheckSend only when SendOK is false. It is false for
// whatever else (atomics, LOCAL_INV and BIND_MW have rules of their own,
// and so has UD, its address), or anything wrong: then CheckSend runs
// every rule and says why.
func SendOK(c *SendQueueCaps, wr *SendWR) bool {
	var total uint64
	for _, s := range wr.SGL {
		total += uint64(s.Length)
	}
	// The opcodes allowed by QP type and INLINE flag (1<<op is 0 for an op
	// past 31: no bit, refused).
	return plainOps[c.Type&7|QPType(wr.Flags&SendInline)]&(1<<wr.Opcode) != 0 &&
		wr.Flags&^sendFlags == 0 && uint32(len(wr.SGL)) <= c.MaxSGE && total <= MaxMessage &&
		(wr.Flags&SendInline == 0 || total <= uint64(c.MaxInline))
}

// PlainOps is the set of opcodes (bit 1<<op) that SendOK accepts on a QP
// of type t, with the INLINE flag or without: what a provider may post on
// a fast path of its own once the WR's flags, SGL and length pass the rest
// of SendOK's rules.
func PlainOps(t QPType, inline bool) uint32 {
	if t != QPTypeRC && t != QPTypeUC {
		return 0
	}
	if inline {
		t |= inl
	}
	return plainOps[t]
}

// The opcodes SendOK accepts, by QP type and INLINE flag: on RC and UC,
// those with no rule of their own, and of them, with INLINE, those that
// send data.
const (
	sendFlags = SendFence | SendSignaled | SendSolicited | SendInline
	inlineOps = 1<<WRSend | 1<<WRSendWithImm | 1<<WRSendWithInv | 1<<WRRDMAWrite | 1<<WRRDMAWriteWithImm
	ucOps     = 1<<WRSend | 1<<WRSendWithImm | 1<<WRRDMAWrite | 1<<WRRDMAWriteWithImm
	inl       = QPType(SendInline) // the INLINE flag's bit, as an index
)

var plainOps = [16]uint32{
	QPTypeRC: inlineOps | 1<<WRRDMARead, QPTypeUC: ucOps,
	QPTypeRC | inl: inlineOps, QPTypeUC | inl: ucOps & inlineOps,
}

// checkSend is CheckSend's every rule, in order: the first broken one is
// the error.
func checkSend(c *SendQueueCaps, wr *SendWR) error {
	op := wr.Opcode
	if op > WRSendWithInv {
		return Invalid("unknown opcode %d", uint8(op))
	}
	ok := false
	switch c.Type {
	case QPTypeRC:
		ok = true
	case QPTypeUC:
		switch op {
		case WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm, WRBindMW:
			ok = true
		}
	case QPTypeUD:
		ok = op == WRSend || op == WRSendWithImm
	case QPTypeXRCIni:
		// Every RC operation: those that reach the target, and the local
		// BIND_MW and LOCAL_INV (rdma-core's mlx5 posts them on an
		// IBV_QPT_XRC_SEND QP without the XRC segment).
		ok = true
	}
	if !ok {
		return Invalid("%v is not valid on a %v QP", op, c.Type)
	}
	if wr.Flags&^(SendFence|SendSignaled|SendSolicited|SendInline) != 0 {
		return Invalid("unknown send flags %#x", uint32(wr.Flags&^(SendFence|SendSignaled|SendSolicited|SendInline)))
	}
	if n := uint32(len(wr.SGL)); n > c.MaxSGE {
		return Invalid("%d SGEs, the QP takes at most %d", n, c.MaxSGE)
	}
	var total uint64
	for i := range wr.SGL {
		total += uint64(wr.SGL[i].Length)
	}
	if total > MaxMessage {
		return Invalid("the SGL describes %d bytes, more than the 2^31 a message may carry", total)
	}
	if wr.Flags&SendInline != 0 {
		switch op {
		case WRSend, WRSendWithImm, WRSendWithInv, WRRDMAWrite, WRRDMAWriteWithImm:
		default:
			return Invalid("inline data on %v, which sends none", op)
		}
		if total > uint64(c.MaxInline) {
			return Invalid("%d bytes inline, the QP takes at most %d", total, c.MaxInline)
		}
	}
	switch op {
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		if len(wr.SGL) != 1 || wr.SGL[0].Length != 8 {
			return Invalid("an atomic operation needs exactly one 8-byte SGE for the original value")
		}
		if wr.RemoteAddr%8 != 0 {
			return Invalid("atomic remote address %#x is not 8-byte aligned", wr.RemoteAddr)
		}
	case WRLocalInv, WRBindMW:
		if len(wr.SGL) != 0 {
			return Invalid("%v is a local operation and carries no SGL (%d SGEs given)", op, len(wr.SGL))
		}
		if op == WRBindMW {
			b := &wr.Bind
			if b.Access&^mwAccess != 0 {
				return Invalid("window access %#x has bits other than local write, remote read/write/atomic and zero-based", b.Access)
			}
			if b.NewRKey>>8 != b.MWRKey>>8 {
				return Invalid("new rkey %#x has another index than the window's rkey %#x (only the low 8 bits may change)", b.NewRKey, b.MWRKey)
			}
			if b.Addr+b.Length < b.Addr {
				return Invalid("window [%#x, +%#x) wraps around the address space", b.Addr, b.Length)
			}
		}
	}
	if c.Type == QPTypeUD {
		if wr.UD.AH == nil {
			return Invalid("a UD send needs an address handle (UD.AH)")
		}
		if wr.UD.RemoteQPN > 0xffffff {
			return Invalid("remote QPN %#x does not fit in 24 bits", wr.UD.RemoteQPN)
		}
	}
	return nil
}

// RecvOK reports whether CheckRecv accepts wr, without the reason: it is
// short enough to be inlined into a provider's PostRecv loop, which calls
// CheckRecv for the error only when RecvOK is false.
func RecvOK(maxSGE uint32, wr *RecvWR) bool {
	sgl := wr.SGL
	if len(sgl) == 1 { // the common receive: no loop to sum the lengths
		return maxSGE != 0 && sgl[0].Length <= MaxMessage
	}
	var total uint64
	for _, s := range sgl {
		total += uint64(s.Length)
	}
	return uint32(len(sgl)) <= maxSGE && total <= MaxMessage
}

// CheckRecv is the provider-independent check of one receive request for a
// queue whose WQEs hold maxSGE SGEs: at most maxSGE SGEs, describing at
// most 2^31 bytes. The error wraps unix.EINVAL.
func CheckRecv(maxSGE uint32, wr *RecvWR) error {
	if RecvOK(maxSGE, wr) {
		return nil
	}
	if n := uint32(len(wr.SGL)); n > maxSGE {
		return Invalid("%d SGEs, the queue takes at most %d", n, maxSGE)
	}
	var total uint64
	for i := range wr.SGL {
		total += uint64(wr.SGL[i].Length)
	}
	if total > MaxMessage {
		return Invalid("the SGL describes %d bytes, more than the 2^31 a message may carry", total)
	}
	return nil
}
