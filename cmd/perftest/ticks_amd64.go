package main

// ticks reads the CPU's time stamp counter (ticks_amd64.s): no syscall,
// whatever the kernel's clocksource. x86's TSC runs at a constant rate
// on every CPU of a machine that reports constant_tsc, and QEMU's TCG
// derives the guest's from the host's.
func ticks() int64
