//go:build !race

package abi

const raceBuild = false
