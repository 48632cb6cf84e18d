// Package release stores a word that another goroutine reads, with release
// ordering alone: every load and store before the store is visible to a
// goroutine that sees the stored value (through sync/atomic's Load), and
// nothing is ordered after it. That is what an unlock needs (rdma-core's
// spin locks end with such a store) and what a reader leaving a gate needs
// (pollgate), and no more: sync/atomic's Store is sequentially consistent,
// on amd64 a locked XCHG, which costs ~2 ns natively and ~11 ns under
// QEMU's TCG, a fifth of an empty poll there.
//
// Where a later load must not pass the store (Dekker's pattern: store a
// flag, then read the other side's), use sync/atomic's Store.
package release
