//go:build race

package rdmacm

// raceBuild: under the race detector sync.Pool drops a quarter of what is
// put back, so allocation counts are not the program's.
const raceBuild = true
