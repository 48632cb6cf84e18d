// Package rxe is the fast path for the kernel's soft-RoCE driver (rdma_rxe):
// it maps the send, receive, shared-receive and completion queues the kernel
// allocates, writes work requests into them and polls completions from them.
// Its send doorbell is a write() on the command file.
package rxe
