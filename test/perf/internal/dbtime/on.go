//go:build goverbs_dbtime

// Package dbtime reports the doorbell timer of a build with the tag
// goverbs_dbtime (abi.DoorbellTimes: each raw doorbell write(2)'s time), as
// test/perf/rtt/wtime.c reports a C program's; without the tag Reset and
// Report do nothing. For the measurement tools under test/perf.
package dbtime

import (
	"fmt"
	"io"
	"slices"

	"github.com/goverbs/goverbs/abi"
)

// Reset starts a new record.
func Reset() { abi.DoorbellTimes() }

// Report prints "WHO doorbell n N p50 X mean Y us" for the doorbells since
// Reset, if there were any.
func Report(w io.Writer, who string) {
	d := abi.DoorbellTimes()
	if len(d) == 0 {
		return
	}
	var sum int64
	for _, v := range d {
		sum += v
	}
	slices.Sort(d)
	fmt.Fprintf(w, "%s doorbell n %d p50 %.2f mean %.2f us\n", who, len(d), float64(d[len(d)/2])/1e3, float64(sum)/float64(len(d))/1e3)
}
