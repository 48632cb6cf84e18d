// Package uverbs is the public RDMA verbs API of goverbs: devices, contexts,
// protection domains, memory regions and windows, completion queues and
// channels, queue pairs, shared receive queues, address handles and async
// events, spoken to the kernel's uverbs character device without libibverbs.
//
// Object graph:
//
//	Device ─Open→ Context ─┬→ PD ─┬→ MR, MW
//	                       │      ├→ QP ──send/recv CQ──→ CQ ←─ CompChannel
//	                       │      ├→ SRQ
//	                       │      └→ AH
//	                       └→ async events
//
// Every object has Close, which is idempotent. Slow-path verbs cost one
// syscall each; the fast path (PostSend, PostRecv, PollCQ) is delegated to the
// device's provider and allocates nothing.
package uverbs
