package uverbs

// CQPoll is a pass over a CQ's completions: libibverbs' extended CQ
// (ibv_start_poll, ibv_next_poll, ibv_end_poll and the ibv_wc_read_*
// accessors) in the shape of bufio.Scanner. It allocates nothing: the
// cursor lives in the CQ (one goroutine polls a CQ at a time, Poll, Wait
// and passes alike).
//
//	p := cq.StartPoll()
//	for p.Next() {
//		if p.Status() != uverbs.WCSuccess { ... }
//		handle(p.ID(), p.Opcode(), p.ByteLen(), p.Timestamp())
//	}
//	if err := p.End(); err != nil { ... }
//
// Each Next consumes one completion from the CQ (one provider poll of one
// entry: no syscall), so a pass that stops early loses nothing: what it did
// not reach stays in the CQ for the next pass or Poll. The accessors read
// the completion Next returned, until the next call of Next.
//
// A provider that tells the device its consumer index (mlx5: the CQ's
// doorbell record) does so once, at End, as libibverbs' mlx5 does at
// ibv_end_poll: every pass must end, or the device counts the entries it
// read as still in use.
type CQPoll struct {
	cq     *CQ
	wc     [1]WorkCompletion
	ts     [1]uint64
	err    error
	n      int
	polled bool // the provider's PollPass ran: EndPass is due
}

// StartPoll begins a pass over the CQ's completions (ibv_start_poll). It
// returns the CQ's own cursor: a new pass resets it.
func (cq *CQ) StartPoll() *CQPoll {
	p := &cq.pass
	*p = CQPoll{cq: cq}
	return p
}

// Next moves to the next completion and reports whether there was one
// (ibv_start_poll's and ibv_next_poll's 0). It returns false when the CQ is
// empty or on an error, which End reports (ErrClosed after Close).
func (p *CQPoll) Next() bool {
	if p.err != nil || p.cq == nil {
		return false
	}
	var n int
	var err error
	switch {
	case p.cq.passer != nil:
		n, err = p.cq.pollPass(p.wc[:], p.ts[:])
		p.polled = true
	case p.cq.stamps != nil:
		n, err = p.cq.pollStamps(p.wc[:], p.ts[:])
	default:
		n, err = p.cq.Poll(p.wc[:])
	}
	if err != nil {
		p.err = err
		return false
	}
	if n == 0 {
		return false
	}
	p.n++
	return true
}

// pollStamps is Poll through the provider's TimestampPoller.
func (cq *CQ) pollStamps(wc []WorkCompletion, ts []uint64) (int, error) {
	if cq.gone.Load() {
		return 0, errPollClosed
	}
	if cq.ctx.rec.Load() == nil {
		return cq.stamps.PollTimestamps(wc, ts)
	}
	sp := cq.ctx.begin("PollCQ")
	n, err := cq.stamps.PollTimestamps(wc, ts)
	sp.end(err)
	return n, err
}

// pollPass is Poll through the provider's PassPoller (timestamps into ts
// on a CQ created with them).
func (cq *CQ) pollPass(wc []WorkCompletion, ts []uint64) (int, error) {
	if cq.gone.Load() {
		return 0, errPollClosed
	}
	if cq.stamps == nil {
		ts = nil
	}
	if cq.ctx.rec.Load() == nil {
		return cq.passer.PollPass(wc, ts)
	}
	sp := cq.ctx.begin("PollCQ")
	n, err := cq.passer.PollPass(wc, ts)
	sp.end(err)
	return n, err
}

// End ends the pass (ibv_end_poll) and returns the error that stopped it,
// if any. The completions read are consumed: the provider tells the device
// so here if it had not already.
func (p *CQPoll) End() error {
	err := p.err
	if p.polled && p.cq != nil && !p.cq.gone.Load() {
		p.cq.passer.EndPass()
	}
	p.cq, p.polled = nil, false
	return err
}

// Count is the number of completions the pass has read.
func (p *CQPoll) Count() int { return p.n }

// WC is the current completion, every field of it (valid until Next).
func (p *CQPoll) WC() *WorkCompletion { return &p.wc[0] }

// ID is the current completion's work request id (wr_id).
func (p *CQPoll) ID() uint64 { return p.wc[0].ID }

// Status is the current completion's status.
func (p *CQPoll) Status() WCStatus { return p.wc[0].Status }

// Opcode is the current completion's opcode (ibv_wc_read_opcode; valid on
// a success only, as in libibverbs).
func (p *CQPoll) Opcode() WCOpcode { return p.wc[0].Opcode }

// VendorErr is the vendor error syndrome of a failed completion
// (ibv_wc_read_vendor_err).
func (p *CQPoll) VendorErr() uint32 { return p.wc[0].VendorErr }

// ByteLen is the byte count of a receive or a read
// (ibv_wc_read_byte_len).
func (p *CQPoll) ByteLen() uint32 { return p.wc[0].ByteLen }

// Imm is the immediate data (Flags has WCWithImm) or the invalidated rkey
// (WCWithInv) (ibv_wc_read_imm_data, ibv_wc_read_invalidated_rkey).
func (p *CQPoll) Imm() uint32 { return p.wc[0].Imm }

// QPNum is the number of the local QP the completion belongs to
// (ibv_wc_read_qp_num).
func (p *CQPoll) QPNum() uint32 { return p.wc[0].QPNum }

// SrcQP is the sender's QP number of a UD receive (ibv_wc_read_src_qp).
func (p *CQPoll) SrcQP() uint32 { return p.wc[0].SrcQP }

// Flags are the completion's flags (ibv_wc_read_wc_flags).
func (p *CQPoll) Flags() WCFlags { return p.wc[0].Flags }

// SLID is the sender's LID of a UD receive (ibv_wc_read_slid).
func (p *CQPoll) SLID() uint16 { return p.wc[0].SLID }

// SL is the service level of a UD receive (ibv_wc_read_sl).
func (p *CQPoll) SL() uint8 { return p.wc[0].SL }

// DLIDPathBits are the destination LID path bits of a UD receive
// (ibv_wc_read_dlid_path_bits).
func (p *CQPoll) DLIDPathBits() uint8 { return p.wc[0].DLIDPathBits }

// Timestamp is the device's free-running clock when the completion was
// written (ibv_wc_read_completion_ts): raw ticks, of which
// DeviceAttr.CompletionTimestampMask holds the valid bits and
// DeviceAttr.HCACoreClock the frequency (kHz). It is 0 on a CQ created
// without CQOptions.Timestamps (CQ.Timestamps reports which).
func (p *CQPoll) Timestamp() uint64 {
	if p.cq == nil || p.cq.stamps == nil {
		return 0
	}
	return p.ts[0]
}
