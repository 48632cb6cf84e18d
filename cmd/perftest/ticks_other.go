//go:build !amd64

package main

import "time"

// start is what ticks counts from.
var start = time.Now()

// ticks is the monotonic clock in nanoseconds where there is no time
// stamp counter read in assembly.
func ticks() int64 { return int64(time.Since(start)) + 1 }
