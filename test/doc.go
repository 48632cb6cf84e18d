// Package test holds goverbs' end-to-end suites. The kernel rig that boots
// Debian's kernels with rxe and siw under QEMU lives in test/rig.
//
// Its packages import the public API (uverbs, mmap) only.
package test
