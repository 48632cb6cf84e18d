// Package mmap owns memory that devices see: page-aligned anonymous mappings
// for queues and registered buffers (off the Go heap, MADV_DONTFORK) and
// mappings of device files, each released by Close.
package mmap
