package uverbs

import "fmt"

// ReregAttr is what a re-registration changes to (the fields the Rereg
// flags name).
type ReregAttr struct {
	PD     *PD    // ReregPD: the new protection domain
	Buf    []byte // ReregTranslation: the new memory (its address is the new IOVA)
	Access Access // ReregAccess: the new access rights
}

// Rereg re-registers the region (REREG_MR: one syscall): a new address
// range, PD or access rights, the attributes change names; the keys may
// change.
func (mr *MR) Rereg(attr ReregAttr, change Rereg) error {
	var addr uint64
	if change&ReregTranslation != 0 {
		if len(attr.Buf) == 0 {
			return argError("ReregMR", mr.PD().ctx.dev.Name, "ReregTranslation with an empty buffer")
		}
		addr = sliceAddr(attr.Buf)
	}
	return mr.rereg(change, attr.PD, addr, len(attr.Buf), attr.Access)
}

// SGE is the scatter/gather element for bytes [off, off+n) of the region:
// its address in the region's IOVA space and its local key. It panics,
// naming the region and the range, when the range is not inside the region
// (an index out of range, as slicing the region's memory would).
func (mr *MR) SGE(off, n int) SGE {
	mr.mu.RLock() // Rereg may change the key, range and IOVA
	iova, length, lkey := mr.iova, mr.length, mr.lkey
	mr.mu.RUnlock()
	if off < 0 || n < 0 || n > length-off || uint64(n) > 1<<31 {
		panic(fmt.Sprintf("uverbs: MR.SGE(%d, %d) of a %d-byte MR (lkey %#x): range out of the region", off, n, length, lkey))
	}
	return SGE{Addr: iova + uint64(off), Length: uint32(n), LKey: lkey}
}

// RemoteAddr is the address a peer names byte off of the region by in RDMA
// and atomic work requests (with RKey): the region's IOVA plus off.
func (mr *MR) RemoteAddr(off int) uint64 { return mr.IOVA() + uint64(off) }
