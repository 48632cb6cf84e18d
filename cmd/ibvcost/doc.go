// Command ibvcost measures what goverbs' verbs cost: every slow-path verb
// (a command to the kernel) and the fast-path operations (work requests
// and completions), per call, with the syscalls each makes, so that set-up
// can be weighed against data movement ("one RC connection costs as much as
// N 64-byte RDMA WRITEs"). test/cost/verbs_cost.c runs the same workload
// through rdma-core's libibverbs and writes the same JSON; -compare sets the
// two side by side.
package main
