package mlx5

import (
	"errors"
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/doorbell"
)

// uarPage is one 4 KiB UAR (doorbell page) inside a mapping.
type uarPage struct {
	mem    []byte // the mapping the UAR lies in (File().Mmap)
	base   int    // offset of the UAR in mem
	id     uint32 // dynamic: page id (uar_page_index); static: UAR number
	handle uint32 // dynamic: the UAR object's handle
	bf     bool   // BlueFlame copies allowed (not an NC page)
}

// bfreg is one BlueFlame register: where a QP rings its send doorbell. Its
// two halves alternate, so that a BlueFlame copy never lands on the one
// the device may still be reading.
type bfreg struct {
	// mu serializes the register's writers where QPs share it (static
	// bfregs: the kernel hands one to several QPs). A dynamic bfreg is one
	// QP's alone (takeBfreg), whose sends PostSend already serializes:
	// ringSend takes no lock for it, as rdma-core's need_lock.
	mu     sync.Mutex
	shared bool
	page   *uarPage
	reg    int    // offset of the register in page.mem
	bfSize int    // BlueFlame bytes per half (bf_reg_size/2); 0: 8-byte doorbells only
	offset int    // the half to use next: 0 or bfSize
	index  uint32 // create_qp's bfreg_index (dynamic: the page id)
}

// setupUARs gets the context its doorbell pages. A kernel that granted
// dynamic UARs allocated no static ones (tot_bfregs 0): then one UAR is
// allocated through MLX5_IB_OBJECT_UAR and more as QPs need them. A kernel
// that ignored MLX5_LIB_CAP_DYN_UAR (it has no UAR object:
// EPROTONOSUPPORT) allocated static UARs with the context, which are mapped
// instead.
func (c *context) setupUARs() error {
	var dynErr error
	if c.askedDyn || c.resp.TotBfregs == 0 {
		p, err := c.allocDynamicUAR()
		if err == nil {
			c.mu.Lock()
			c.dynamic, c.cqPage = true, p
			c.mu.Unlock()
			return nil
		}
		dynErr = err
	}
	if c.resp.TotBfregs == 0 {
		return fmt.Errorf("mlx5: allocating a UAR (doorbell page): the kernel allocated no static UARs and %w", dynErr)
	}
	return c.mapStaticUARs()
}

// bfStride is the distance between BlueFlame registers.
func (c *context) bfStride() int {
	if c.resp.BfRegSize > 0 {
		return int(c.resp.BfRegSize)
	}
	return 512
}

// allocDynamicUAR allocates and maps one UAR (MLX5_IB_OBJECT_UAR,
// MLX5_IB_METHOD_UAR_OBJ_ALLOC), BlueFlame type first, then non-cached, and
// adds its bfregs to the free list.
func (c *context) allocDynamicUAR() (*uarPage, error) {
	p, err := c.allocUAR(abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF)
	if err != nil && !abi.IsNoIoctl(err) {
		p, err = c.allocUAR(abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC)
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := 0; k < bfRegsPerUAR; k++ {
		c.freeBF = append(c.freeBF, c.newBfreg(p, k, p.id))
	}
	return p, nil
}

func (c *context) newBfreg(p *uarPage, k int, index uint32) *bfreg {
	b := &bfreg{page: p, reg: p.base + bfRegOffset + k*c.bfStride(), index: index}
	if p.bf && !c.noBF {
		b.bfSize = int(c.resp.BfRegSize) / 2
	}
	return b
}

func (c *context) allocUAR(typ uint32) (*uarPage, error) {
	b := abi.NewIoctl(abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_ALLOC)
	defer b.Release()
	h := b.NewObject(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE)
	b.Uint64In(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, uint64(typ))
	var off [8]byte
	var length, page [4]byte
	b.PtrOut(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, off[:])
	b.PtrOut(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, length[:])
	b.PtrOut(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, page[:])
	if err := c.f.Ioctl(b); err != nil {
		return nil, err
	}
	handle := uint32(b.Result(h))
	n := int(ne.Uint32(length[:]))
	if n < uarSize {
		c.destroyUAR(handle)
		return nil, fmt.Errorf("mlx5: UAR of %d bytes, want at least %d", n, uarSize)
	}
	mem, err := c.f.Mmap(int64(ne.Uint64(off[:])), n)
	if err != nil {
		c.destroyUAR(handle)
		return nil, fmt.Errorf("mlx5: mapping a UAR at offset %#x: %w", ne.Uint64(off[:]), err)
	}
	c.mu.Lock()
	c.maps = append(c.maps, mem)
	c.mu.Unlock()
	return &uarPage{mem: mem, id: ne.Uint32(page[:]), handle: handle, bf: typ == abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF}, nil
}

func (c *context) destroyUAR(handle uint32) {
	b := abi.NewIoctl(abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY)
	b.Handle(abi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle)
	c.f.Ioctl(b) // the context's destruction frees it anyway
}

// mmapOffset is the file offset that maps UAR page index with command cmd
// (MLX5_IB_MMAP_*): the page number is cmd<<8 | index, index bits above 8
// moved to bit 16.
func (c *context) mmapOffset(cmd, index int) int64 {
	pg := cmd<<mmapCmdShift | index&mmapIndexMask | (index>>8)<<mmapExtIdxShift
	return int64(pg) * int64(c.pageSize)
}

// mapStaticUARs maps the UARs the kernel allocated with the context:
// tot_bfregs/2 UARs, num_uars_per_page of them per system page; each page
// write-combining if the kernel allows, else regular.
func (c *context) mapStaticUARs() error {
	nUAR := int(c.resp.TotBfregs) / bfRegsPerUAR
	perPage := int(c.resp.NumUarsPerPage)
	if perPage == 0 {
		perPage = 1
	}
	if perPage*uarSize > c.pageSize {
		return fmt.Errorf("mlx5: %d UARs of 4 KiB per %d-byte page", perPage, c.pageSize)
	}
	var pages []*uarPage
	for i := 0; i*perPage < nUAR; i++ {
		mem, err := c.f.Mmap(c.mmapOffset(abi.MLX5_IB_MMAP_WC_PAGE, i), c.pageSize)
		if err != nil {
			var err2 error
			mem, err2 = c.f.Mmap(c.mmapOffset(abi.MLX5_IB_MMAP_REGULAR_PAGE, i), c.pageSize)
			if err2 != nil {
				return fmt.Errorf("mlx5: mapping static UAR page %d: %w", i, errors.Join(err, err2))
			}
		}
		c.mu.Lock()
		c.maps = append(c.maps, mem)
		c.mu.Unlock()
		for j := 0; j < perPage && i*perPage+j < nUAR; j++ {
			pages = append(pages, &uarPage{mem: mem, base: j * uarSize, id: uint32(i*perPage + j), bf: true})
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.static = make([]*bfreg, int(c.resp.TotBfregs))
	for n := range c.static {
		b := c.newBfreg(pages[n/bfRegsPerUAR], n%bfRegsPerUAR, uint32(n))
		b.shared = true
		if n == 0 {
			b.bfSize = 0 // bfreg 0 is shared by every QP beyond the others: doorbells only
		}
		c.static[n] = b
	}
	c.cqPage = pages[0]
	return nil
}

// takeBfreg gives a new QP a dedicated bfreg (dynamic UARs), allocating a
// UAR page when none is free. With static UARs it returns nil: the kernel
// chooses, and staticBfreg finds it.
func (c *context) takeBfreg() (*bfreg, error) {
	c.mu.Lock()
	if !c.dynamic {
		c.mu.Unlock()
		return nil, nil
	}
	if n := len(c.freeBF); n > 0 {
		b := c.freeBF[n-1]
		c.freeBF = c.freeBF[:n-1]
		c.mu.Unlock()
		return b, nil
	}
	c.mu.Unlock()
	if _, err := c.allocDynamicUAR(); err != nil {
		return nil, fmt.Errorf("mlx5: allocating a UAR for a QP's doorbell: %w", err)
	}
	return c.takeBfreg()
}

// giveBfreg returns a dedicated bfreg to the free list.
func (c *context) giveBfreg(b *bfreg) {
	if b == nil || !c.dynamic {
		return
	}
	c.mu.Lock()
	c.freeBF = append(c.freeBF, b)
	c.mu.Unlock()
}

// staticBfreg is the static bfreg the kernel gave a QP.
func (c *context) staticBfreg(index uint32) (*bfreg, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(index) >= len(c.static) {
		return nil, fmt.Errorf("mlx5: the kernel gave the QP bfreg %d of %d", index, len(c.static))
	}
	return c.static[index], nil
}

// ringSend rings a QP's send doorbell after its WQEs and doorbell record
// are written: a BlueFlame copy of the one WQE posted (wqe, nbb WQEBBs at
// ring indexes first, first+1 …) when the register has BlueFlame and the
// WQE fits, else one 8-byte store of the last WQE's first control bytes.
func (b *bfreg) ringSend(sq *sendQueue, first, nbb uint32, single bool, ctrl uint64) {
	if b.shared {
		b.mu.Lock()
	}
	doorbell.FlushWC()
	if single && b.bfSize > 0 && int(nbb)*wqeBB <= b.bfSize {
		for i := uint32(0); i < nbb; i++ {
			doorbell.Copy64(b.page.ptr(b.reg+b.offset+int(i)*wqeBB), sq.bbPtr(first+i))
		}
	} else {
		doorbell.Store64BE(b.page.ptr(b.reg+b.offset), ctrl)
	}
	doorbell.FlushWC()
	b.offset ^= b.bfSize
	if b.shared {
		b.mu.Unlock()
	}
}

// ringOne is ringSend for a lone WQE of one WQEBB, wqe. It repeats
// ringSend's lock and flushes rather than share helpers: sync.Mutex's
// inlined Lock puts such helpers over the inlining budget, and the two
// calls cost a post ~21 instructions (measured).
func (b *bfreg) ringOne(wqe *[wqeBB]byte) {
	if b.shared {
		b.mu.Lock()
	}
	at := b.page.ptr(b.reg + b.offset)
	if b.bfSize >= wqeBB {
		doorbell.CopyWC64(at, bbAddr(wqe)) // FlushWC, Copy64, FlushWC
	} else {
		doorbell.FlushWC()
		doorbell.Store64BE(at, be.Uint64(wqe[:8]))
		doorbell.FlushWC()
	}
	b.offset ^= b.bfSize
	if b.shared {
		b.mu.Unlock()
	}
}
