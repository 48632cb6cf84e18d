package uverbs

import "github.com/goverbs/goverbs/provider/siw"

// siw devices get siw's driver data; see package siw.
func init() { drivers[DriverSIW] = siw.Driver{} }
