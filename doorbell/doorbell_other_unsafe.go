//go:build !amd64 && !arm64

// The //go:build line constrains this file: its name has no GOARCH element.

package doorbell

import (
	"runtime"
	"unsafe"
)

// Supported reports whether this architecture has the barriers and MMIO
// stores in Go assembly. It is false here: only amd64 and arm64 have them.
// The functions panic, and a fast path that needs them (mlx5) reports
// ErrNotSupported instead of calling them.
const Supported = false

const unsupported = "doorbell: no MMIO barriers or stores for GOARCH=" + runtime.GOARCH +
	" (only amd64 and arm64 have them); check doorbell.Supported before taking a fast path that rings device doorbells"

// ToDevice would order stores to memory before later stores a device
// observes (udma_to_device_barrier). It panics: this architecture has no
// implementation.
func ToDevice() { panic(unsupported) }

// FromDevice would order loads of device-written memory
// (udma_from_device_barrier). It panics: this architecture has no
// implementation.
func FromDevice() { panic(unsupported) }

// FlushWC would flush write-combining stores (mmio_flush_writes). It panics:
// this architecture has no implementation.
func FlushWC() { panic(unsupported) }

// Store64BE would store v big-endian at addr with one 64-bit MMIO store. It
// panics: this architecture has no implementation.
func Store64BE(addr unsafe.Pointer, v uint64) { panic(unsupported) }

// Store32BE would store v big-endian at addr with one 32-bit MMIO store. It
// panics: this architecture has no implementation.
func Store32BE(addr unsafe.Pointer, v uint32) { panic(unsupported) }

// Copy64 would copy 64 bytes to MMIO with ascending 8-byte stores. It
// panics: this architecture has no implementation.
func Copy64(dst, src unsafe.Pointer) { panic(unsupported) }

// CopyWC64 would be FlushWC, Copy64 and FlushWC in one call. It panics:
// this architecture has no implementation.
func CopyWC64(dst, src unsafe.Pointer) { panic(unsupported) }
