package mlx5

import "unsafe"

// ptr is the address of byte off of the UAR's mapping, for the doorbell
// stores. The mapping is device memory outside the Go heap and lives until
// the context's Close.
func (p *uarPage) ptr(off int) unsafe.Pointer {
	return unsafe.Pointer(&p.mem[off])
}
