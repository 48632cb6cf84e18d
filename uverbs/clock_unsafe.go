package uverbs

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock: one vDSO read, where
// time.Now reads the wall clock too (two reads, each a syscall where the
// clock source has no vDSO, as under TCG with hpet). The recorder times
// every recorded call with two of these. runtime.nanotime is one of the
// symbols the runtime keeps linkable for the packages that use it this way.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
