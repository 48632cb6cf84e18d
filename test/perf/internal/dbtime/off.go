//go:build !goverbs_dbtime

// Package dbtime reports the doorbell timer of a build with the tag
// goverbs_dbtime; in this build, without the tag, Reset and Report do
// nothing.
package dbtime

import "io"

// Reset starts a new record: nothing without the tag goverbs_dbtime.
func Reset() {}

// Report prints the doorbells' times: nothing without the tag.
func Report(io.Writer, string) {}
