//go:build goverbs_dbtime

package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/goverbs/goverbs/abi"
)

// dbtimeReset starts the doorbell timer's record (a build with the tag
// goverbs_dbtime: test/perf/rtt.sh DBTIME=1).
func dbtimeReset() { abi.DoorbellTimes() }

// dbtimeReport prints the doorbells' write times since dbtimeReset, as
// test/perf/rtt/wtime.c prints crtt's.
func dbtimeReport(w io.Writer, who string) {
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
