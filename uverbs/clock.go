package uverbs

import "github.com/goverbs/goverbs/abi"

// nanotime is the runtime's monotonic clock (abi.Nanotime, one vDSO read);
// the recorder times every recorded call with two of these. It inlines.
func nanotime() int64 { return abi.Nanotime() }
