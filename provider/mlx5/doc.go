// Package mlx5 is the fast path for NVIDIA ConnectX (mlx5) devices: queues and
// doorbell records in user memory, WQEs built in user space, doorbells rung by
// MMIO stores to mapped UAR pages, and CQEs polled without a syscall.
package mlx5
