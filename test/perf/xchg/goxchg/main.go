// Command goxchg is the smallest loop in which a Go process's kernel time
// can be set beside a C one's: two RC QPs of one context on one device,
// each iteration a receive posted on the second, an inline 64-byte RDMA
// WRITE with immediate from the first into the second's buffer, and both
// completions polled. On Linux 6.1 rxe runs the whole exchange (requester,
// responder, ACK, completer) inside the send's doorbell write(2), so the
// doorbell is the kernel's part of an iteration. ../xchg.c is its twin
// over libibverbs; test/perf/xchg.sh runs both in one boot (docs/COST.md,
// session 53).
//
//	goxchg DEVICE N ROUNDS   # N iterations a round, after 100 unmeasured
//
// Each round prints "goverbs   loop US us/iter", and, in a build with the
// tag goverbs_dbtime, the doorbells' median and mean write(2) time.
//
// GOXCHG_LOCK=1 in the environment locks the loop's goroutine to its
// thread (runtime.LockOSThread); GOXCHG_PIN=CPU also sets that thread's
// affinity to CPU: uverbs' doc names both as the way to keep a spinner on
// one CPU, and xchg.sh's GVENVS measures them.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/test/perf/internal/dbtime"
	"github.com/goverbs/goverbs/uverbs"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: goxchg DEVICE N ROUNDS")
		os.Exit(2)
	}
	n, err1 := strconv.Atoi(os.Args[2])
	rounds, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || n < 1 || rounds < 1 {
		fmt.Fprintln(os.Stderr, "goxchg: N and ROUNDS are positive integers")
		os.Exit(2)
	}
	if err := place(); err != nil {
		fmt.Fprintln(os.Stderr, "goxchg:", err)
		os.Exit(1)
	}
	if err := run(os.Args[1], n, rounds); err != nil {
		fmt.Fprintln(os.Stderr, "goxchg:", err)
		os.Exit(1)
	}
}

// place locks the main goroutine to its thread and pins the thread as
// GOXCHG_LOCK and GOXCHG_PIN ask.
func place() error {
	pin := os.Getenv("GOXCHG_PIN")
	if os.Getenv("GOXCHG_LOCK") == "" && pin == "" {
		return nil
	}
	runtime.LockOSThread()
	if pin == "" {
		return nil
	}
	cpu, err := strconv.Atoi(pin)
	if err != nil || cpu < 0 {
		return fmt.Errorf("GOXCHG_PIN=%q: want a CPU number", pin)
	}
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set) // 0: this thread
}

func run(name string, n, rounds int) error {
	devs, err := uverbs.Devices()
	if err != nil {
		return err
	}
	var ctx *uverbs.Context
	for _, d := range devs {
		if d.Name == name {
			if ctx, err = uverbs.Open(d); err != nil {
				return err
			}
		}
	}
	if ctx == nil {
		return fmt.Errorf("no device %s", name)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	cq, err := ctx.CreateCQ(64, uverbs.CQOptions{})
	if err != nil {
		return err
	}
	qi := uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SignalAll: true,
		Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}
	a, err := pd.CreateQP(qi)
	if err != nil {
		return err
	}
	b, err := pd.CreateQP(qi)
	if err != nil {
		return err
	}
	// GID index 1: the port's RoCE v2 address, as xchg.c uses.
	if err := uverbs.ConnectPair(a, b, 1, 1, uverbs.ConnectOptions{Access: uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		return err
	}
	recv := []uverbs.RecvWR{{ID: 1}}
	send := []uverbs.SendWR{{ID: 2, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendInline, Imm: 7,
		SGL: []uverbs.SGE{{Addr: mr.Addr() + 2048, Length: 64, LKey: mr.LKey()}}, RemoteAddr: mr.Addr(), RKey: mr.RKey()}}
	var wc [16]uverbs.WorkCompletion
	step := func() error {
		if _, err := b.PostRecv(recv); err != nil {
			return err
		}
		if _, err := a.PostSend(send); err != nil {
			return err
		}
		for got := 0; got < 2; {
			k, err := cq.Poll(wc[:])
			if err != nil {
				return err
			}
			for _, c := range wc[:k] {
				if c.Status != uverbs.WCSuccess {
					return fmt.Errorf("completion %d: %v", c.ID, c.Status)
				}
			}
			got += k
		}
		return nil
	}
	for i := 0; i < 100; i++ {
		if err := step(); err != nil {
			return err
		}
	}
	for r := 0; r < rounds; r++ {
		dbtime.Reset()
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := step(); err != nil {
				return err
			}
		}
		fmt.Printf("goverbs   loop %.2f us/iter\n", float64(time.Since(t0))/float64(n)/1e3)
		dbtime.Report(os.Stdout, "goverbs  ")
	}
	return nil
}
