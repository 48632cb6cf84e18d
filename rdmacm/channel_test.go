package rdmacm

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// pipeChannel is an EventChannel whose file is a pipe's write end and that
// has no reader: commands are written and never answered, which is enough
// to count what sending them allocates. It returns the pipe's read end too.
func pipeChannel(t testing.TB) (*EventChannel, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]) })
	f := os.NewFile(uintptr(p[1]), "pipe")
	t.Cleanup(func() { f.Close() })
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return &EventChannel{file: f, rc: rc, sinks: map[uint64]sink{}, devs: map[uint64]*device{}, done: make(chan struct{})}, p[0]
}

// TestAllocsCommands: a ucma command allocates nothing to be sent, with or
// without a response (its frame comes from a pool), and ID.Close nothing
// at all. `make unit` runs the TestAllocs tests without -race.
func TestAllocsCommands(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's sync.Pool drops items; `make unit` runs this test without -race")
	}
	ch, _ := pipeChannel(t)
	const runs = 100
	ids := make([]*ID, runs+1)
	for i := range ids {
		ids[i] = newID(ch, PSTCP, 0)
		uid, err := ch.register(ids[i])
		if err != nil {
			t.Fatal(err)
		}
		ids[i].uid = uid
	}
	id := ids[0]
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Disconnect (write, no response)", func() { id.Disconnect() }},
		{"destroyKernelID (call, a response)", func() { ch.destroyKernelID(7) }},
		{"InitQPAttr's command (a 144-byte response)", func() {
			out := make([]byte, 144)
			req := abi.RdmaUcmInitQpAttr{Id: id.kid, QpState: 1}
			id.call("InitQPAttr", abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, abi.Bytes(&req), respAtInitQPAttr, out)
		}},
	} {
		if n := testing.AllocsPerRun(runs, c.f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", c.name, n)
		}
	}
	i := 0
	if n := testing.AllocsPerRun(runs, func() { ids[i].Close(); i++ }); n != 0 {
		t.Errorf("ID.Close: %v allocations, want 0", n)
	}
}

// TestCommandTooLarge: a request or response larger than a command frame
// is refused, naming the verb, and nothing is written.
func TestCommandTooLarge(t *testing.T) {
	ch, r := pipeChannel(t)
	if err := ch.write("Bind", abi.RDMA_USER_CM_CMD_BIND, make([]byte, 400), nil, false); err == nil || !strings.Contains(err.Error(), "Bind") {
		t.Errorf("a 400-byte request: %v, want an error naming Bind", err)
	}
	if err := ch.call("QueryPath", abi.RDMA_USER_CM_CMD_QUERY, make([]byte, 16), 0, make([]byte, 1024)); err == nil || !strings.Contains(err.Error(), "QueryPath") {
		t.Errorf("a 1024-byte response: %v, want an error naming QueryPath", err)
	}
	if err := ch.call("Close", abi.RDMA_USER_CM_CMD_DESTROY_ID, make([]byte, 4), 0, make([]byte, 4)); err == nil {
		t.Error("a response pointer past the request's end: no error")
	}
	if n, err := unix.Read(r, make([]byte, 64)); err != unix.EAGAIN {
		t.Errorf("the refused commands wrote %d bytes (%v)", n, err)
	}
}

// BenchmarkCreateClose is CreateID and Close over the pipe: the user-space
// cost of slowloop's cm_id loop (test/perf/slowloop.sh), without the
// kernel's (a pipe write stands in for each command; CreateID reads id 0
// from the response area, which the pipe leaves zero).
func BenchmarkCreateClose(b *testing.B) {
	ch, r := pipeChannel(b)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		createClose(b, ch, r, buf)
	}
}

// createClose creates an ID on a pipeChannel and closes it, then drains
// the pipe's read end r (through buf) so that it never fills.
func createClose(tb testing.TB, ch *EventChannel, r int, buf []byte) {
	id, err := ch.CreateID(PSTCP)
	if err != nil {
		tb.Fatal(err)
	}
	if err := id.Close(); err != nil {
		tb.Fatal(err)
	}
	unix.Read(r, buf)
}

// TestCommandAfterClose: a command on a closed channel fails with
// ErrClosed (RawConn.Control's own error is the poller's "use of closed
// file", which is not os.ErrClosed).
func TestCommandAfterClose(t *testing.T) {
	ch, _ := pipeChannel(t)
	close(ch.done) // no reader to wait for
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.CreateID(PSTCP); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateID after Close: %v, want ErrClosed", err)
	}
	if err := ch.write("Disconnect", abi.RDMA_USER_CM_CMD_DISCONNECT, make([]byte, 8), nil, false); !errors.Is(err, ErrClosed) {
		t.Errorf("a command after Close: %v, want ErrClosed", err)
	}
}
