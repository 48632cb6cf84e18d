//go:build goverbs_dbtime

package abi

import (
	"sync"
	"time"
)

// A build with the tag goverbs_dbtime times every raw doorbell write
// (File.Doorbell on a real descriptor): how long the write(2) took, read
// from the monotonic clock just before and just after the syscall. A
// measurement build (test/perf/rtt.sh DBTIME=1): on Linux 6.1 rxe runs a
// send's whole exchange inside its doorbell, so this is the kernel's part
// of a send, apart from the user code around it.

var dbtime struct {
	mu   sync.Mutex
	base time.Time
	d    []int64
}

func init() {
	dbtime.base = time.Now()
	dbtime.d = make([]int64, 0, 1<<20)
}

func doorbellStart() int64 { return int64(time.Since(dbtime.base)) }

func doorbellEnd(t0 int64) {
	d := int64(time.Since(dbtime.base)) - t0
	dbtime.mu.Lock()
	if len(dbtime.d) < cap(dbtime.d) {
		dbtime.d = append(dbtime.d, d)
	}
	dbtime.mu.Unlock()
}

// DoorbellTimes returns the durations in nanoseconds of the raw doorbell
// writes made since the last call, in order, and starts a new record. Only
// in builds with the tag goverbs_dbtime.
func DoorbellTimes() []int64 {
	dbtime.mu.Lock()
	defer dbtime.mu.Unlock()
	d := append([]int64(nil), dbtime.d...)
	dbtime.d = dbtime.d[:0]
	return d
}
