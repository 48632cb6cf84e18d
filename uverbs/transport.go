package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// CommandTransport says how a verb's command reached the kernel: by the
// ioctl interface (RDMA_VERBS_IOCTL, including write commands tunnelled
// through it), by write() of a framed command, or not at all.
type CommandTransport uint8

// Command transports (the numbers are package abi's; a test checks).
const (
	// CommandNone: no syscall at all (refused before the kernel, or work
	// in shared memory).
	CommandNone CommandTransport = 0
	// CommandIoctl: RDMA_VERBS_IOCTL.
	CommandIoctl CommandTransport = 1
	// CommandWrite: a write() on the command file.
	CommandWrite CommandTransport = 2
)

// String is "none", "ioctl" or "write".
func (t CommandTransport) String() string { return abi.Transport(t).String() }

// CommandPolicy chooses the command transport for commands the kernel
// offers both ways (OpenOptions.Transport).
type CommandPolicy uint8

// Command policies (the numbers are package abi's; a test checks).
const (
	// PolicyAuto is rdma-core's rule: ioctl first; a kernel without the
	// ioctl interface turns it off for the context, a method the kernel
	// lacks (EPROTONOSUPPORT) for that method only.
	PolicyAuto CommandPolicy = 0
	// PolicyIoctl uses ioctl only and fails where the kernel has none.
	PolicyIoctl CommandPolicy = 1
	// PolicyWrite uses write() for every command that has a write form.
	PolicyWrite CommandPolicy = 2
)

// String is "auto", "ioctl" or "write".
func (p CommandPolicy) String() string {
	switch p {
	case PolicyAuto:
		return "auto"
	case PolicyIoctl:
		return "ioctl"
	case PolicyWrite:
		return "write"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// MLX5Options tune the mlx5 (ConnectX) provider: rdma-core's environment
// variables, settable from the program. Zero values fall back to the
// variables, then to rdma-core's defaults.
type MLX5Options struct {
	// CQESize is the size of new CQs' entries, 64 or 128 bytes
	// (MLX5_CQE_SIZE; default 64).
	CQESize int
	// NoBlueFlame rings every send doorbell with one 8-byte store instead
	// of copying small WQEs to the BlueFlame register (MLX5_SHUT_UP_BF=1).
	NoBlueFlame bool
}

// Syscalls is the number of syscalls made on the context's command file
// so far: every command, queue mapping and doorbell write of the slow path
// and the fast path (rxe's doorbells are write()s; mlx5's are stores,
// which cost none).
func (c *Context) Syscalls() uint64 { return c.file.Syscalls() }

// Mappings is the number of mmap and munmap calls among Syscalls.
func (c *Context) Mappings() uint64 { return c.file.Mappings() }

// driverWith is driverFor with the OpenOptions that reach the provider.
func driverWith(id DriverID, o OpenOptions) provider.Driver {
	if f, ok := driverOptions[id]; ok {
		return f(o)
	}
	return driverFor(id)
}

// driverOptions configure the providers that have options, by driver id.
var driverOptions = map[DriverID]func(OpenOptions) provider.Driver{}
