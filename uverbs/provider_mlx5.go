package uverbs

import (
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/mlx5"
)

// mlx5 (NVIDIA ConnectX, RDMA_DRIVER_MLX5): queues and doorbell records in
// user memory, doorbells by MMIO stores to mapped UAR pages, no syscall on
// the fast path.
func init() {
	drivers[DriverMLX5] = mlx5.Driver{}
	driverOptions[DriverMLX5] = func(o OpenOptions) provider.Driver {
		return mlx5.Driver{CQESize: o.MLX5.CQESize, NoBlueFlame: o.MLX5.NoBlueFlame}
	}
}
