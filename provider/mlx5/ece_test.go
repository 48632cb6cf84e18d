package mlx5_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestECE: QP.SetECE and QP.QueryECE on mlx5, against the model's kernel
// and firmware sides of the ABI (mlx5-abi.h, mlx5_ib's qp.c): on a device
// with ece_support, CREATE_QP's driver data carries the ECE version 1
// trigger and the firmware's answer comes back in the response; options
// set on the QP travel in the next MODIFY_QP's driver data (the extended
// command) and that response's answer is QueryECE's; a Modify without
// options queued sends none; a failed Modify keeps them queued. The
// model's firmware answers the bits it takes (Options.ECE), so an answer
// shows what reached it. Without ece_support QueryECE answers 0 and
// SetECE is ErrNotSupported; a zero or foreign vendor ID is refused.
func TestECE(t *testing.T) {
	const fw = 0x1000000f // the trigger bit and four option bits
	d, dev := newModel(t, nil, model.Options{ECE: fw})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(16, nil)
	a, b := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	query := func(what string, q *uverbs.QP, want uint32) {
		t.Helper()
		e, err := q.QueryECE()
		if err != nil || e != (uverbs.ECE{VendorID: 0x15b3, Options: want}) {
			t.Errorf("%s: QueryECE = %+v, %v; want vendor 0x15b3, options %#x", what, e, err, want)
		}
	}
	query("after CreateQP", a, 0x10000000)
	if err := a.SetECE(uverbs.ECE{VendorID: 0x15b3, Options: 0x10000035}); err != nil {
		t.Fatalf("SetECE: %v", err)
	}
	query("after SetECE, before a Modify", a, 0)
	// A Modify the kernel refuses (RESET to RTS) keeps the options queued.
	if err := a.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Modify RESET->RTS: %v, want EINVAL", err)
	}
	query("after a refused Modify", a, 0)
	connect(t, a, b.QPN(), lidTo(d)) // INIT, RTR, RTS: the first carries the options
	query("after Connect", a, 0x10000005)
	connect(t, b, a.QPN(), lidTo(d))
	query("b, which set none", b, 0x10000000)
	if err := a.Modify(&uverbs.QPAttr{MinRNRTimer: 3}, uverbs.QPAttrMinRNRTimer); err != nil {
		t.Fatal(err)
	}
	query("after a Modify with none queued", a, 0x10000005)

	for _, c := range []struct {
		e    uverbs.ECE
		want error
	}{{uverbs.ECE{Options: 1}, uverbs.ErrNotSupported}, {uverbs.ECE{VendorID: 0x8086, Options: 1}, unix.EINVAL}} {
		if err := a.SetECE(c.e); !errors.Is(err, c.want) {
			t.Errorf("SetECE(%+v): %v, want %v", c.e, err, c.want)
		}
	}
	query("after the refused SetECEs", a, 0x10000005)

	nd, ndev := newModel(t, nil, model.Options{})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	q := nn.qp(uverbs.QPTypeRC, nn.cq(4, nil), cap1)
	query("without ece_support", q, 0)
	if err := q.SetECE(uverbs.ECE{VendorID: 0x15b3, Options: 1}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("SetECE without ece_support: %v, want ErrNotSupported", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.QueryECE(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("QueryECE after Close: %v, want ErrClosed", err)
	}
}

// TestQueryDataInOrder: QP.QueryDataInOrder on mlx5, as rdma-core's mlx5
// answers ibv_query_qp_data_in_order, against the model's kernel (devx.c's
// DEVX methods) and firmware (QUERY_HCA_CAP, QUERY_QP): the device's
// qp_data_in_order capability is read once per context by the DEVX
// general command; a QP not in RTS answers 0 without a command; one in RTS
// answers what its QP context's data_in_order bit says, read by the DEVX
// object query on the QP's handle (WholeMsg, which implies Aligned128 with
// ReturnCaps; WholeMsg alone without, libibverbs' 1). The model's firmware
// sets the bit for the QP types it is told (here RC, not UC), so a UC QP
// in RTS answers 0 after its QUERY_QP. A device without the capability
// answers 0 after the capability query alone; one without DEVX answers 0
// with ErrNotSupported (the kernel's EPROTONOSUPPORT). Unknown flags are
// EINVAL, with no command.
func TestQueryDataInOrder(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{DataInOrder: 1 << 2}) // RC
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	cq := n.cq(16, nil)
	rc, rc2 := n.qp(uverbs.QPTypeRC, cq, cap1), n.qp(uverbs.QPTypeRC, cq, cap1)
	uc, uc2 := n.qp(uverbs.QPTypeUC, cq, cap1), n.qp(uverbs.QPTypeUC, cq, cap1)
	calls := func(d *model.Device) (capQ, qpQ int) {
		return d.MethodCalls(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER),
			d.MethodCalls(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY)
	}
	ask := func(what string, q *uverbs.QP, flags uverbs.DataInOrderFlags, want uverbs.DataInOrderCaps, wantCap, wantQP int) {
		t.Helper()
		if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
			// libibverbs answers 0 off x86 unless asked for the device's
			// answer alone.
			if caps, err := q.QueryDataInOrder(uverbs.WRRDMAWrite, flags&^uverbs.DataInOrderDeviceOnly); caps != 0 || err != nil {
				t.Errorf("%s off x86 without DeviceOnly: %v, %v; want 0, nil", what, caps, err)
			}
			flags |= uverbs.DataInOrderDeviceOnly
		}
		c0, q0 := calls(d)
		caps, err := q.QueryDataInOrder(uverbs.WRRDMAWrite, flags)
		if caps != want || err != nil {
			t.Errorf("%s: QueryDataInOrder(flags %d) = %v, %v; want %v, nil", what, flags, caps, err, want)
		}
		if c1, q1 := calls(d); c1-c0 != wantCap || q1-q0 != wantQP {
			t.Errorf("%s: %d capability queries and %d QUERY_QPs, want %d and %d", what, c1-c0, q1-q0, wantCap, wantQP)
		}
	}
	ask("RC in RESET", rc, uverbs.DataInOrderReturnCaps, 0, 1, 0)
	connect(t, rc, rc2.QPN(), lidTo(d))
	whole := uverbs.DataInOrderWholeMsg | uverbs.DataInOrderAligned128
	ask("RC in RTS", rc, uverbs.DataInOrderReturnCaps, whole, 0, 1)
	ask("RC in RTS, no ReturnCaps", rc, 0, uverbs.DataInOrderWholeMsg, 0, 1)
	ask("RC in RTS, DeviceOnly", rc, uverbs.DataInOrderReturnCaps|uverbs.DataInOrderDeviceOnly, whole, 0, 1)
	connect(t, uc, uc2.QPN(), lidTo(d))
	ask("UC in RTS", uc, uverbs.DataInOrderReturnCaps, 0, 0, 1)
	if err := rc.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	ask("RC in ERR", rc, uverbs.DataInOrderReturnCaps, 0, 0, 0)
	before := n.ctx.Syscalls()
	if _, err := rc2.QueryDataInOrder(uverbs.WRSend, 4); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryDataInOrder with an unknown flag: %v, want EINVAL", err)
	}
	if s := n.ctx.Syscalls() - before; s != 0 {
		t.Errorf("the refused flag took %d syscalls, want 0", s)
	}

	nd, ndev := newModel(t, nil, model.Options{})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	ncq := nn.cq(4, nil)
	a, b := nn.qp(uverbs.QPTypeRC, ncq, cap1), nn.qp(uverbs.QPTypeRC, ncq, cap1)
	connect(t, a, b.QPN(), lidTo(nd))
	for i := 0; i < 2; i++ {
		if caps, err := a.QueryDataInOrder(uverbs.WRRDMAWrite, uverbs.DataInOrderReturnCaps); caps != 0 || err != nil {
			t.Errorf("without qp_data_in_order: %v, %v; want 0, nil", caps, err)
		}
	}
	if c, q := calls(nd); c != 1 || q != 0 {
		t.Errorf("without qp_data_in_order: %d capability queries and %d QUERY_QPs, want 1 and 0", c, q)
	}

	xd, xdev := newModel(t, nil, model.Options{RejectDEVX: true, DataInOrder: 1 << 2})
	xn := openNode(t, xd, xdev, uverbs.OpenOptions{})
	xcq := xn.cq(4, nil)
	xa, xb := xn.qp(uverbs.QPTypeRC, xcq, cap1), xn.qp(uverbs.QPTypeRC, xcq, cap1)
	connect(t, xa, xb.QPN(), lidTo(xd))
	caps, err := xa.QueryDataInOrder(uverbs.WRRDMAWrite, uverbs.DataInOrderReturnCaps)
	if caps != 0 || !errors.Is(err, uverbs.ErrNotSupported) || !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("without DEVX: %v, %v; want 0, ErrNotSupported (EPROTONOSUPPORT)", caps, err)
	} else {
		t.Logf("without DEVX: %v", err)
	}
}

// TestECEXRCTarget: ECE on XRC target QPs as rdma-core's mlx5 and Linux
// 6.1's mlx5_ib have them. The kernel creates a target without the
// caller's driver data (ib_create_qp_user passes no udata for XRC_TGT), so
// no trigger reaches the firmware and no answer comes back: QueryECE
// answers 0 even on a device with ece_support, where an RC QP answers the
// trigger (TestECE). SetECE is accepted on a target as on any QP
// (mlx5_set_ece), and the next MODIFY_QP carries the options: the kernel
// modifies the real QP with the caller's udata, so the answer comes back
// as for an RC QP. A transition whose firmware command carries no options
// (to ERR, to RESET: qpc.c's get_ece_from_mbox) answers 0. A target opened
// by OpenQP from another context starts at 0 and reaches the same QP with
// its own options. Without ece_support QueryECE answers 0 and SetECE is
// ErrNotSupported, as for any QP.
func TestECEXRCTarget(t *testing.T) {
	const fw = 0x1000000f
	f := model.NewFabric()
	d, dev := newModel(t, f, model.Options{ECE: fw})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	file, err := os.Create(filepath.Join(t.TempDir(), "xrcd"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	x, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{File: file, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	tq, err := x.CreateTargetQP()
	if err != nil {
		t.Fatalf("CreateTargetQP: %v", err)
	}
	defer tq.Close()
	query := func(what string, q *uverbs.QP, want uint32) {
		t.Helper()
		e, err := q.QueryECE()
		if err != nil || e != (uverbs.ECE{VendorID: 0x15b3, Options: want}) {
			t.Errorf("%s: QueryECE = %+v, %v; want vendor 0x15b3, options %#x", what, e, err, want)
		}
	}
	set := func(q *uverbs.QP, options uint32) {
		t.Helper()
		if err := q.SetECE(uverbs.ECE{VendorID: 0x15b3, Options: options}); err != nil {
			t.Fatalf("SetECE(%#x) on an XRC target: %v", options, err)
		}
	}
	query("after CreateTargetQP", tq, 0)
	set(tq, 0x10000035)
	connect(t, tq, 0x77, lidTo(d)) // RESET -> INIT (RST2INIT carries the options) -> RTR
	query("after Connect", tq, 0x10000005)
	set(tq, 0x10000003)
	if err := tq.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatalf("Modify to ERR: %v", err)
	}
	query("after a Modify to ERR with options", tq, 0)

	n2 := openNode(t, d, dev, uverbs.OpenOptions{})
	x2, err := n2.ctx.OpenXRCD(uverbs.XRCDOptions{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer x2.Close()
	oq, err := x2.OpenQP(tq.QPN())
	if err != nil {
		t.Fatalf("OpenQP: %v", err)
	}
	defer oq.Close()
	query("the opened target", oq, 0)
	if err := oq.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); err != nil {
		t.Fatalf("Modify of the opened target to RESET: %v", err)
	}
	set(oq, 0x10000009)
	init := &uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite}
	if err := oq.Modify(init, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatalf("Modify of the opened target to INIT: %v", err)
	}
	query("the opened target after its INIT", oq, 0x10000009)
	query("the creator's handle, which set nothing since", tq, 0)

	nd, ndev := newModel(t, f, model.Options{})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	nx, err := nn.ctx.OpenXRCD(uverbs.XRCDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nx.Close()
	ntq, err := nx.CreateTargetQP()
	if err != nil {
		t.Fatal(err)
	}
	defer ntq.Close()
	query("a target without ece_support", ntq, 0)
	if err := ntq.SetECE(uverbs.ECE{VendorID: 0x15b3, Options: 1}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("SetECE on a target without ece_support: %v, want ErrNotSupported", err)
	}
	if err := ntq.SetECE(uverbs.ECE{VendorID: 0x8086, Options: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SetECE of a foreign vendor on a target: %v, want EINVAL", err)
	}
}
