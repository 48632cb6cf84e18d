package uverbs

import (
	"math"
	"unsafe"
)

// The fast path's slices reach the provider through an interface method,
// and Go's escape analysis cannot see that the provider keeps nothing: it
// assumes the slice escapes, so a caller's composite literal
// (qp.PostSend([]uverbs.SendWR{{...}})) or stack array (var wc
// [16]uverbs.WorkCompletion) would be moved to the heap, an allocation or
// two on every call. The functions below hand the provider the same
// slice with its link to the caller's cut, as the runtime's own noescape
// does; the caller's values then stay on its stack.
//
// That is sound only because no provider keeps a work request, an SGE, a
// completion slice or anything pointing into them after its call returns
// (package provider's QP, SRQ and CQ say so): they copy what they need
// into the queues. A goroutine's stack may move during the call; the
// slice the provider holds is an ordinary pointer in its frame, which the
// runtime adjusts like any other.

// noescape returns p, hidden from escape analysis (the uintptr round trip
// is what hides it; unsafe.Add from nil keeps go vet's unsafeptr check
// quiet, and nocheckptr keeps -race's pointer checks from rejecting a
// pointer derived from nil, as they would).
//
//go:nocheckptr
func noescape(p unsafe.Pointer) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(nil), uintptr(p))
}

// The slices are rebuilt from their hidden data pointers by slicing an
// array type: a test for empty, a compare and a conditional move, the
// header kept in registers (5-7 instructions a call in all; unsafe.Slice's
// checks, or copying the header through memory, cost 11-14). The array
// types span 2 GiB (14 million sends, 67 million receives, 44 million
// completions); a longer list is cut to that length, which no provider
// can tell from the whole: a post stops at a full queue long before
// (mlx5's largest holds 32,768 requests), and a poll returns at most what
// a CQ holds (4 million on mlx5). An empty slice becomes nil: it may hold
// a nil pointer, and slicing a nil array pointer panics by the spec (Go
// 1.26 happens not to check it here, so no test would see it).
// nocheckptr: -race's pointer checks would take the array type's size for
// the object's. Three functions, not one generic: an array type's length
// must be a constant, and unsafe.Sizeof of a type parameter is not.

const (
	maxSends = math.MaxInt32 / int(unsafe.Sizeof(SendWR{}))
	maxRecvs = math.MaxInt32 / int(unsafe.Sizeof(RecvWR{}))
	maxWCs   = math.MaxInt32 / int(unsafe.Sizeof(WorkCompletion{}))
)

//go:nocheckptr
func sendsNoEscape(s []SendWR) []SendWR {
	if len(s) == 0 {
		return nil // no array to slice: a nil one would panic
	}
	n := min(len(s), maxSends)
	return (*[maxSends]SendWR)(noescape(unsafe.Pointer(unsafe.SliceData(s))))[:n:n]
}

//go:nocheckptr
func recvsNoEscape(s []RecvWR) []RecvWR {
	if len(s) == 0 {
		return nil // no array to slice: a nil one would panic
	}
	n := min(len(s), maxRecvs)
	return (*[maxRecvs]RecvWR)(noescape(unsafe.Pointer(unsafe.SliceData(s))))[:n:n]
}

//go:nocheckptr
func wcNoEscape(s []WorkCompletion) []WorkCompletion {
	if len(s) == 0 {
		return nil // no array to slice: a nil one would panic
	}
	n := min(len(s), maxWCs)
	return (*[maxWCs]WorkCompletion)(noescape(unsafe.Pointer(unsafe.SliceData(s))))[:n:n]
}
