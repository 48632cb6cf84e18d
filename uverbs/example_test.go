package uverbs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
)

// These examples need an RDMA device. A host has none, so they carry no
// "Output:" line (go test would run them and fail) and go test only
// compiles them; TestExamplesRig runs every one on the rig's devices and
// checks what each prints against its "Rig output:" comment, where the
// output is deterministic.

// List the RDMA devices and how goverbs found them.
func ExampleDevices() {
	devs, err := uverbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	// Devices come in the kernel's index order; print them by name.
	slices.SortFunc(devs, func(a, b uverbs.Device) int { return strings.Compare(a.Name, b.Name) })
	for _, d := range devs {
		fmt.Printf("%s: driver %v, %v, found by %s\n", d.Name, d.Driver, d.Transport, d.Source)
	}
	// Rig output:
	// rxe0: driver rxe, InfiniBand, found by netlink
	// rxea: driver rxe, InfiniBand, found by netlink
	// rxeb: driver rxe, InfiniBand, found by netlink
	// siw0: driver siw, iWARP, found by netlink
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
	fmt.Printf("registered %d bytes, %v\n", mr.Len(), mr.Access())
	// An SGE is a region and a byte range: bytes [4096, 4096+64) here.
	sge := mr.SGE(4096, 64)
	fmt.Println(sge.Addr-mr.Addr(), sge.Length, sge.LKey == mr.LKey())
	// Rig output:
	// registered 1048576 bytes, LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ
	// 4096 64 true
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
	if _, err := qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{mr.SGE(2048, 2048)}}}); err != nil {
		log.Fatal(err)
	}
	if _, err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{mr.SGE(0, 12)}}}); err != nil {
		log.Fatal(err)
	}
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc := make([]uverbs.WorkCompletion, 4)
	var got []uverbs.WorkCompletion
	for len(got) < 2 {
		n, err := cq.Wait(wait, wc) // arms the CQ, re-polls, parks on the runtime poller
		if err != nil {
			log.Fatal(err)
		}
		got = append(got, wc[:n]...)
	}
	// The send's and the receive's completions may come in either order.
	slices.SortFunc(got, func(a, b uverbs.WorkCompletion) int { return int(a.ID) - int(b.ID) })
	for _, c := range got {
		fmt.Printf("wr %d: %v %v\n", c.ID, c.Opcode, c.Status)
	}
	fmt.Printf("received %d bytes: %q\n", got[0].ByteLen, buf.Bytes()[2048:2048+12])
	// Rig output:
	// wr 1: RECV success
	// wr 2: SEND success
	// received 12 bytes: "hello, verbs"
}

// host is one side of a connection in ExampleQP_Connect: a device, a QP
// with its CQ, and registered memory.
type host struct {
	ctx *uverbs.Context
	pd  *uverbs.PD
	cq  *uverbs.CQ
	qp  *uverbs.QP
	buf *mmap.Region
	mr  *uverbs.MR
}

func openHost(name string) *host {
	dev, err := uverbs.DeviceByName(name)
	if err != nil {
		log.Fatal(err)
	}
	h := &host{}
	if h.ctx, err = uverbs.Open(dev); err != nil {
		log.Fatal(err)
	}
	if h.pd, err = h.ctx.AllocPD(); err != nil {
		log.Fatal(err)
	}
	if h.cq, err = h.ctx.CreateCQ(16, uverbs.CQOptions{}); err != nil {
		log.Fatal(err)
	}
	if h.qp, err = h.pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: h.cq, RecvCQ: h.cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		log.Fatal(err)
	}
	if h.buf, err = mmap.Anonymous(4096); err != nil {
		log.Fatal(err)
	}
	if h.mr, err = h.pd.RegMR(h.buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); err != nil {
		log.Fatal(err)
	}
	return h
}

func (h *host) close() {
	h.qp.Close()
	h.mr.Close()
	h.buf.Close()
	h.cq.Close()
	h.pd.Close()
	h.ctx.Close()
}

// Connect two RC QPs on two devices (the rig's rxea and rxeb, two "hosts"
// on a veth pair) from the endpoints they exchange, then RDMA-write from
// one into the other's memory. Over a network the endpoints travel on a
// socket, or in rdma_cm's messages; here a variable carries them.
func ExampleQP_Connect() {
	a, b := openHost("rxea"), openHost("rxeb")
	defer a.close()
	defer b.close()

	// Each side makes its endpoint: QP number, a random first PSN, the
	// port's LID and MTU, and the GID at index 1 (the RoCEv2 IPv4 one).
	ea, err := a.qp.Endpoint(1, 1)
	if err != nil {
		log.Fatal(err)
	}
	eb, err := b.qp.Endpoint(1, 1)
	if err != nil {
		log.Fatal(err)
	}
	// ... they are exchanged, and each side connects to the other:
	// RESET → INIT → RTR → RTS. b lets its peer write to its memory.
	if err := a.qp.Connect(ea, eb, uverbs.ConnectOptions{}); err != nil {
		log.Fatal(err)
	}
	if err := b.qp.Connect(eb, ea, uverbs.ConnectOptions{Access: uverbs.AccessRemoteWrite}); err != nil {
		log.Fatal(err)
	}
	attr, _, err := a.qp.Query(uverbs.QPAttrState | uverbs.QPAttrPathMTU)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a:", attr.State, "path MTU", attr.PathMTU)

	// b tells a where to write (its MR's address and rkey travel like the
	// endpoint); a writes 16 bytes there.
	copy(a.buf.Bytes(), "written remotely")
	if _, err := a.qp.PostSend([]uverbs.SendWR{{ID: 7, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{a.mr.SGE(0, 16)}, RemoteAddr: b.mr.RemoteAddr(100), RKey: b.mr.RKey()}}); err != nil {
		log.Fatal(err)
	}
	wc := make([]uverbs.WorkCompletion, 1)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := a.cq.Poll(wc) // the fast path: no syscall, no allocation
		if err != nil {
			log.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("no completion")
		}
	}
	fmt.Printf("wr %d: %v %v\n", wc[0].ID, wc[0].Opcode, wc[0].Status)
	fmt.Printf("b's memory: %q\n", b.buf.Bytes()[100:116])
	// Rig output:
	// a: RTS path MTU 1024
	// wr 7: RDMA_WRITE success
	// b's memory: "written remotely"
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
