//go:build !race

package rdmacm

const raceBuild = false
