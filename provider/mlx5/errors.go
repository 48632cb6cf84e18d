package mlx5

import "golang.org/x/sys/unix"

var (
	errNoDevice = unix.ENODEV
	errNoMemory = unix.ENOMEM
)
