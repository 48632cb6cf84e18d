package mmap

import (
	"bytes"
	"fmt"
	"os"
)

// CountMappings returns the number of mappings in this process, one per line
// of /proc/self/maps. Tests use it as a leak check: a Close that forgets an
// munmap leaves the count higher than it was. Adjacent mappings with the same
// permissions and flags may be merged by the kernel into one line, so compare
// counts taken around code that maps and unmaps, not absolute numbers.
func CountMappings() (int, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("mmap: counting mappings: %w", err)
	}
	return bytes.Count(b, []byte{'\n'}), nil
}
