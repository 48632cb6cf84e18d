package uverbs

import "github.com/goverbs/goverbs/internal/kernel"

// NewAllocsKernel is the allocation tests' fake kernel, for the tests of
// package uverbs_test (allocs_ext_test.go).
func NewAllocsKernel(asyncFd int) kernel.Kernel { return &ioctlKernel{asyncFd: asyncFd} }

// NewEINTRKernel is NewAllocsKernel with a handle that makes its REG_MRs
// and ADVISE_MRs answer EINTR and counts them.
func NewEINTRKernel(asyncFd int) (kernel.Kernel, EINTRKernel) {
	k := &ioctlKernel{asyncFd: asyncFd}
	return k, EINTRKernel{k}
}

// EINTRKernel is NewEINTRKernel's handle on its fake kernel.
type EINTRKernel struct{ k *ioctlKernel }

// Interrupt makes the next n REG_MRs and ADVISE_MRs answer EINTR.
func (e EINTRKernel) Interrupt(n int) { e.k.eintr = n }

// Sent reports how many REG_MRs and ADVISE_MRs the kernel has seen.
func (e EINTRKernel) Sent() (regMRs, advises int) { return e.k.regMRs, e.k.advises }

// SkipCapChecks lets c send commands its capability checks would refuse
// (the fake kernels report no capabilities).
func SkipCapChecks(c *Context) { c.skipCapChecks = true }

// ODPTries is how many times RegMR sends REG_MR (and AdviseMR its
// ADVISE_MR) while the kernel answers EINTR.
const ODPTries = odpTries

// RaceBuild reports whether the tests run under the race detector.
const RaceBuild = raceBuild
