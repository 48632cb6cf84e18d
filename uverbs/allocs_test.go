package uverbs

import (
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

// ioctlKernel answers the slow-path commands of TestAllocsSlowPathVerbs by
// ioctl, as a 5.x+ kernel does, without allocating: it writes each output
// attribute's bytes and marks it valid, as the kernel's uverbs_copy_to.
type ioctlKernel struct {
	asyncFd int
	chanFd  int    // CREATE_COMP_CHANNEL's answer (0: the test makes no channel)
	ring    []byte // Mmap's memory
	eintr   int    // REG_MRs and ADVISE_MRs still to answer with EINTR
	regMRs  int    // REG_MRs seen
	advises int    // ADVISE_MRs seen
}

func (k *ioctlKernel) Ioctl(fd int, req uint, arg []byte) error {
	object, method, n := ne.Uint16(arg[2:]), ne.Uint16(arg[4:]), int(ne.Uint16(arg[6:]))
	var writeCmd uint64
	for i := 0; i < n; i++ {
		if a := arg[24+16*i:]; object == abi.UVERBS_OBJECT_DEVICE && method == abi.UVERBS_METHOD_INVOKE_WRITE && ne.Uint16(a) == 2 {
			writeCmd = ne.Uint64(a[8:]) // UVERBS_ATTR_WRITE_CMD
		}
	}
	regMR, advise := writeCmd == abi.IB_USER_VERBS_CMD_REG_MR, object == abi.UVERBS_OBJECT_MR && method == abi.UVERBS_METHOD_ADVISE_MR
	if regMR {
		k.regMRs++
	}
	if advise {
		k.advises++
	}
	if (regMR || advise) && k.eintr > 0 {
		k.eintr--
		return unix.EINTR
	}
	for i := 0; i < n; i++ {
		a := arg[24+16*i:]
		id, length, data := ne.Uint16(a), int(ne.Uint16(a[2:])), ne.Uint64(a[8:])
		out := func() []byte { ne.PutUint16(a[4:], ne.Uint16(a[4:])|2); return kernel.UserMemory(data, length) }
		switch {
		case object == abi.UVERBS_OBJECT_ASYNC_EVENT && id == abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE:
			ne.PutUint64(a[8:], uint64(k.asyncFd))
		case object == abi.UVERBS_OBJECT_DEVICE && method == abi.UVERBS_METHOD_GET_CONTEXT && id == abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS:
			ne.PutUint32(out(), 1)
		case object == abi.UVERBS_OBJECT_DEVICE && method == abi.UVERBS_METHOD_QUERY_PORT && id == abi.UVERBS_ATTR_QUERY_PORT_RESP:
			o := out()
			o[0] = 4 // PORT_ACTIVE
		case object == abi.UVERBS_OBJECT_DEVICE && method == abi.UVERBS_METHOD_QUERY_GID_ENTRY && id == abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY:
			o := out()
			o[15] = 1
		case writeCmd == abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL && id == 1 && k.chanFd > 0:
			ne.PutUint32(out(), uint32(k.chanFd))
		case writeCmd == abi.IB_USER_VERBS_CMD_ALLOC_PD && id == 1: // UVERBS_ATTR_CORE_OUT
			ne.PutUint32(out(), 7)
		case writeCmd == abi.IB_USER_VERBS_CMD_CREATE_AH && id == 1:
			ne.PutUint32(out(), 8) // ah_handle
		case writeCmd == abi.IB_USER_VERBS_CMD_CREATE_AH && id == abi.UVERBS_ATTR_UHW_OUT:
			ne.PutUint32(out(), 3) // rxe's ah_num (Linux 5.16 and later)
		case object == abi.UVERBS_OBJECT_CQ && method == abi.UVERBS_METHOD_CQ_CREATE && id == abi.UVERBS_ATTR_CREATE_CQ_HANDLE:
			ne.PutUint64(a[8:], 9)
		case object == abi.UVERBS_OBJECT_CQ && method == abi.UVERBS_METHOD_CQ_CREATE && id == abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE:
			ne.PutUint32(out(), 256)
		case object == abi.UVERBS_OBJECT_CQ && method == abi.UVERBS_METHOD_CQ_CREATE && id == abi.UVERBS_ATTR_UHW_OUT:
			o := out() // siw_uresp_create_cq {cq_id, num_cqe, cq_key}
			ne.PutUint32(o, 5)
			ne.PutUint32(o[4:], 256)
		case writeCmd == abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE|abi.IB_USER_VERBS_CMD_FLAG_EXTENDED && id == 1:
			o := out()
			ne.PutUint32(o[len(o)-8:], uint32(len(o))) // response_length: every field valid
		}
	}
	return nil
}

func (k *ioctlKernel) Write(int, []byte) (int, error)    { return 0, unix.ENOSYS }
func (k *ioctlKernel) Doorbell(int, []byte) (int, error) { return 0, unix.ENOSYS }
func (k *ioctlKernel) Munmap([]byte) error               { return nil }

// Mmap maps a queue (siw's CQ ring) as the kernel would, in memory the
// fake keeps: one mapping at a time, reused.
func (k *ioctlKernel) Mmap(_ int, _ int64, n int) ([]byte, error) {
	if len(k.ring) < n {
		k.ring = make([]byte, n)
	}
	clear(k.ring[:n])
	return k.ring[:n], nil
}
func (k *ioctlKernel) Close(int) error { return nil }

// TestAllocsSlowPathVerbs: a slow-path verb allocates only what its answer
// is: nothing for the queries (QueryPort, QueryGID, QueryDevice once the
// firmware version is formatted), the PD object for AllocPD, nothing for
// its Close. make unit runs the TestAllocs tests without -race.
func TestAllocsSlowPathVerbs(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's sync.Pool drops items; `make unit` runs this test without -race")
	}
	c := openIoctlKernel(t, "/dev/infiniband/uverbs-allocs-test", DriverMTHCA)
	for _, v := range []struct {
		name string
		want float64
		run  func() error
	}{
		{"QueryPort", 0, func() error { _, err := c.QueryPort(1); return err }},
		{"QueryGID", 0, func() error { _, err := c.QueryGID(1, 0); return err }},
		{"QueryDevice", 0, func() error { _, err := c.QueryDevice(); return err }},
		{"AllocPD", 1, func() error {
			_, err := c.AllocPD() // left open: the fake keeps no table
			return err
		}},
		{"AllocPD+Close", 1, func() error {
			pd, err := c.AllocPD()
			if err != nil {
				return err
			}
			return pd.Close()
		}},
	} {
		if err := v.run(); err != nil { // warm: the transport record, the firmware version
			t.Fatalf("%s: %v", v.name, err)
		}
		if n := testing.AllocsPerRun(200, func() {
			if err := v.run(); err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
		}); n != v.want {
			t.Errorf("%s: %.1f allocations per call, want %v", v.name, n, v.want)
		}
	}
}

// openIoctlKernel opens a context of driver's provider over an ioctlKernel
// registered at path, closed (and the fake unregistered) when t ends.
func openIoctlKernel(t *testing.T, path string, driver DriverID) *Context {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(pipe[1]) })
	t.Cleanup(kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, &ioctlKernel{asyncFd: pipe[0]}, nil }))
	c, err := Open(Device{Name: "fake0", CharDev: path, Driver: driver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
