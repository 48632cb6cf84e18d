// Command goverbs runs the slow-path verb sequence of test/strace/verbs.c
// through goverbs, marking each verb with a failing write(-1, "<verb>") so
// that strace output can be split per verb (test/strace/compare.sh).
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

func mark(verb string) { unix.Write(-1, []byte(verb)) }

func check(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	// Keep the verbs on one thread: compare.sh attributes syscalls to the
	// thread that wrote each marker.
	runtime.LockOSThread()
	name := "rxe0"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	d, err := uverbs.DeviceByName(name)
	check(err, "device")
	mark("Open")
	ctx, err := uverbs.Open(d)
	check(err, "Open")
	mark("QueryDevice")
	_, err = ctx.QueryDevice()
	check(err, "QueryDevice")
	mark("QueryPort")
	_, err = ctx.QueryPort(1)
	check(err, "QueryPort")
	mark("AllocPD")
	pd, err := ctx.AllocPD()
	check(err, "AllocPD")
	buf, err := mmap.Anonymous(1 << 16)
	check(err, "mmap")
	mark("RegMR")
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	check(err, "RegMR")
	mark("CreateCompChannel")
	ch, err := ctx.CreateCompChannel()
	check(err, "CreateCompChannel")
	mark("CreateCQ")
	cq, err := ctx.CreateCQ(64, uverbs.CQOptions{Channel: ch})
	check(err, "CreateCQ")
	mark("ReqNotifyCQ")
	check(cq.ReqNotify(false), "ReqNotifyCQ")
	mark("CreateQP")
	qp, err := pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	check(err, "CreateQP")
	mark("ModifyQP")
	check(qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags), "ModifyQP")
	mark("QueryQP")
	_, _, err = qp.Query(uverbs.QPAttrState)
	check(err, "QueryQP")
	mark("DestroyQP")
	check(qp.Close(), "DestroyQP")
	mark("DestroyCQ")
	check(cq.Close(), "DestroyCQ")
	mark("DestroyCompChannel")
	check(ch.Close(), "DestroyCompChannel")
	mark("DeregMR")
	check(mr.Close(), "DeregMR")
	mark("DeallocPD")
	check(pd.Close(), "DeallocPD")
	mark("Close")
	check(ctx.Close(), "Close")
	mark("end")
}
