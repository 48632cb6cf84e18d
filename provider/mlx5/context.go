package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/provider"
)

var ne = binary.NativeEndian

// Driver opens mlx5 provider contexts. The zero value is what programs
// want; the fields are rdma-core's environment knobs as Go options.
type Driver struct {
	// CQESize is the size of the CQEs of new CQs, 64 or 128 bytes. Zero
	// reads MLX5_CQE_SIZE from the environment (rdma-core's variable),
	// and defaults to 64.
	CQESize int
	// NoBlueFlame rings every send doorbell with one 8-byte store instead
	// of copying small WQEs to the BlueFlame register (rdma-core's
	// MLX5_SHUT_UP_BF=1, which is also read from the environment).
	NoBlueFlame bool
}

// Name is the provider's name, as rdma-core names it.
func (Driver) Name() string { return "mlx5" }

// What goverbs asks of the kernel in the ucontext request (rdma-core's
// defaults: 16 bfregs of which 4 low-latency, CQE version 1, 4 KiB and
// dynamic UARs, DEVX).
const (
	reqTotalBfregs     = 16
	reqLowLatency      = 4
	reqMaxCQEVersion   = 1
	reqLenFull         = 32 // sizeof(struct mlx5_ib_alloc_ucontext_req_v2)
	reqLenNoLibCaps    = 24 // offsetof(lib_caps): kernels before 4.15
	reqLenNoCQEVersion = 16 // offsetof(max_cqe_version): kernels before 4.5
)

// NewContext opens the driver's side of a context: GET_CONTEXT with the
// mlx5 ucontext request (retried without DEVX, then with the shorter
// requests older kernels know), then the doorbell pages: a dynamically
// allocated UAR (MLX5_IB_OBJECT_UAR), or the static UARs the kernel
// allocated with the context when it has no such object. On architectures
// without doorbell assembly it reports provider.ErrNotSupported before any
// command.
func (d Driver) NewContext(k provider.Kernel) (provider.Context, error) {
	if !doorbell.Supported {
		return nil, fmt.Errorf("mlx5: %w on GOARCH=%s: the fast path needs the doorbell package's MMIO stores and barriers (amd64, arm64)",
			provider.ErrNotSupported, runtime.GOARCH)
	}
	c := &context{k: k, f: k.File(), copyOnFork: k.CopyOnFork(), pageSize: mmap.PageSize()}
	c.cqeSize = d.CQESize
	if c.cqeSize == 0 {
		c.cqeSize = 64
		if v, err := strconv.Atoi(os.Getenv("MLX5_CQE_SIZE")); err == nil {
			c.cqeSize = v
		}
	}
	if c.cqeSize != 64 && c.cqeSize != 128 {
		return nil, fmt.Errorf("mlx5: CQE size %d: %w", c.cqeSize, invalid("it must be 64 or 128"))
	}
	c.noBF = d.NoBlueFlame || os.Getenv("MLX5_SHUT_UP_BF") == "1"
	if err := c.getContext(); err != nil {
		return nil, err
	}
	if err := c.setupUARs(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// context is an open mlx5 context: what the kernel said about it, its
// doorbell pages, and the table that maps a CQE to its QP or SRQ.
type context struct {
	k          provider.Kernel
	f          *abi.File
	resp       abi.Mlx5IbAllocUcontextResp
	reqLen     int        // the ucontext request length the kernel took
	devx       bool       // the context has a DEVX uid
	inOrder    inOrderCap // qp_data_in_order, read at the first query (data_in_order.go)
	askedDyn   bool       // the request carried MLX5_LIB_CAP_DYN_UAR
	cqeVersion uint8
	// lost is set when the device is gone (DeviceLost): every fast path
	// then fails with errDeviceLost. It sits with the other fields the
	// fast paths read, away from the resource table's 32 KiB.
	lost       atomic.Bool
	cqeSize    int
	noBF       bool
	copyOnFork bool
	pageSize   int

	mu       sync.Mutex
	maps     [][]byte // UAR mappings, unmapped by Close
	dynamic  bool     // UARs come from MLX5_IB_OBJECT_UAR
	cqPage   *uarPage // the UAR that arms every CQ
	freeBF   []*bfreg // dynamic: bfregs no QP uses
	static   []*bfreg // static: by bfreg number
	nextUidx uint32   // next user index to try (CQE version 1)
	closed   bool
	rsc      rscTable
	xsrqs    rscTable // XRC SRQs by SRQ number, for CQE version 0 (xrc.go)
	mws      mwTable
	// live holds the CQs, QPs and SRQs not closed yet: Close closes them
	// before it unmaps the doorbell pages their fast paths write to.
	live map[closer]struct{}
}

var _ provider.DeviceLoser = (*context)(nil)

// DeviceLost makes every fast-path call of the context fail with an EIO
// from now on: the device was disassociated, its doorbell pages are
// revoked and it completes nothing more. Each object's call in progress
// finishes first (DeviceLost takes each object's lock once), so none writes
// a doorbell after DeviceLost returned.
func (c *context) DeviceLost() {
	c.lost.Store(true)
	c.mu.Lock()
	objs := make([]closer, 0, len(c.live))
	for o := range c.live {
		objs = append(objs, o)
	}
	c.mu.Unlock()
	for _, o := range objs {
		switch o := o.(type) {
		case *cq:
			o.lose() // after a Poll or Arm in progress
		case *qp:
			o.sqMu.Lock()
			o.rqMu.Lock()
			// a barrier: waits for a PostSend or PostRecv in progress
			o.rqMu.Unlock()
			o.sqMu.Unlock()
		case *srq:
			o.mu.Lock()
			// a barrier: waits for a PostRecv in progress
			o.mu.Unlock()
		}
	}
}

// closer is a CQ, QP or SRQ of the context.
type closer interface{ Close() error }

// track registers a new object; it fails if the context is closed.
func (c *context) track(o closer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("mlx5: the context is %w", provider.ErrClosed)
	}
	if c.live == nil {
		c.live = map[closer]struct{}{}
	}
	c.live[o] = struct{}{}
	return nil
}

// forget unregisters an object that is closing.
func (c *context) forget(o closer) {
	c.mu.Lock()
	delete(c.live, o)
	c.mu.Unlock()
}

// getContext runs GET_CONTEXT with the ucontext request, retrying as
// rdma-core does: without DEVX, then without lib_caps, then without
// max_cqe_version, for kernels that refuse what they do not know.
func (c *context) getContext() error {
	req := abi.Mlx5IbAllocUcontextReqV2{
		TotalNumBfregs:      reqTotalBfregs,
		NumLowLatencyBfregs: reqLowLatency,
		Flags:               abi.MLX5_IB_ALLOC_UCTX_DEVX,
		MaxCqeVersion:       reqMaxCQEVersion,
		LibCaps:             abi.MLX5_LIB_CAP_4K_UAR | abi.MLX5_LIB_CAP_DYN_UAR,
	}
	if c.f.Policy() == abi.PolicyWrite {
		// Dynamic UARs are allocated by ioctl only: ask for static ones.
		req.LibCaps &^= abi.MLX5_LIB_CAP_DYN_UAR
	}
	attempts := []struct {
		n    int
		devx bool
	}{{reqLenFull, true}, {reqLenFull, false}, {reqLenNoLibCaps, false}, {reqLenNoCQEVersion, false}}
	var errs []error
	for _, a := range attempts {
		r := req
		if !a.devx {
			r.Flags = 0
		}
		in := append([]byte(nil), abi.Bytes(&r)[:a.n]...)
		out := make([]byte, unsafeSizeofResp)
		err := c.k.GetContext(in, out)
		if err == nil {
			copy(abi.Bytes(&c.resp), out)
			c.reqLen, c.devx = a.n, a.devx
			c.askedDyn = a.n >= reqLenFull && r.LibCaps&abi.MLX5_LIB_CAP_DYN_UAR != 0
			c.cqeVersion = c.resp.CqeVersion
			if a.n < reqLenNoLibCaps {
				c.cqeVersion = 0 // the kernel never saw max_cqe_version
			}
			if c.cqeVersion > 1 {
				return fmt.Errorf("mlx5: GET_CONTEXT: the kernel chose CQE version %d, goverbs knows 0 and 1", c.cqeVersion)
			}
			return nil
		}
		errs = append(errs, fmt.Errorf("request of %d bytes (DEVX %v): %w", a.n, a.devx, err))
		if isGone(err) {
			break
		}
	}
	return fmt.Errorf("mlx5: GET_CONTEXT refused every ucontext request: %w", errors.Join(errs...))
}

// unsafeSizeofResp is sizeof(struct mlx5_ib_alloc_ucontext_resp).
const unsafeSizeofResp = 72

func isGone(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, errNoDevice)
}

// Close closes every CQ, QP and SRQ still open (their fast paths then
// return errors wrapping provider.ErrClosed and touch no memory), then
// unmaps the UAR pages. The kernel destroys the UAR objects with the
// context, so none is destroyed here.
func (c *context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	objs := make([]closer, 0, len(c.live))
	for o := range c.live {
		objs = append(objs, o)
	}
	c.mu.Unlock()
	// QPs first: closing one cleans its CQs, which must still be open.
	for _, o := range objs {
		if _, ok := o.(*qp); ok {
			o.Close()
		}
	}
	for _, o := range objs {
		if _, ok := o.(*qp); !ok {
			o.Close()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, m := range c.maps {
		if err := c.f.Munmap(m); err != nil && first == nil {
			first = fmt.Errorf("mlx5: unmapping a UAR page: %w", err)
		}
	}
	c.maps = nil
	return first
}

// Udata returns the driver data of the verbs mlx5 gives no provider
// state: ALLOC_PD's response (the PD number) and ALLOC_MW's request.
func (c *context) Udata(v provider.Verb) (in, out []byte) {
	switch v {
	case provider.VerbAllocPD:
		return nil, make([]byte, 4) // struct mlx5_ib_alloc_pd_resp
	case provider.VerbAllocMW:
		return make([]byte, 8), nil // struct mlx5_ib_alloc_mw, zero: no KLMs
	}
	return nil, nil
}

// CreateAH prepares CREATE_AH: the kernel resolves the destination MAC on
// RoCE ports when it takes a response (MLX5_USER_CMDS_SUPP_UHW_CREATE_AH).
func (c *context) CreateAH(a provider.AHAttr) (provider.Setup[provider.AHCreated, provider.AH], error) {
	s := &ahSetup{attr: a}
	if c.resp.CmdsSuppUhw&abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH != 0 {
		s.out = make([]byte, 16) // struct mlx5_ib_create_ah_resp
	}
	return s, nil
}

// rsc is what a CQE's user index (or QP number) names.
type rsc struct {
	qp  *qp
	srq *srq
}

// rscTable maps 24-bit keys (user indexes with CQE version 1, QP numbers
// with version 0) to resources, read without a lock by Poll.
type rscTable struct {
	mu  sync.Mutex
	top [1 << rscLeafBits]atomic.Pointer[rscLeaf]
}

const rscLeafBits = 12

type rscLeaf [1 << rscLeafBits]atomic.Pointer[rsc]

func (t *rscTable) get(key uint32) *rsc {
	leaf := t.top[(key>>rscLeafBits)&(1<<rscLeafBits-1)].Load()
	if leaf == nil {
		return nil
	}
	return leaf[key&(1<<rscLeafBits-1)].Load()
}

func (t *rscTable) set(key uint32, r *rsc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	hi := (key >> rscLeafBits) & (1<<rscLeafBits - 1)
	leaf := t.top[hi].Load()
	if leaf == nil {
		if r == nil {
			return
		}
		leaf = new(rscLeaf)
		t.top[hi].Store(leaf)
	}
	leaf[key&(1<<rscLeafBits-1)].Store(r)
}

// maxUidx is the largest valid user index (0xffffff means "none").
const maxUidx = 0xfffffe

// allocUidx reserves a user index for a QP or SRQ. Indexes are handed out
// in increasing order and reused only after wrapping, so a CQE left over
// from a destroyed QP is unlikely to name a new one.
func (c *context) allocUidx(r *rsc) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tries := 0; tries < maxUidx; tries++ {
		c.nextUidx++
		if c.nextUidx > maxUidx {
			c.nextUidx = 1
		}
		if c.rsc.get(c.nextUidx) == nil {
			c.rsc.set(c.nextUidx, r)
			return c.nextUidx, nil
		}
	}
	return 0, fmt.Errorf("mlx5: no free user index: %w", errNoMemory)
}
