package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// The workload's fixed parameters (verbs_cost.c uses the same).
const (
	port       = 1
	cqEntries  = 256
	qpDepth    = 64 // max_send_wr and max_recv_wr
	maxInline  = 64
	startPSN   = 0x100
	bigMR      = 16 << 20 // MRs this large and larger run -big-n times
	queryGIDIx = 0        // query_gid reads GID index 0 (every device has it)
)

// mrAccess is every MR's access: local write, remote write and read.
const mrAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead

// mrSizes are the registered sizes; msgSizes the messages posted.
var (
	mrSizes  = []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}
	msgSizes = []int64{8, 64, 4 << 10, 64 << 10}
)

// sizeName is "8B", "4KiB", "1MiB".
func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// parseSize reads "256MiB", "16M", "4k", "65536".
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mul = strings.TrimSuffix(t, u.suf), u.m
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mul, nil
}

// opNames are the PostSend opcodes measured, by row-name part.
var opNames = []struct {
	name string
	op   uverbs.WROpcode
}{{"send", uverbs.WRSend}, {"write", uverbs.WRRDMAWrite}, {"read", uverbs.WRRDMARead}}

// postSendRow names a PostSend row: post_send_write_8B_inline.
func postSendRow(op string, size int64) string {
	n := "post_send_" + op + "_" + sizeName(size)
	if size == 8 && op != "read" {
		n += "_inline"
	}
	return n
}

// specs lists every row in workload order.
func specs() []spec {
	s := []spec{
		{"open_device", "slow", "uverbs.Open", 0},
		{"close_device", "slow", "Context.Close", 0},
		{"query_device", "slow", "Context.QueryDevice", 0},
		{"query_port", "slow", "Context.QueryPort", 0},
		{"query_gid", "slow", "Context.QueryGID", 0},
		{"alloc_pd", "slow", "Context.AllocPD", 0},
		{"dealloc_pd", "slow", "PD.Close", 0},
	}
	for _, z := range mrSizes {
		s = append(s, spec{"reg_mr_" + sizeName(z), "slow", "PD.RegMR", z}, spec{"dereg_mr_" + sizeName(z), "slow", "MR.Close", z})
	}
	s = append(s,
		spec{"create_cq", "slow", "Context.CreateCQ", 0},
		spec{"destroy_cq", "slow", "CQ.Close", 0},
		spec{"create_qp", "slow", "PD.CreateQP", 0},
		spec{"destroy_qp", "slow", "QP.Close", 0},
		spec{"modify_qp_init", "slow", "QP.Modify", 0},
		spec{"modify_qp_rtr", "slow", "QP.Modify", 0},
		spec{"modify_qp_rts", "slow", "QP.Modify", 0},
		spec{"modify_qp_err", "slow", "QP.Modify", 0},
		spec{"modify_qp_reset", "slow", "QP.Modify", 0},
		spec{"create_ah", "slow", "PD.CreateAH", 0},
		spec{"destroy_ah", "slow", "AH.Close", 0},
	)
	for _, op := range opNames {
		for _, z := range msgSizes {
			s = append(s, spec{postSendRow(op.name, z), "fast", "QP.PostSend", z})
		}
	}
	s = append(s,
		spec{"post_recv", "fast", "QP.PostRecv", 0},
		spec{"poll_cq_empty", "fast", "CQ.Poll", 0},
		spec{"poll_cq", "fast", "CQ.Poll", 0},
		spec{"pingpong_send_64B", "fast", "QP.PostSend+CQ.Poll", 64},
		spec{"msg_rate_write_64B", "fast", "QP.PostSend+CQ.Poll", 64},
	)
	return append(s, cmSpecs()...)
}

// workload runs the rows on one device.
type workload struct {
	b        *bench
	dev      uverbs.Device
	n, bigN  int
	maxMR    int64
	gidIndex int
	ctx      *uverbs.Context
	pd       *uverbs.PD
	gid      [16]byte
	gidOK    bool
	gidErr   error
	// overheadOn measures the Recorder's overhead after the fast path.
	overheadOn bool
	stderr     io.Writer
}

// errStop ends a cycle early without failing a row.
var errStop = errors.New("stop")

// slowPath measures every slow-path row.
func (w *workload) slowPath() error {
	b, dev := w.b, w.dev
	// open_device, close_device: a context of its own each time.
	err := b.cycle(w.n, func(p *phase) error {
		var c *uverbs.Context
		err := p.call("open_device", nil, 1, func(rec *uverbs.Recorder) (bool, error) {
			var err error
			c, err = uverbs.OpenWith(dev, uverbs.OpenOptions{Recorder: rec})
			if c != nil {
				c.SetRecorder(nil)
			}
			return true, err
		})
		if err != nil {
			return err
		}
		return p.do("close_device", c, c.Close)
	})
	if err != nil {
		return err
	}

	ctx, err := uverbs.Open(dev)
	if err != nil {
		return err
	}
	w.ctx = ctx
	b.cycle(w.n, func(p *phase) error {
		p.do("query_device", ctx, func() error { _, err := ctx.QueryDevice(); return err })
		p.do("query_port", ctx, func() error { _, err := ctx.QueryPort(port); return err })
		p.do("query_gid", ctx, func() error { _, err := ctx.QueryGID(port, queryGIDIx); return err })
		return nil
	})

	if err := b.cycle(w.n, func(p *phase) error {
		var pd *uverbs.PD
		if err := p.do("alloc_pd", ctx, func() (err error) { pd, err = ctx.AllocPD(); return }); err != nil {
			return err
		}
		return p.do("dealloc_pd", ctx, pd.Close)
	}); err != nil {
		return err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	w.pd = pd

	w.memoryRegions()

	b.cycle(w.n, func(p *phase) error {
		var cq *uverbs.CQ
		if err := p.do("create_cq", ctx, func() (err error) { cq, err = ctx.CreateCQ(cqEntries, uverbs.CQOptions{}); return }); err != nil {
			return err
		}
		return p.do("destroy_cq", ctx, cq.Close)
	})

	cq, err := ctx.CreateCQ(cqEntries, uverbs.CQOptions{})
	if err != nil {
		return err
	}
	defer cq.Close()
	b.cycle(w.n, func(p *phase) error {
		var qp *uverbs.QP
		if err := p.do("create_qp", ctx, func() (err error) { qp, err = pd.CreateQP(w.qpInit(cq, cq)); return }); err != nil {
			return err
		}
		return p.do("destroy_qp", ctx, qp.Close)
	})

	w.transitions(cq)

	// create_ah, destroy_ah: the address of this port's GID -g.
	if err := w.loadGID(); err != nil {
		b.skip("create_ah", err.Error())
		b.skip("destroy_ah", "not reached: no GID")
	} else {
		b.cycle(w.n, func(p *phase) error {
			var ah *uverbs.AH
			if err := p.do("create_ah", ctx, func() (err error) { ah, err = pd.CreateAH(w.av()); return }); err != nil {
				b.skip("destroy_ah", "not reached: create_ah failed")
				return err
			}
			return p.do("destroy_ah", ctx, ah.Close)
		})
	}
	return nil
}

// memoryRegions registers and deregisters prefixes of one prefaulted
// buffer of the largest size measured.
func (w *workload) memoryRegions() {
	b := w.b
	var sizes []int64
	for _, z := range mrSizes {
		if z > w.maxMR {
			why := fmt.Sprintf("larger than -mr-max %s", sizeName(w.maxMR))
			b.skip("reg_mr_"+sizeName(z), why)
			b.skip("dereg_mr_"+sizeName(z), why)
			continue
		}
		sizes = append(sizes, z)
	}
	if len(sizes) == 0 {
		return
	}
	buf, err := mmap.Anonymous(int(sizes[len(sizes)-1]))
	if err != nil {
		for _, z := range sizes {
			b.skip("reg_mr_"+sizeName(z), err.Error())
			b.skip("dereg_mr_"+sizeName(z), err.Error())
		}
		return
	}
	defer buf.Close()
	for _, z := range sizes {
		n := w.n
		if z >= bigMR {
			n = w.bigN
		}
		reg, dereg := "reg_mr_"+sizeName(z), "dereg_mr_"+sizeName(z)
		b.cycle(n, func(p *phase) error {
			var mr *uverbs.MR
			if err := p.do(reg, w.ctx, func() (err error) { mr, err = w.pd.RegMR(buf.Bytes()[:z], mrAccess); return }); err != nil {
				b.skip(dereg, "not reached: "+reg+" failed")
				return err
			}
			return p.do(dereg, w.ctx, mr.Close)
		})
	}
}

func (w *workload) qpInit(scq, rcq *uverbs.CQ) uverbs.QPInit {
	return uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: scq, RecvCQ: rcq,
		Cap: uverbs.QPCap{MaxSendWR: qpDepth, MaxRecvWR: qpDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: maxInline}}
}

// loadGID finds the source GID: index -g, or with -g -1 the port's first
// RoCE v2 GID holding an IPv4 address (the rig's rxe0: index 1), else its
// first GID (siw: index 0). verbs_cost.c chooses the same way.
func (w *workload) loadGID() error {
	if w.gidOK || w.gidErr != nil {
		return w.gidErr
	}
	w.gidErr = w.chooseGID()
	w.gidOK = w.gidErr == nil
	return w.gidErr
}

func (w *workload) chooseGID() error {
	if w.gidIndex < 0 {
		table, err := w.ctx.QueryGIDTable()
		if err != nil {
			return fmt.Errorf("GID table of %s: %w", w.dev.Name, err)
		}
		for _, e := range table {
			if e.Port != port {
				continue
			}
			if w.gidIndex < 0 {
				w.gidIndex = e.Index
			}
			if e.Type == uverbs.GIDTypeRoCEv2 && isIPv4Mapped(e.GID) {
				w.gidIndex = e.Index
				break
			}
		}
		if w.gidIndex < 0 {
			return fmt.Errorf("%s port %d has no GID", w.dev.Name, port)
		}
	}
	e, err := w.ctx.QueryGID(port, w.gidIndex)
	if err != nil {
		return fmt.Errorf("GID %d of %s port %d: %w", w.gidIndex, w.dev.Name, port, err)
	}
	w.gid = e.GID
	return nil
}

// isIPv4Mapped: ::ffff:a.b.c.d.
func isIPv4Mapped(g [16]byte) bool {
	for _, c := range g[:10] {
		if c != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// endpoint is this port's GID -g with QP qpn: loopback, through a GRH.
func (w *workload) endpoint(qpn uint32) uverbs.Endpoint {
	return uverbs.Endpoint{QPN: qpn, PSN: startPSN, GID: w.gid, GIDIndex: w.gidIndex, Port: port}
}

// av is the address of this port's GID -g.
func (w *workload) av() uverbs.AHAttr { return w.endpoint(0).PathTo(w.endpoint(0), connectOptions) }

// connectOptions are the connection's settings (ibv_rc_pingpong's and the
// conformance suite's values; test/cost/verbs_cost.c uses the same).
var connectOptions = uverbs.ConnectOptions{Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead, MTU: uverbs.MTU1024,
	MaxDestRDAtomic: 4, MinRNRTimer: 1, MaxRDAtomic: 4}

// steps are the transitions of a QP connected to QP remote (INIT, RTR,
// RTS), as uverbs.QP.Connect makes them; ibvcost times each.
func (w *workload) steps(remote uint32) []uverbs.QPTransition {
	return uverbs.ConnectSteps(uverbs.QPTypeRC, w.endpoint(0), w.endpoint(remote), connectOptions)
}

// transitions takes one RC QP, connected to itself, round RESET → INIT →
// RTR → RTS → ERR → RESET.
func (w *workload) transitions(cq *uverbs.CQ) {
	b := w.b
	qp, err := w.pd.CreateQP(w.qpInit(cq, cq))
	if err != nil {
		for _, r := range []string{"modify_qp_init", "modify_qp_rtr", "modify_qp_rts", "modify_qp_err", "modify_qp_reset"} {
			b.skip(r, err.Error())
		}
		return
	}
	defer qp.Close()
	if err := w.loadGID(); err != nil {
		b.skip("modify_qp_rtr", err.Error())
		b.skip("modify_qp_rts", "not reached: no GID")
	}
	modify := func(a *uverbs.QPAttr, m uverbs.QPAttrMask) func() error {
		return func() error { return qp.Modify(a, m) }
	}
	steps := w.steps(qp.QPN())
	step := func(i int) func() error { return modify(&steps[i].Attr, steps[i].Mask) }
	b.cycle(w.n, func(p *phase) error {
		if err := p.do("modify_qp_init", w.ctx, step(0)); err != nil {
			b.skip("modify_qp_rtr", "not reached: INIT failed")
			b.skip("modify_qp_rts", "not reached: INIT failed")
			return err
		}
		if w.gidOK {
			if err := p.do("modify_qp_rtr", w.ctx, step(1)); err != nil {
				b.skip("modify_qp_rts", "not reached: RTR failed")
			} else {
				p.do("modify_qp_rts", w.ctx, step(2))
			}
		}
		p.do("modify_qp_err", w.ctx, modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState))
		if err := p.do("modify_qp_reset", w.ctx, modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState)); err != nil {
			return errStop
		}
		return nil
	})
}
