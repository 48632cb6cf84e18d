package doorbell

import "sync/atomic"

// order is what ToDevice loads on amd64; nothing stores to it.
var order atomic.Uint32

// ToDevice orders every store to memory before it ahead of every store after
// it, as seen by a device (rdma-core's udma_to_device_barrier): write a WQE
// or CQ entry, call ToDevice, then publish the index or doorbell record that
// tells the device to read it.
//
// amd64: no barrier instruction. x86 keeps stores in program order (TSO) for
// write-back memory, so only the compiler must not reorder them, which is
// all rdma-core's barrier does there. ToDevice is one sync/atomic load of
// a package word: Go's compiler keeps every memory access on its side of a
// sync/atomic operation, and the load inlines (one MOVL from a cached line),
// where a call to an assembly function (an earlier version) made every
// caller spill its registers around it.
//
// arm64: DMB OSHST, a store-store barrier over the outer-shareable domain, the
// domain a PCIe device's DMA observes (an inner-shareable DMB ISHST orders
// stores only for the other CPUs).
func ToDevice() { order.Load() }
