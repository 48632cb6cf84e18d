package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// Report is ibvcost's output with -json, and what -load and -compare read.
// test/cost/verbs_cost.c, the rdma-core reference, writes the same schema
// (Tool "rdma-core", no Recorder, no Overhead), so the two can be set side by
// side row by row. Times are nanoseconds; counts are per call.
type Report struct {
	// Tool is "goverbs" or "rdma-core".
	Tool string `json:"tool"`
	// Device is the RDMA device measured ("rxe0"); Driver its kernel
	// driver ("rxe", "siw"), when the tool knows it.
	Device string `json:"device"`
	Driver string `json:"driver,omitempty"`
	// Kernel is the running kernel's release (uname -r).
	Kernel string `json:"kernel"`
	// CPU is /proc/cpuinfo's first model name ("QEMU TCG CPU …" under
	// emulation); Clocksource is the kernel's current clocksource (under
	// TCG "hpet": then reading the clock is a syscall, not a vDSO call).
	CPU         string `json:"cpu,omitempty"`
	Clocksource string `json:"clocksource,omitempty"`
	// Pinned is the CPU the measuring thread was pinned to ("cpu 0":
	// ibvcost -cpu 0, verbs_cost -c 0), empty if it was not.
	Pinned string `json:"pinned,omitempty"`
	// N is the number of timed calls of every row; BigN the number for
	// memory registrations of 16 MiB and more; MaxMR the largest MR size
	// measured (larger sizes are listed as skipped).
	N     int   `json:"n"`
	BigN  int   `json:"big_n"`
	MaxMR int64 `json:"max_mr"`
	// Counted is the number of calls of every row made, before the timed
	// ones, with the syscall counters (and goverbs' Recorder) on.
	Counted int `json:"counted"`
	// FloorNS is the median cost of an empty timed region (two clock
	// reads); it has been subtracted from every sample.
	FloorNS int64 `json:"floor_ns"`
	// Counter names how syscalls were counted: "perf:raw_syscalls:sys_enter"
	// (a per-thread perf counter on the syscall-entry tracepoint), or
	// "none: <why>" when it could not be opened.
	Counter string `json:"counter"`
	// Runs is the number of runs merged into this report (-load and
	// -compare take several files); 0 or 1 for a single run.
	Runs int `json:"runs,omitempty"`
	// FastPath is "" when the fast-path rows ran, otherwise why they did not.
	FastPath string `json:"fast_path,omitempty"`
	// Rows are the measurements, slow path first, in workload order.
	Rows []Row `json:"rows"`
	// Ratios restate rows as multiples of a 64-byte RDMA WRITE (and of a
	// ping-pong round trip). ibvcost computes them for either tool's
	// report; they are not read back.
	Ratios []Ratio `json:"ratios,omitempty"`
	// Overhead is the uverbs.Recorder's cost on the fast path (goverbs
	// only).
	Overhead []Overhead `json:"overhead,omitempty"`
}

// Row is one measured operation.
type Row struct {
	// Name is the row's name, the same in both tools: "alloc_pd",
	// "reg_mr_1MiB", "modify_qp_rtr", "post_send_write_64B" … (the table
	// in doc.go lists them all).
	Name string `json:"name"`
	// Path is "slow" (a command to the kernel) or "fast" (work requests
	// and completions).
	Path string `json:"path"`
	// Verb is the call measured: goverbs' method ("PD.RegMR") or
	// libibverbs' function ("ibv_reg_mr").
	Verb string `json:"verb"`
	// Size is the memory region's or the message's size in bytes, 0 where
	// there is none.
	Size int64 `json:"size,omitempty"`
	// N is the number of timed samples (0 for a skipped row).
	N int `json:"n"`
	// MedianNS, P99NS, MinNS and MeanNS summarise the samples, each the
	// wall time of one call minus FloorNS (never below 0). For msg_rate
	// a sample is the mean time per message over a chunk of messages.
	MedianNS int64 `json:"median_ns"`
	P99NS    int64 `json:"p99_ns"`
	MinNS    int64 `json:"min_ns"`
	MeanNS   int64 `json:"mean_ns"`
	// Spread, in a report merged from several runs, is the largest of the
	// runs' medians over the smallest: above 3 the row's median depends on
	// which run it came from (the table marks it ~).
	Spread float64 `json:"spread,omitempty"`
	// FastestRunNS, in a merged report, is the smallest of the runs'
	// medians: the run least disturbed. Under emulation whole runs turn
	// slow at once (every row 1.5-2.5x, on either side, for a run or two
	// in a row: the host, not the program), and a median over five runs
	// then says which side drew more slow runs; the fastest runs' ratio
	// is less swayed by them (though one boot's can still be, see
	// docs/COST.md's session 21).
	FastestRunNS int64 `json:"fastest_run_ns,omitempty"`
	// RunMediansNS, in a merged report, is each run's median in the order
	// the runs were merged. compare.sh runs the two tools alternately, so
	// the i-th run of one side ran next to the i-th of the other: the
	// table's paired ratio (the median of the i-th runs' ratios) compares
	// runs that shared the host's state of the moment.
	RunMediansNS []int64 `json:"run_medians_ns,omitempty"`
	// PerSecond is messages per second (msg_rate rows only): 1e9/MeanNS.
	PerSecond float64 `json:"per_second,omitempty"`
	// Syscalls is what the kernel counted on the calling thread, per call
	// (the median over the counted calls); nil when no counter was
	// available.
	Syscalls *Syscalls `json:"syscalls,omitempty"`
	// Transport is how the call's syscalls reached the kernel: "ioctl",
	// "write", "ioctl+write" or "none" (from Syscalls; without a counter,
	// goverbs falls back to the Recorder's transport).
	Transport string `json:"transport"`
	// Recorder is goverbs' own account of the counted calls (nil for
	// rdma-core).
	Recorder *RecorderCost `json:"recorder,omitempty"`
	// Skipped, when set, says why the row has no measurement.
	Skipped string `json:"skipped,omitempty"`
}

// Syscalls counts syscalls per call by kind. Total excludes Runtime.
type Syscalls struct {
	// Total is every syscall the call made on its thread except the
	// Runtime ones.
	Total float64 `json:"total"`
	// Ioctl, Write and Mmap (mmap plus munmap) are the ioctl(2),
	// write(2) and mapping calls among Total.
	Ioctl float64 `json:"ioctl"`
	Write float64 `json:"write"`
	Mmap  float64 `json:"mmap"`
	// Runtime counts the syscalls that are neither the verb's nor the
	// library's: the Go scheduler's (futex, signals, sched_yield, epoll
	// waits, thread creation) and the clock's (clock_gettime, a syscall
	// when the clocksource has no vDSO path). rdma-core's should be 0.
	Runtime float64 `json:"runtime"`
}

// RecorderCost is what uverbs.Recorder recorded for a row's counted calls:
// the syscalls at goverbs' command-file chokepoint (commands, doorbells,
// queue mappings; not open(2), epoll or sysfs), per call.
type RecorderCost struct {
	// Verbs are the verbs the recorder saw ("RegMR").
	Verbs []string `json:"verbs"`
	// Calls is the number of verb calls (spans) the recorder counted per
	// measured call: 1 for an instrumented verb, 0 for one that only notes
	// its command's transport and bytes (the Query* verbs).
	Calls float64 `json:"calls"`
	// Syscalls and Mappings are per call; Mappings are among Syscalls.
	Syscalls float64 `json:"syscalls"`
	Mappings float64 `json:"mappings"`
	// BytesIn and BytesOut are command bytes to and from the kernel, per
	// call.
	BytesIn  float64 `json:"bytes_in"`
	BytesOut float64 `json:"bytes_out"`
	// Transport is the transport of the verb's commands ("ioctl",
	// "write", or "none" for calls without a command, such as a doorbell
	// write or a poll).
	Transport string `json:"transport"`
}

// Ratio is one row, or a sum of rows, expressed in units of another.
type Ratio struct {
	// Name identifies the ratio ("rc_setup_in_writes").
	Name string `json:"name"`
	// Text says what it is: "RC connection set-up (create CQ + QP, INIT,
	// RTR, RTS) = N × 64-B RDMA WRITE".
	Text string `json:"text"`
	// Value is N; 0 when a row it needs was skipped.
	Value float64 `json:"value"`
}

// Overhead is the Recorder's cost on one fast-path operation: the mean time
// per call over a round of calls, with recording off and on (the fastest
// of four rounds each).
type Overhead struct {
	// Op is the operation ("poll_cq_empty", "post_send_write_8B_inline").
	Op string `json:"op"`
	// Calls is the number of calls in a round.
	Calls int `json:"calls"`
	// OffNS and OnNS are nanoseconds per call without and with a Recorder.
	OffNS float64 `json:"off_ns"`
	OnNS  float64 `json:"on_ns"`
}

// readReport reads one report written with -json (by either tool).
func readReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Rows) == 0 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	return &r, nil
}

// row returns the named row, or nil.
func (r *Report) row(name string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Name == name {
			return &r.Rows[i]
		}
	}
	return nil
}
