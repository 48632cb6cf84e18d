// Command perftest is perftest 4.5's latency and bandwidth tests on
// goverbs: ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat,
// ib_send_bw, ib_write_bw, ib_read_bw and ib_atomic_bw in one static
// binary. The test is chosen by the name the binary runs under (a link
// called ib_send_lat, or any name ending in send_lat) or by its first
// argument:
//
//	perftest send_lat -d rxe0 -x 1               # server
//	perftest send_lat -d rxe0 -x 1 10.0.2.15     # client
//
// It speaks perftest's out-of-band TCP exchange (version "6.06": the
// version, page and cache line sizes, MTU, the QP addresses with LID, QPN,
// PSN, rkey, buffer address and GID in perftest's text format, the
// synchronising handshakes each program makes, the bandwidth report the
// write, read and atomic clients send their server, and the closing
// "done"), so either side can be perftest's own program, and prints
// perftest's banner, address lines and result columns so the two reports
// compare line by line.
//
// Flags: -p -d -i -m -s -a -n -D -f -x -q -t -r -l -Q -c RC|UC|UD -e -I -o
// -A -N -F -V --report_gbits, -R (the QPs connected through rdmacm, RC), -z
// (the exchange over rdma_cm) and --source_ip. -D runs for a number of
// seconds instead of -n iterations, as perftest does: each side by its own
// clock, the first and last -f seconds (default a quarter of -D) not
// counted, no peak bandwidth, and latency tests report the average and
// transactions per second. Not supported (each refused with a message): -R
// with UD, -b (bidirectional), -C/-H/-U, multicast, dual port, SRQ.
//
// Differences from perftest: time stamps are the TSC's ticks (amd64;
// elsewhere the monotonic clock) converted to nanoseconds by the monotonic
// clock over the run, not by the CPU's nominal frequency, so -F has no
// warning to silence; a -D run's phases change at fixed time stamps
// rather than on alarm signals; RDMA bandwidth tests post every message to
// the same remote address (perftest walks a page-sized cycle buffer); the
// peak bandwidth uses the same windows as perftest.
//
// GOVERBS_CPUPROFILE=file writes a CPU profile of the run into file
// (runtime/pprof; test/perf/pgo.sh takes the compared commands' profiles
// in one boot).
package main
