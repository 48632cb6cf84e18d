// Package abi is the Linux RDMA user/kernel ABI in Go: command numbers, the
// uverbs structs (generated from the uapi headers), the ioctl attribute
// builder, write() command framing, and the one syscall chokepoint every
// command, doorbell write and mapping goes through.
//
// Nothing here is stable API: it follows the kernel. Programs use package
// uverbs; providers use abi to frame their driver data.
//
// It owns the ABI layer: the generated uapi structs and constants, the ioctl
// attribute builder, write() framing and the command file, the one syscall
// chokepoint. It imports only internal/kernel (the syscall seam); it knows
// nothing of verbs objects.
package abi
