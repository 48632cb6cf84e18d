package uverbs

import "github.com/goverbs/goverbs/internal/kernel"

// NewAllocsKernel is the allocation tests' fake kernel, for the tests of
// package uverbs_test (allocs_ext_test.go).
func NewAllocsKernel(asyncFd int) kernel.Kernel { return &ioctlKernel{asyncFd: asyncFd} }

// NewEINTRKernel is NewAllocsKernel answering its first eintr REG_MRs
// with EINTR; regMRs reports how many REG_MRs it has seen.
func NewEINTRKernel(asyncFd, eintr int) (k kernel.Kernel, regMRs func() int) {
	ik := &ioctlKernel{asyncFd: asyncFd, eintr: eintr}
	return ik, func() int { return ik.regMRs }
}

// RegMRTries is how many times RegMR sends REG_MR while the kernel answers
// EINTR.
const RegMRTries = regMRTries

// RaceBuild reports whether the tests run under the race detector.
const RaceBuild = raceBuild
