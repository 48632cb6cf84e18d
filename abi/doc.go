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
//
// Two ways to the kernel: the builder (Ioctl, Prepared), which any command
// can take and the fake kernels of the tests answer; and the flat path
// (File.FlatIoctl, File.FlatMethod for a create's many attributes, and
// INVOKE_WRITE inside Invoke), which the frequent commands take on the real
// kernel under the plain transport rule: the
// attributes on the caller's stack and one syscall, declining (before or
// after the syscall) whenever the builder's path must decide instead.
package abi
