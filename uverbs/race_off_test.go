//go:build !race

package uverbs

const raceBuild = false
