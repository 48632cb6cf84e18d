package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// These examples need an RDMA device, so they have no "Output:" lines and
// `go test` only compiles them; TestExamplesRig runs them in the rig.

// List the RDMA devices and how goverbs found them.
func ExampleDevices() {
	devs, err := uverbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		fmt.Printf("%s: driver %v, %s, %s, GUID %016x\n", d.Name, d.Driver, d.Transport, d.CharDev, d.NodeGUID)
	}
}

// Open a device and register memory for it. Device-visible memory lives
// off the Go heap, in an mmap.Region.
func ExamplePD_RegMR() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	buf, err := mmap.Anonymous(1 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err) // an RLIMIT_MEMLOCK refusal says how to raise the limit
	}
	defer mr.Close()
	fmt.Printf("registered %d bytes: lkey %#x rkey %#x\n", mr.Len(), mr.LKey(), mr.RKey())
}

// The main flow: an RC queue pair connected to itself on a RoCE device,
// a receive, a send, and the completions waited for without a thread.
func ExampleCQ_Wait() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, _ := ctx.AllocPD()
	defer pd.Close()
	buf, _ := mmap.Anonymous(4096)
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	ch, _ := ctx.CreateCompChannel()
	defer ch.Close()
	cq, err := ctx.CreateCQ(16, uverbs.CQOptions{Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Close()
	qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Close()

	// Connect the QP to itself: RESET → INIT → RTR → RTS. RoCE addresses by
	// GID: index 1 of port 1 is the IPv4-mapped RoCEv2 GID here. Across a
	// network, each side sends its qp.Endpoint to the other and calls
	// qp.Connect(local, remote, options).
	if err := uverbs.ConnectPair(qp, qp, 1, 1, uverbs.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}

	copy(buf.Bytes(), "hello, verbs")
	if _, err := qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{{Addr: mr.Addr() + 2048, Length: 2048, LKey: mr.LKey()}}}}); err != nil {
		log.Fatal(err)
	}
	if _, err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: 12, LKey: mr.LKey()}}}}); err != nil {
		log.Fatal(err)
	}
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]uverbs.WorkCompletion, 4)
	for done := 0; done < 2; {
		n, err := cq.Wait(wait, wc) // arms the CQ, re-polls, parks on the runtime poller
		if err != nil {
			log.Fatal(err)
		}
		for _, c := range wc[:n] {
			fmt.Printf("wr %d: %v %v, %d bytes\n", c.ID, c.Opcode, c.Status, c.ByteLen)
		}
		done += n
	}
	fmt.Printf("received %q\n", buf.Bytes()[2048:2048+12])
}

// Measure what each verb costs, syscalls included.
func ExampleRecorder() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	rec := uverbs.NewRecorder()
	ctx, err := uverbs.OpenWith(dev, uverbs.OpenOptions{Recorder: rec})
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	for i := 0; i < 10; i++ {
		pd, err := ctx.AllocPD()
		if err != nil {
			log.Fatal(err)
		}
		pd.Close()
	}
	rec.WriteTo(os.Stdout)
}
