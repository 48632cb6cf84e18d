// Command pingpong is rdma-core's ibv_rc_pingpong, ibv_ud_pingpong,
// ibv_srq_pingpong, ibv_uc_pingpong and ibv_xsrq_pingpong in pure Go: the same flags, the
// same TCP address exchange, the same output, so either side can be
// goverbs or rdma-core.
//
// Usage:
//
//	pingpong [rc|ud|srq|uc|xsrq] [options]          start a server and wait for a client
//	pingpong [rc|ud|srq|uc|xsrq] [options] <host>   connect to the server at <host>
//
// The first word picks the example to speak as (default rc); uc is rc on
// an unreliable connected QP (no RC timers, retries or RDMA-read credits
// in RTR and RTS, as ibv_uc_pingpong connects); xsrq is XRC (package
// internal/xsrq: its own options, -c --clients=<n> and -n --num_tests=<n>
// (default 5) among them; it needs a device with XRC). Options, as
// rdma-core's (getopt_long: grouped short options, attached arguments,
// long names and their unambiguous prefixes, options after the host):
//
//	-p, --port=<port>      TCP port of the address exchange (default 18515)
//	-d, --ib-dev=<dev>     RDMA device (default: the first one)
//	-i, --ib-port=<port>   device port (default 1)
//	-s, --size=<size>      message size (default 4096; ud 1024)
//	-m, --mtu=<size>       path MTU, rc, srq and uc (default 1024)
//	-r, --rx-depth=<dep>   receives posted at a time (default 500)
//	-n, --iters=<iters>    exchanges (default 1000; srq: in all, over every QP)
//	-l, --sl=<sl>          service level
//	-e, --events           sleep on completion events instead of polling
//	-g, --gid-idx=<index>  local GID index: needed on RoCE (rxe: 1 for the IPv4 GID)
//	-q, --num-qp=<num>     QPs sharing the SRQ, srq only (default 16)
//	-c, --chk              check the received payload
//
// rdma-core's -o, -O, -P, -t, -j and -N (on-demand paging, timestamps,
// device memory, the new send API) are refused with an error (uc has
// none of them: rdma-core's uc example does not either).
//
// The wire protocol: the client connects over TCP and sends one 52-byte
// message per QP, "LID:QPN:PSN:GID" as printf("%04x:%06x:%06x:%s") with the
// GID as 32 hex digits and a NUL; the server moves its QPs to RTR and RTS,
// answers with its own messages and waits for the client's "done". srq
// always sends 256 messages each way (the unused ones zero). A GRH (hop
// limit 1, source GID index -g) is used when the peer's GID has a non-zero
// interface id. Both sides print the same lines as rdma-core:
//
//	  local address:  LID 0x0000, QPN 0x000011, PSN 0x2cc4cc, GID ::ffff:10.0.2.15
//	  remote address: LID 0x0000, QPN 0x000012, PSN 0x9315ab, GID ::ffff:10.0.2.15
//	8192000 bytes in 0.05 seconds = 1310.72 Mbit/sec
//	1000 iters in 0.05 seconds = 50.00 usec/iter
//
// Busy polling is the default; with -e the loop parks in CQ.Wait, on the
// completion channel registered with Go's runtime poller (no OS thread is
// held while waiting).
//
// Differences from rdma-core, all on the safe side: -c checks every byte
// of the last payload received, on both sides (rdma-core checks the first
// byte of each page, on the server only), checks each receive's length,
// and a failed check makes the exit status 1 (rdma-core prints "invalid
// data in page N" and exits 0). The client sends the payload rdma-core's
// client sends (0x7b bytes, for srq zeros, and with -c a zero at the start
// of every page), so a goverbs server checks an rdma-core client and the
// other way round. srq refuses a peer that sent fewer QP numbers than -q.
//
// GOVERBS_CPUPROFILE=file writes a CPU profile of the run into file
// (runtime/pprof; test/perf/pgo.sh takes the compared commands' profiles
// in one boot).
//
// It imports uverbs, mmap and the internal helpers getopt, inet and
// cpuprofile.
package main
