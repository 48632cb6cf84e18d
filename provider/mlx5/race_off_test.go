//go:build !race

package mlx5_test

const raceBuild = false
