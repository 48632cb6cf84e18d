package uverbs

import "github.com/goverbs/goverbs/internal/kernel"

// NewAllocsKernel is the allocation tests' fake kernel, for the tests of
// package uverbs_test (allocs_ext_test.go).
func NewAllocsKernel(asyncFd int) kernel.Kernel { return &ioctlKernel{asyncFd: asyncFd} }

// RaceBuild reports whether the tests run under the race detector.
const RaceBuild = raceBuild
