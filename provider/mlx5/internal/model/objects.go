package model

import (
	"time"

	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// ucontext is a file's user context: what the ucontext request negotiated,
// its UARs and its objects by handle.
type ucontext struct {
	u           *ufile
	reqLen      int
	devx        bool
	cqeVersion  uint8
	dyn         bool // dynamic UARs only
	totBfregs   int
	lowLat      int
	staticPages []*uarPage
	bfregQPs    []int // static: QPs per bfreg
	dynPages    map[uint32]*uarPage
	objs        map[uint32]any
	nextHandle  uint32
	async       *eventSock
}

func (c *ucontext) add(o any) uint32 {
	c.nextHandle++
	c.objs[c.nextHandle] = o
	return c.nextHandle
}

func (c *ucontext) pages() []*uarPage {
	ps := append([]*uarPage(nil), c.staticPages...)
	for _, p := range c.dynPages {
		ps = append(ps, p)
	}
	return ps
}

// maybeFree releases a UAR page that was destroyed once nothing maps it.
func (c *ucontext) maybeFree(p *uarPage) {
	if p.destroyed && p.maps == 0 {
		delete(c.dynPages, p.id)
		p.mem.Close()
	}
}

// uarPage is one UAR: model memory the provider maps and writes doorbells to.
type uarPage struct {
	mem       *mmap.Region
	id        uint32 // dynamic: page id; static: UAR index
	handle    uint32
	maps      int
	bf        bool
	destroyed bool
	lastArm   uint64 // the CQ arm register as last seen
}

// reg views 8 bytes of the UAR page.
func (p *uarPage) reg(off int) []byte { return p.mem.Bytes()[off : off+8] }

// bfreg is one BlueFlame register a QP may ring.
type bfreg struct {
	page *uarPage
	off  int // offset of the register in the page
}

type mpd struct {
	handle uint32
	ctx    *ucontext
	users  int
}

type mmr struct {
	handle uint32
	key    uint32
	pd     *mpd
	start  uint64 // user address
	length uint64
	iova   uint64
	access uint32
	odp    bool // ON_DEMAND: nothing pinned, pages faulted in at access (odp.go)
	// implicit: the implicit ODP MR (start and I/O address 0, length
	// U64_MAX): the process's address space.
	implicit bool
	odpPages map[uint64]ODPAccess // ODP: the pages the device has mapped, by user address
}

type mah struct {
	handle uint32
	pd     *mpd
}

// mcq is a CQ as the device sees it: the CQE ring and doorbell record in
// the provider's memory, its producer index and arm state.
type mcq struct {
	handle     uint32
	cqn        uint32
	ctx        *ucontext
	userHandle uint64
	ch         *channel
	buf        []byte
	db         []byte
	log        uint32
	cqeSize    int
	stamps     bool   // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION: CQEs carry the clock
	modCount   uint16 // event moderation (MODIFY_CQ): completions per event
	modPeriod  uint16 // and microseconds; recorded, not applied to events
	pi         uint32
	uar        *uarPage
	users      int
	pins       pinSet // the ring(s) and doorbell record

	lastArm  uint32 // the arm word last seen in the doorbell record
	armed    bool
	armSol   bool
	armSN    uint32 // sequence number the next valid arm request carries
	events   uint32
	overflow bool
}

// QP states (enum ib_qp_state).
const (
	qpsReset = iota
	qpsInit
	qpsRTR
	qpsRTS
	qpsSQD
	qpsSQE
	qpsErr
)

// QP types (enum ib_uverbs_qp_type).
const (
	qptRC = 2
	qptUC = 3
	qptUD = 4
)

// dest is a QP's remote address from MODIFY_QP (struct ib_uverbs_qp_dest).
type dest struct {
	dlid     uint16
	global   bool
	dgid     [16]byte
	sgid     uint8
	hopLimit uint8
	sl       uint8
}

// mqp is a QP as the device sees it.
type mqp struct {
	ece        uint32 // the ECE options the firmware answered last (ece.go)
	handle     uint32
	qpn        uint32
	ctx        *ucontext
	typ        uint8
	pd         *mpd
	scq, rcq   *mcq
	srq        *msrq
	userHandle uint64
	sigAll     bool
	caps       [5]uint32 // max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline

	rq      []byte // receive ring
	sq      []byte // send ring
	db      []byte
	rqCnt   uint32
	rqShift uint32
	sqCnt   uint32
	uidx    uint32
	bfregs  []bfreg
	pins    pinSet // the rings and doorbell record

	state       uint8
	port        uint8
	pkeyIndex   uint16
	qkey        uint32
	access      uint32
	av          dest
	pathMTU     uint8
	destQPN     uint32
	rnrRetry    uint8
	minRNR      uint8
	retryCnt    uint8
	timeout     uint8
	sqPSN       uint32
	rqPSN       uint32
	maxRd       uint8
	maxDestRd   uint8
	sqPI, sqCI  uint32 // WQEBB counters: announced, executed
	rqPI, rqCI  uint32
	rnrTries    int
	retryTries  int // transport retries of the WQE at sqCI (no responder)
	rnrUntil    time.Time
	events      uint32
	lastDBCheck uint32 // send counter up to which the doorbell was checked

	xrcd *xrcdomain // an XRC target's domain (xrc.go)
	refs int        // an XRC target's handles: its creator's and OPEN_QP's
}

// msrq is an SRQ as the device sees it: it follows the next_wqe_index
// links of the WQEs from its own head.
type msrq struct {
	handle     uint32
	srqn       uint32
	ctx        *ucontext
	pd         *mpd
	userHandle uint64
	buf        []byte
	db         []byte
	cnt        uint32
	shift      uint32
	maxWR      uint32
	maxSGE     uint32
	uidx       uint32
	pi, ci     uint32 // WQEs posted (16-bit counter widened), consumed
	head       uint32 // next WQE to consume
	limit      uint32
	armed      bool
	users      int
	events     uint32
	pins       pinSet // the ring and doorbell record

	xrcd *xrcdomain // an XRC SRQ's domain, and the CQ its receives complete on
	cq   *mcq
}

// eventSock is a descriptor pair for completion or async events: the
// process reads one event per read() from user, the model writes to model.
// SOCK_SEQPACKET keeps each event a record, as the kernel's event files do.
type eventSock struct {
	user, model int
}

func newEventSock() (*eventSock, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &eventSock{user: fds[0], model: fds[1]}, nil
}

func (e *eventSock) send(b []byte) {
	unix.Sendto(e.model, b, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, nil)
}

func (e *eventSock) close() {
	if e.model >= 0 {
		unix.Close(e.model)
		e.model = -1
	}
}

// channel is a completion channel.
type channel struct {
	*eventSock
}

// release destroys everything the file's context holds, as closing a uverbs
// file makes the kernel do. UAR pages still mapped stay until unmapped.
func (u *ufile) release() {
	c := u.ctx
	if c == nil {
		return
	}
	d := u.d
	for _, o := range c.objs {
		switch o := o.(type) {
		case *mqp:
			if o.typ == qptXRCTgt {
				d.dropTgt(o)
				continue
			}
			delete(d.qps, o.qpn)
			o.pins.release()
		case *mopen:
			d.dropTgt(o.q)
		case *mcq:
			if o.uar != nil {
				d.serviceArmRegister(o.uar) // a doorbell written before the close
			}
			delete(d.cqs, o.cqn)
			o.pins.release()
		case *msrq:
			delete(d.srqs, o.srqn)
			o.pins.release()
			if o.xrcd != nil {
				d.dropXRCD(o.xrcd)
			}
		case *mmr:
			delete(d.mrs, o.key)
		case *mmw:
			delete(d.mws, o.key>>8)
		case *mxrcd:
			d.dropXRCD(o.x)
		}
	}
	if c.async != nil {
		c.async.close()
	}
	for _, p := range c.pages() {
		p.destroyed = true
		if p.maps == 0 {
			p.mem.Close()
		} else {
			d.orphans = append(d.orphans, p)
		}
	}
	c.staticPages, c.dynPages = nil, nil
	u.ctx = nil
}
