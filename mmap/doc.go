// Package mmap owns memory that devices see: page-aligned anonymous mappings
// for queues and registered buffers (off the Go heap, MADV_DONTFORK) and
// mappings of device files, each released by Close.
//
// Device-visible memory never lives on the Go heap: a heap object is freed
// once Go code stops referencing it, while a device keeps reading and writing
// a buffer until its MR, CQ or QP is destroyed. A Region's memory lives until
// its Close, and its address (Addr) is what commands hand to the kernel.
//
// Anonymous memory is MAP_PRIVATE|MAP_ANONYMOUS, zeroed and prefaulted, and
// marked MADV_DONTFORK (VM_DONTCOPY, shown as "dc" in /proc/self/smaps'
// VmFlags) so that a fork cannot leave the parent writing to a copied page
// while the device still targets the pinned original. Set
// Options.CopyOnFork when the kernel reports copy-on-fork for pinned pages
// (netlink RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK), as rdma-core's
// ibv_is_fork_initialized does.
//
// Memory shared with another agent (the kernel, a peer's RDMA writes into
// a registered buffer) is read and written through typed atomic views
// (Region.Uint32, Region.Uint64): Load is a load-acquire and Store a
// store-release. The views and Region.Pointer (the address of a byte, for
// the doorbell-record stores of package doorbell) allocate nothing; misuse
// (an offset out of range or misaligned, a closed region) panics. Device
// pages mapped from a uverbs fd (rxe queues, mlx5 UARs) are not Regions:
// package abi maps them through its File, which ties their unmapping to the
// fd's lifetime.
//
// Every use of package unsafe is in a file named *_unsafe.go. The syscalls
// here take pointers to the mappings themselves, never to Go memory, so no
// runtime.KeepAlive is needed around them.
//
// It owns device-visible memory off the Go heap and imports nothing of
// goverbs.
package mmap
