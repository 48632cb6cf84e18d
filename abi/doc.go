// Package abi is the Linux RDMA user/kernel ABI in Go: command numbers, the
// uverbs structs (generated from the uapi headers), the ioctl attribute
// builder, write() command framing, and the one syscall chokepoint every
// command, doorbell write and mapping goes through.
//
// Nothing here is stable API: it follows the kernel. Programs use package
// uverbs; providers use abi to frame their driver data.
package abi
