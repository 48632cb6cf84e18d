// Command slowloop makes one slow-path verb N times on a device, for
// test/perf/slowloop.sh, which counts the guest instructions of the loop
// (QEMU's TCG plugin, test/perf/insns/) beside test/perf/insns/slowloop.c, the same loop
// through rdma-core's libibverbs.
//
//	slowloop DEVICE VERB N [ADDR]
//
// VERB is query_device, query_port, query_gid, pd (an alloc and a
// dealloc), cq (a create of 256 entries and a destroy), mr (a
// registration of 4 KiB and its deregistration; mr:BYTES registers an
// anonymous mapping of BYTES instead), modify (an RC QP's
// RESET -> INIT -> RESET), ah (an address handle to the port's own RoCE v2
// IPv4 GID, as ibvcost's create_ah, and its destroy), open (an open and a
// close of a context), or one of the
// connection manager's on an event channel opened before the loop:
// cm_id (CREATE_ID and DESTROY_ID, no event) and cm_resolve (an ID created,
// its address and route resolved to ADDR, an IPv4 address of DEVICE's,
// and destroyed: two events through the channel's reader), or one of two
// fast-path calls (fast.go): poll_empty (a Poll of an empty CQ) and
// post_recv (a PostRecv of one request). It prints the
// loop's mean wall time per call (set-up excluded). With PIN=N in the
// environment the loop's goroutine is locked to its thread and the thread
// pinned to CPU N.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 4 && len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: slowloop DEVICE VERB N [ADDR]")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowloop:", err)
		os.Exit(2)
	}
	if strings.HasPrefix(os.Args[2], "cm_") {
		err = runCM(os.Args[2], n, os.Args[4:])
	} else {
		err = run(os.Args[1], os.Args[2], n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowloop:", err)
		os.Exit(1)
	}
}

func run(name, verb string, n int) error {
	if cpu := os.Getenv("PIN"); cpu != "" {
		// PIN=N: the loop's goroutine stays on its thread and the thread
		// on CPU N (an experiment on where the loop runs; the runtime's
		// other threads stay free).
		c, err := strconv.Atoi(cpu)
		if err != nil {
			return fmt.Errorf("PIN=%q: %w", cpu, err)
		}
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(c)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("PIN=%d: %w", c, err)
		}
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return err
	}
	var dev *uverbs.Device
	for i := range devs {
		if devs[i].Name == name {
			dev = &devs[i]
		}
	}
	if dev == nil {
		return fmt.Errorf("no device %s", name)
	}
	if verb == "open" {
		t0 := time.Now()
		defer func() { report(verb, n, t0) }()
		for i := 0; i < n; i++ {
			c, err := uverbs.Open(*dev)
			if err != nil {
				return err
			}
			if err := c.Close(); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, err := uverbs.Open(*dev)
	if err != nil {
		return err
	}
	defer ctx.Close()
	// The objects mr and modify use, made before every verb's loop, as
	// slowloop.c makes them: the kernel's object tables then hold the same
	// entries on both sides. (The pd loop's PD still sits alone in its
	// leaf of rxe's cyclic pool index, so each alloc and dealloc makes and
	// frees an xarray node on both sides alike: test/perf/pgtrace.sh.)
	pd0, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	defer pd0.Close()
	cq0, err := ctx.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		return err
	}
	defer cq0.Close()
	qp0, err := pd0.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq0, RecvCQ: cq0,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	defer qp0.Close()
	if verb == "poll_empty" || verb == "post_recv" {
		return runFast(pd0, cq0, verb, n)
	}
	mrSize := 4096
	if size, ok := strings.CutPrefix(verb, "mr:"); ok {
		if mrSize, err = strconv.Atoi(size); err != nil {
			return fmt.Errorf("verb %s: %w", verb, err)
		}
		verb = "mr"
	}
	var f func() error
	switch verb {
	case "query_device":
		f = func() error { _, err := ctx.QueryDevice(); return err }
	case "query_port":
		f = func() error { _, err := ctx.QueryPort(1); return err }
	case "query_gid":
		f = func() error { _, err := ctx.QueryGID(1, 0); return err }
	case "pd":
		f = func() error {
			pd, err := ctx.AllocPD()
			if err != nil {
				return err
			}
			return pd.Close()
		}
	case "mr":
		buf, err := mmap.Anonymous(mrSize)
		if err != nil {
			return err
		}
		defer buf.Close()
		f = func() error {
			mr, err := pd0.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
			if err != nil {
				return err
			}
			return mr.Close()
		}
	case "modify":
		init := uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}
		reset := uverbs.QPAttr{State: uverbs.QPStateReset}
		f = func() error {
			if err := qp0.Modify(&init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
				return err
			}
			return qp0.Modify(&reset, uverbs.QPAttrState)
		}
	case "ah":
		a, err := ownAV(ctx)
		if err != nil {
			return err
		}
		f = func() error {
			ah, err := pd0.CreateAH(a)
			if err != nil {
				return err
			}
			return ah.Close()
		}
	case "cq":
		f = func() error {
			cq, err := ctx.CreateCQ(256, uverbs.CQOptions{})
			if err != nil {
				return err
			}
			return cq.Close()
		}
	default:
		return fmt.Errorf("no verb %s", verb)
	}
	return loop(verb, n, f)
}

// ownAV is the address of port 1's first RoCE v2 GID that maps an IPv4
// address (the first GID if none does), as ibvcost's and verbs_cost's
// create_ah rows choose it, with their hop limit.
func ownAV(ctx *uverbs.Context) (uverbs.AHAttr, error) {
	table, err := ctx.QueryGIDTable()
	if err != nil {
		return uverbs.AHAttr{}, err
	}
	pick := -1
	for i, e := range table {
		if e.Port != 1 {
			continue
		}
		if pick < 0 {
			pick = i
		}
		if e.Type == uverbs.GIDTypeRoCEv2 && [12]byte(e.GID[:12]) == [12]byte{10: 0xff, 11: 0xff} {
			pick = i
			break
		}
	}
	if pick < 0 {
		return uverbs.AHAttr{}, fmt.Errorf("no GID on port 1")
	}
	e := table[pick]
	return uverbs.AHAttr{PortNum: 1, GRH: &uverbs.GlobalRoute{DGID: e.GID, SGIDIndex: uint8(e.Index), HopLimit: 64}}, nil
}

// loop calls f n times and reports the mean time of a call.
func loop(verb string, n int, f func() error) error {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return err
		}
	}
	report(verb, n, t0)
	return nil
}

func report(verb string, n int, t0 time.Time) {
	d := time.Since(t0)
	// The process's page faults and context switches so far (set-up
	// included): two runs' difference is the loop's.
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("slowloop goverbs %s %d calls: %d ns/call; minflt %d, nvcsw %d, nivcsw %d, utime %d us, stime %d us\n", verb, n,
		d.Nanoseconds()/int64(max(n, 1)), ru.Minflt, ru.Nvcsw, ru.Nivcsw, ru.Utime.Nano()/1000, ru.Stime.Nano()/1000)
}
