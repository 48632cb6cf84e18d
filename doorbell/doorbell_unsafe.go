//go:build amd64 || arm64

// The //go:build line is needed: a name ending in _amd64_unsafe.go or
// _arm64_unsafe.go would not be constrained by architecture (the GOARCH must be
// the last element of a file name), and the project keeps unsafe.Pointer in
// files named *_unsafe.go. The instructions are in doorbell_amd64.s and
// doorbell_arm64.s.

package doorbell

import "unsafe"

// Supported reports whether this architecture has the barriers and MMIO
// stores in Go assembly. It is true on amd64 and arm64. Where it is false the
// functions panic, and a fast path that needs them (mlx5) reports
// ErrNotSupported instead of calling them.
const Supported = true

// FromDevice orders loads of memory a device wrote (rdma-core's
// udma_from_device_barrier): after reading the word that says an entry is
// valid (a CQE's owner bit), call FromDevice before reading the rest of the
// entry, so that no field is read from before the device finished writing it.
//
// amd64: LFENCE. x86 does not reorder loads with loads, but rdma-core issues
// LFENCE here so that no load, including a speculatively executed one, passes
// the check; goverbs does the same.
//
// arm64: DMB OSHLD, which orders earlier loads before later loads and stores
// over the outer-shareable domain, the one the device's writes arrive in.
func FromDevice()

// FlushWC makes stores to write-combining memory leave the CPU's
// write-combining buffers before any later store (rdma-core's
// mmio_flush_writes, also its mmio_wc_start/mmio_wc_end pair around a
// BlueFlame copy): call it after the doorbell-record store and before the
// BlueFlame or doorbell MMIO store, and again after that store.
//
// amd64: SFENCE, which drains the write-combining buffers and orders them
// with later stores; plain TSO does not cover write-combining (UC-/WC) memory.
//
// arm64: DSB ST. A DMB orders stores but does not wait for them, and
// write-combining (Normal non-cacheable) stores can sit merged in the CPU;
// DSB ST completes every earlier store before any later instruction runs.
func FlushWC()

// Store64BE stores v at addr with one 64-bit store, most significant byte
// first (the big-endian order mlx5 doorbells and WQEs use). It is the MMIO
// doorbell write (rdma-core's mmio_write64_be): the device must see the
// eight bytes as a single write, which Go's compiler does not promise for
// binary.BigEndian.PutUint64 on a byte slice. Unlike rdma-core, which takes an
// already big-endian value, Store64BE takes a host-order v and swaps it:
// pass binary.BigEndian.Uint64(b) to store bytes b as they are.
//
// addr must be 8-byte aligned (device memory faults on an unaligned access on
// arm64). Store64BE orders nothing: put the barriers around it.
//
// amd64: BSWAPQ then one MOVQ (MOVBE would do both but is not in the amd64
// baseline). arm64: REV then one 64-bit STR (MOVD).
//
//go:noescape
func Store64BE(addr unsafe.Pointer, v uint64)

// Store32BE stores v at addr with one 32-bit store, most significant byte
// first (rdma-core's mmio_write32_be and the big-endian doorbell-record
// words: a CQ's consumer index, a QP's send and receive counters). addr must
// be 4-byte aligned; no ordering is implied.
//
// amd64: BSWAPL then one MOVL. arm64: REVW then one 32-bit STR (MOVW).
//
//go:noescape
func Store32BE(addr unsafe.Pointer, v uint32)

// Copy64 copies the 64 bytes at src to dst with eight 8-byte stores to dst in
// ascending address order and nothing else (rdma-core's mmio_memcpy_x64 for
// one 64-byte chunk): the BlueFlame copy of a WQE into a write-combining
// doorbell register. Copy a longer WQE with one Copy64 per 64 bytes,
// ascending, between FlushWC calls. dst and src must be 8-byte aligned and
// must not overlap; byte order is kept as is.
//
// amd64: eight MOVQ loads then eight MOVQ stores, the 64-bit stores rdma-core
// uses on x86-64. 16-byte SSE stores (MOVOU) would mean fewer instructions,
// but eight ascending 8-byte stores is what the device documentation and
// rdma-core describe, and write-combining merges them into one 64-byte burst
// either way.
//
// arm64: four LDP loads then four STP stores, each STP writing two 64-bit
// registers, so the stores are the same eight aligned 8-byte accesses in
// ascending order. (rdma-core uses one 64-byte NEON store there when it can;
// an STP sequence keeps the 8-byte-store contract with no vector registers.)
//
//go:noescape
func Copy64(dst, src unsafe.Pointer)

// CopyWC64 is FlushWC, Copy64 and FlushWC in one call: the whole BlueFlame
// write of a one-WQEBB WQE (rdma-core's mmio_wc_start, one 64-byte
// mmio_memcpy_x64 and mmio_flush_writes). It writes what the three calls
// write in the same order; being one call, it spares the caller the
// register spills of the other two (a post on the mlx5 device model: ~20
// instructions). dst and src as for Copy64.
//
// amd64: SFENCE, Copy64's eight loads and eight stores, SFENCE. arm64:
// DSB ST, Copy64's LDP and STP pairs, DSB ST.
//
//go:noescape
func CopyWC64(dst, src unsafe.Pointer)
