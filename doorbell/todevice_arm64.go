package doorbell

// ToDevice orders every store to memory before it ahead of every store after
// it, as seen by a device (rdma-core's udma_to_device_barrier): write a WQE
// or CQ entry, call ToDevice, then publish the index or doorbell record that
// tells the device to read it.
//
// arm64: DMB OSHST, a store-store barrier over the outer-shareable domain, the
// domain a PCIe device's DMA observes (an inner-shareable DMB ISHST orders
// stores only for the other CPUs). amd64: a compiler barrier alone (see the
// amd64 build's documentation).
func ToDevice()
