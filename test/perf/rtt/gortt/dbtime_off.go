//go:build !goverbs_dbtime

package main

import "io"

// Without the tag goverbs_dbtime nothing times the doorbells.

func dbtimeReset() {}

func dbtimeReport(io.Writer, string) {}
