// Package doorbell holds the MMIO stores and memory barriers the fast path
// needs, in Go assembly for amd64 and arm64. On other architectures
// Supported is false and the functions panic; providers that need them report
// ErrNotSupported there.
package doorbell
