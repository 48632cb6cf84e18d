package mlx5

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var (
	errNoDevice = unix.ENODEV
	errNoMemory = unix.ENOMEM
	// errCQClosed is Poll's and Arm's answer on a closed CQ (or a CQ of
	// a closed context): built once, so that answering allocates nothing.
	errCQClosed = fmt.Errorf("mlx5: CQ: %w", provider.ErrClosed)
)
