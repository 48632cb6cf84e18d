package uverbs

import "testing"

// TestModifyResolvedRig: ModifyResolved moves an RC QP on rxe0 through
// Connect's steps, its RTR carrying an address vector (the command rdma_cm's
// dialer makes after its last wait, a raw syscall on a software device),
// to RTS, each step one command, and it checks a mask as Modify does.
func TestModifyResolvedRig(t *testing.T) {
	e := newEvEnv(t, "rxe0")
	cq := e.cq(t, 16, nil)
	qp := e.rcQP(t, cq, cq, nil, 4, 4)
	if err := qp.ModifyResolved(&QPAttr{}, 0); err == nil {
		t.Error("ModifyResolved with an empty mask succeeded")
	}
	local, err := qp.Endpoint(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ConnectSteps(QPTypeRC, local, local, ConnectOptions{}) {
		oneSyscall(t, e.ctx, "ModifyResolved to "+s.Attr.State.String(), func() error { return qp.ModifyResolved(&s.Attr, s.Mask) })
		if st := qp.State(); st != s.Attr.State {
			t.Errorf("State after ModifyResolved to %v: %v", s.Attr.State, st)
		}
	}
	a, _, err := qp.Query(QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != QPStateRTS {
		t.Errorf("the kernel has the QP in %v, want RTS", a.State)
	}
}

// TestConnectResolvedRig: Connect with ConnectOptions.Resolved (its RTR
// made by ModifyResolved) takes an RC QP on rxe0 from RESET to RTS in its
// three commands, as without it.
func TestConnectResolvedRig(t *testing.T) {
	e := newEvEnv(t, "rxe0")
	cq := e.cq(t, 16, nil)
	for _, resolved := range []bool{false, true} {
		qp := e.rcQP(t, cq, cq, nil, 4, 4)
		local, err := qp.Endpoint(1, 1)
		if err != nil {
			t.Fatal(err)
		}
		sys, maps := e.ctx.Syscalls(), e.ctx.Mappings()
		if err := qp.Connect(local, local, ConnectOptions{Resolved: resolved}); err != nil {
			t.Fatalf("Connect (Resolved %v): %v", resolved, err)
		}
		if n := e.ctx.Syscalls() - sys - (e.ctx.Mappings() - maps); n != 3 {
			t.Errorf("Connect (Resolved %v) made %d command syscalls, want 3", resolved, n)
		}
		if st := qp.State(); st != QPStateRTS {
			t.Errorf("Connect (Resolved %v): QP in %v, want RTS", resolved, st)
		}
	}
}
