package abi

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock, one vDSO read (time.Now
// reads the wall clock too). runtime.nanotime is one of the symbols the
// runtime keeps linkable for the packages that use it this way.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
