package abi

import _ "unsafe" // for go:linkname

// Nanotime is the runtime's monotonic clock in nanoseconds: one vDSO read,
// where time.Now reads the wall clock too (two reads, each a syscall where
// the clock source has no vDSO, as under TCG with hpet). PassScheduler and
// uverbs (its recorder, CQ.Wait's spin) read it. runtime.nanotime is one of
// the symbols the runtime keeps linkable for the packages that use it this
// way.
//
//go:linkname Nanotime runtime.nanotime
func Nanotime() int64
