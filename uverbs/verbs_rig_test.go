package uverbs

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
	"golang.org/x/sys/unix"
)

// rigDevice finds a rig device by name; outside the rig the test skips,
// inside a missing device fails it.
func rigDevice(t *testing.T, name string) Device {
	t.Helper()
	rigtest.Device(t, name)
	d, err := DeviceByName(name)
	if err != nil {
		t.Fatalf("DeviceByName(%s): %v", name, err)
	}
	return d
}

var policies = []struct {
	name string
	p    CommandPolicy
}{{"auto", PolicyAuto}, {"ioctl", PolicyIoctl}, {"write", PolicyWrite}}

// oneSyscall runs f and checks it made exactly one command syscall, as
// rdma-core's verbs do; a provider's queue mappings (rxe mmaps each queue
// the kernel hands out, as librxe does) are counted apart and logged.
func oneSyscall(t *testing.T, c *Context, verb string, f func() error) {
	t.Helper()
	sys, maps := c.Syscalls(), c.Mappings()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", verb, err)
	}
	m := c.Mappings() - maps
	if n := c.Syscalls() - sys - m; n != 1 {
		t.Errorf("%s made %d command syscalls, want 1", verb, n)
	}
	if m > 0 {
		t.Logf("%s: 1 command + %d mmap/munmap", verb, m)
	}
}

func newBuffer(t *testing.T, size int) *mmap.Region {
	t.Helper()
	r, err := mmap.Anonymous(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestSlowPathRig runs every object verb on each rig device, by each
// transport, counting syscalls.
func TestSlowPathRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		for _, pol := range policies {
			t.Run(name+"/"+pol.name, func(t *testing.T) {
				d := rigDevice(t, name)
				rec := NewRecorder()
				c, err := OpenWith(d, OpenOptions{Transport: pol.p, Recorder: rec})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				gidQueries := slowPath(t, c, name == "siw0")
				checkRecorded(t, rec, pol.p, gidQueries)
				if pol.p == PolicyAuto {
					// which way each verb went on this kernel (a method the
					// kernel lacks goes by write() under auto), for the
					// per-kernel note in test/rig/README.md
					var ways []string
					for verb, tr := range c.Transports() {
						ways = append(ways, verb+"="+tr.String())
					}
					sort.Strings(ways)
					t.Logf("auto transports on %s: %s", name, strings.Join(ways, " "))
				}
				for verb, tr := range c.Transports() {
					want := CommandIoctl
					if pol.p == PolicyWrite {
						want = CommandWrite
					}
					if verb == "CreateCompChannel" || verb == "ReqNotifyCQ" {
						continue // write-only commands, tunnelled by INVOKE_WRITE or not
					}
					if verb == "QueryGID" && tr == CommandNone {
						continue // the provider's GID query (5.10's CreateAH) from sysfs: no command
					}
					if pol.p != PolicyAuto && tr != want {
						t.Errorf("%s went by %v under policy %s", verb, tr, pol.name)
					}
				}
			})
		}
	}
}

// hasMW reports whether d has the MEM_WINDOW capability, asked on a
// context of its own (the caller's counts its syscalls).
func hasMW(t *testing.T, d Device) bool {
	t.Helper()
	c, err := Open(d)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatalf("QueryDevice: %v", err)
	}
	return attr.CapFlags&DeviceMemWindow != 0
}

// slowPath returns how many GID queries the provider made inside other
// verbs (CreateAH's, where the kernel gave no AH number).
func slowPath(t *testing.T, c *Context, iwarp bool) (gidQueries uint64) {
	var pd *PD
	oneSyscall(t, c, "AllocPD", func() (err error) { pd, err = c.AllocPD(); return })
	buf := newBuffer(t, 64<<10)
	var mr *MR
	access := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	oneSyscall(t, c, "RegMR", func() (err error) { mr, err = pd.RegMR(buf.Bytes(), access); return })
	if mr.LKey() == 0 && mr.RKey() == 0 || mr.Len() != 64<<10 {
		t.Errorf("MR keys/len: lkey %#x rkey %#x len %d", mr.LKey(), mr.RKey(), mr.Len())
	}
	// Neither rxe nor siw implements rereg_user_mr in 6.1 (sw/rxe/rxe_verbs.c,
	// sw/siw/siw_main.c), and uverbs then answers EOPNOTSUPP: it must come
	// back as ErrNotSupported. A kernel that has it must apply it.
	before := c.Syscalls()
	switch err := mr.Rereg(ReregAttr{Access: AccessLocalWrite | AccessRemoteRead}, ReregAccess); {
	case errors.Is(err, ErrNotSupported):
		t.Logf("ReregMR: %v", err)
	case err != nil:
		t.Errorf("ReregMR: %v", err)
	case mr.Access() != AccessLocalWrite|AccessRemoteRead:
		t.Errorf("access after rereg = %v", mr.Access())
	}
	if n := c.Syscalls() - before; n != 1 {
		t.Errorf("ReregMR made %d syscalls, want 1", n)
	}
	if c.Mappings() != 0 && c.Device().Driver != DriverRXE {
		t.Errorf("%v made mappings", c.Device().Driver)
	}
	// Destroying a PD in use must fail and leave everything usable.
	if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("DeallocPD with an MR: err = %v, want EBUSY", err)
	}
	mw, err := pd.AllocMW(MWType1)
	if iwarp {
		if !errors.Is(err, ErrNotSupported) {
			t.Errorf("AllocMW on siw: err = %v, want ErrNotSupported", err)
		}
	} else if !hasMW(t, c.Device()) {
		// rxe before memory windows (5.10): no MEM_WINDOW capability, and
		// the refusal must say not supported.
		if !errors.Is(err, ErrNotSupported) {
			t.Errorf("AllocMW on %s without the MEM_WINDOW capability: err = %v, want ErrNotSupported", c.Device().Name, err)
		} else {
			t.Logf("AllocMW refused, the device has no MEM_WINDOW capability: %v", err)
		}
	} else if err != nil {
		t.Errorf("AllocMW: %v", err)
	} else {
		oneSyscall(t, c, "DeallocMW", mw.Close)
	}

	var ch *CompChannel
	oneSyscall(t, c, "CreateCompChannel", func() (err error) { ch, err = c.CreateCompChannel(); return })
	var cq *CQ
	oneSyscall(t, c, "CreateCQ", func() (err error) { cq, err = c.CreateCQ(100, CQOptions{Channel: ch}); return })
	if cq.CQE() < 100 {
		t.Errorf("CQ has %d entries, asked 100", cq.CQE())
	}
	if !iwarp {
		oneSyscall(t, c, "ResizeCQ", func() error { return cq.Resize(300) })
		if cq.CQE() < 300 {
			t.Errorf("resized CQ has %d entries, asked 300", cq.CQE())
		}
	}
	var srq *SRQ
	oneSyscall(t, c, "CreateSRQ", func() (err error) { srq, err = pd.CreateSRQ(SRQInit{MaxWR: 32, MaxSGE: 1}); return })
	oneSyscall(t, c, "ModifySRQ", func() error { return srq.Modify(SRQAttr{Limit: 4}, SRQAttrLimit) })
	oneSyscall(t, c, "QuerySRQ", func() error {
		a, err := srq.Query()
		if err == nil && (a.MaxWR < 32 || a.Limit != 4) {
			err = fmt.Errorf("max_wr %d limit %d", a.MaxWR, a.Limit)
		}
		return err
	})

	types := []QPType{QPTypeRC, QPTypeUD, QPTypeUC}
	if iwarp {
		types = []QPType{QPTypeRC}
	}
	for _, typ := range types {
		var qp *QP
		oneSyscall(t, c, "CreateQP", func() (err error) {
			qp, err = pd.CreateQP(QPInit{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
			return
		})
		if qp.QPN() == 0 || qp.Cap().MaxSendWR < 16 {
			t.Errorf("%v QP: qpn %d cap %+v", typ, qp.QPN(), qp.Cap())
		}
		// RESET → RTS directly is a QP in the wrong state: EINVAL, nothing changes.
		if err := qp.Modify(&QPAttr{State: QPStateRTS}, QPAttrState); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%v RESET→RTS: err = %v, want EINVAL", typ, err)
		}
		init := QPAttr{State: QPStateInit, PortNum: 1, PKeyIndex: 0, QKey: 0x11111111, AccessFlags: AccessRemoteWrite | AccessRemoteRead}
		mask := QPAttrState | QPAttrPKeyIndex | QPAttrPort
		switch typ {
		case QPTypeUD:
			mask |= QPAttrQKey
		case QPTypeUC:
			init.AccessFlags = AccessRemoteWrite
			mask |= QPAttrAccessFlags
		default:
			mask |= QPAttrAccessFlags
		}
		oneSyscall(t, c, "ModifyQP", func() error { return qp.Modify(&init, mask) })
		oneSyscall(t, c, "QueryQP", func() error {
			a, qi, err := qp.Query(QPAttrState | QPAttrPort | QPAttrCap)
			if iwarp {
				// siw_query_qp (sw/siw/siw_verbs.c) fills only caps, MTU,
				// access and atomics; the core zeroes the rest, so state
				// and port read as RESET and 0 whatever the QP's state.
				a.State, a.PortNum = QPStateInit, 1
			}
			if err == nil && (a.State != QPStateInit || a.PortNum != 1 || qi.Cap.MaxSendWR < 16) {
				err = fmt.Errorf("queried state %v port %d cap %+v", a.State, a.PortNum, qi.Cap)
			}
			return err
		})
		if err := cq.Close(); !errors.Is(err, unix.EBUSY) {
			t.Errorf("DestroyCQ under a QP: err = %v, want EBUSY", err)
		}
		oneSyscall(t, c, "DestroyQP", qp.Close)
		if err := qp.Close(); err != nil {
			t.Errorf("second QP Close: %v", err)
		}
	}
	if !iwarp {
		gid := readGID(t, c.Device().Name, 1)
		sys, maps := c.Syscalls(), c.Mappings()
		ah, err := pd.CreateAH(AHAttr{PortNum: 1, GRH: &GlobalRoute{DGID: gid, SGIDIndex: 1, HopLimit: 64}})
		if err != nil {
			t.Fatalf("CreateAH: %v", err)
		}
		want := uint64(1)
		if n, ok := ah.ProviderAH().(interface{ Num() uint32 }); ok && n.Num() == 0 {
			// The kernel answered CREATE_AH with no AH number (rxe before
			// Linux 5.16: 5.10 in the rig): UD WQEs then carry the whole
			// address vector, whose source address the provider reads from
			// the GID table (QUERY_GID), as librxe does there.
			// Under PolicyWrite the GID comes from sysfs (the write ABI has
			// no QUERY_GID), with no command.
			if c.Transports()["QueryGID"] == CommandNone {
				t.Logf("CreateAH: the kernel gave no AH number: CREATE_AH + the GID from sysfs")
			} else {
				t.Logf("CreateAH: the kernel gave no AH number: CREATE_AH + QUERY_GID")
				want, gidQueries = 2, 1
			}
		}
		if n := c.Syscalls() - sys - (c.Mappings() - maps); n != want {
			t.Errorf("CreateAH made %d command syscalls, want %d", n, want)
		}
		oneSyscall(t, c, "DestroyAH", ah.Close)
	}
	oneSyscall(t, c, "DestroySRQ", srq.Close)
	oneSyscall(t, c, "DestroyCQ", cq.Close)
	if err := ch.Close(); err != nil {
		t.Errorf("CompChannel.Close: %v", err)
	}
	oneSyscall(t, c, "DeregMR", mr.Close)
	oneSyscall(t, c, "DeallocPD", pd.Close)
	if err := pd.Close(); err != nil {
		t.Errorf("second PD Close: %v", err)
	}
	return gidQueries
}

// checkRecorded compares the recorder with what the chokepoint counted:
// one command per call for every verb that succeeded, by the policy's
// transport. gidQueries GID queries were made inside other verbs (the
// provider's, in CreateAH): CreateAH's row counts their syscalls, and the
// QueryGID row holds their bytes with no call of its own.
func checkRecorded(t *testing.T, rec *Recorder, p CommandPolicy, gidQueries uint64) {
	t.Helper()
	snap := rec.Snapshot()
	seen := map[string]bool{}
	for _, v := range snap {
		seen[v.Verb] = true
		if v.Verb == "QueryGID" && v.Calls == 0 && gidQueries > 0 {
			// the outer verb's row counts the syscalls, this one the bytes
			if v.Syscalls != 0 || v.BytesIn == 0 || v.BytesOut == 0 {
				t.Errorf("QueryGID inside other verbs: %d syscalls, %d bytes in, %d out; want 0 and the command's bytes", v.Syscalls, v.BytesIn, v.BytesOut)
			}
			continue
		}
		if v.Calls == 0 || v.Latency.Count != v.Calls {
			t.Errorf("%s: %d calls, %d latencies", v.Verb, v.Calls, v.Latency.Count)
		}
		switch v.Verb {
		case "Open": // GET_CONTEXT, then ASYNC_EVENT_ALLOC after an ioctl GET_CONTEXT
			want := uint64(2)
			if p == PolicyWrite {
				want = 1
			}
			if v.Syscalls != want {
				t.Errorf("Open: %d syscalls, want %d", v.Syscalls, want)
			}
			continue
		case "DestroyCompChannel":
			// close(2) of the event fd happens in package os, not at the
			// command file's chokepoint (test/strace counts it).
			continue
		}
		want := v.Calls
		if v.Verb == "CreateAH" {
			want += gidQueries
		}
		if v.Errors == 0 && v.Syscalls-v.Mappings != want {
			t.Errorf("%s: %d calls made %d command syscalls", v.Verb, v.Calls, v.Syscalls-v.Mappings)
		}
		if v.Errors == 0 && v.BytesIn == 0 {
			t.Errorf("%s: no command bytes recorded", v.Verb)
		}
	}
	for _, verb := range []string{"Open", "AllocPD", "RegMR", "CreateCQ", "CreateQP", "ModifyQP", "QueryQP", "DestroyQP", "DestroyCQ", "DeregMR", "DeallocPD", "CreateSRQ", "DestroySRQ"} {
		if !seen[verb] {
			t.Errorf("recorder has no %s", verb)
		}
	}
	var b strings.Builder
	rec.WriteTo(&b)
	t.Logf("recorded:\n%s", b.String())
}

// readGID reads a GID from sysfs ("fe80:0000:…"), independent of the
// query code under test.
func readGID(t *testing.T, dev string, index int) [16]byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/sys/class/infiniband/%s/ports/1/gids/%d", dev, index))
	if err != nil {
		t.Fatal(err)
	}
	var g [16]byte
	var w [8]uint16
	if _, err := fmt.Sscanf(string(b), "%x:%x:%x:%x:%x:%x:%x:%x", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7]); err != nil {
		t.Fatalf("GID %q: %v", b, err)
	}
	for i, v := range w {
		g[2*i], g[2*i+1] = byte(v>>8), byte(v)
	}
	return g
}

// TestSlowPathErrorsRig checks the error paths: bad handles, bad input,
// caps over the device's limits, each with a clear error and nothing leaked.
func TestSlowPathErrorsRig(t *testing.T) {
	rigtest.Require(t)
	for _, name := range []string{"rxe0", "siw0"} {
		t.Run(name, func(t *testing.T) {
			c, err := Open(rigDevice(t, name))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			fds := countFDs(t)

			// A handle the kernel never gave out: the object lookup fails
			// and ib_uverbs_reg_mr returns its PTR_ERR, -ENOENT
			// (core/uverbs_cmd.c, 6.1).
			// 5.10 answers -EINVAL instead (seen in the rig on 5.10.262:
			// its ib_uverbs_reg_mr turns a failed PD lookup into -EINVAL).
			bogus := &PD{ctx: c, handle: 0xfffff}
			want := unix.ENOENT
			if strings.HasPrefix(rigtest.Kernel(), "5.10.") {
				want = unix.EINVAL
			}
			if _, err := bogus.RegMR(newBuffer(t, 4096).Bytes(), AccessLocalWrite); !errors.Is(err, want) {
				t.Errorf("RegMR on a bogus PD: err = %v, want %v", err, want)
			} else if e := (*OpError)(nil); !errors.As(err, &e) || e.Verb != "RegMR" || e.Device != name {
				t.Errorf("error does not name the verb and device: %v", err)
			}
			// Refused before any syscall: remote write without local write.
			before := c.Syscalls()
			if _, err := pd.RegMR(newBuffer(t, 4096).Bytes(), AccessRemoteWrite); !errors.Is(err, unix.EINVAL) {
				t.Errorf("RegMR remote write without local write: err = %v", err)
			}
			if _, err := c.CreateCQ(0, CQOptions{}); !errors.Is(err, unix.EINVAL) {
				t.Errorf("CreateCQ(0): err = %v", err)
			}
			if n := c.Syscalls() - before; n != 0 {
				t.Errorf("bad input made %d syscalls", n)
			}
			// Memory that is not mapped.
			if _, err := pd.RegMRAddr(0x10000, 4096, 0x10000, AccessLocalWrite); err == nil {
				t.Error("RegMR of unmapped memory succeeded")
			}
			// Too large a CQ and QP: the kernel's EINVAL, nothing leaked.
			if _, err := c.CreateCQ(1<<30, CQOptions{}); !errors.Is(err, unix.EINVAL) {
				t.Errorf("CreateCQ(1<<30): err = %v, want EINVAL", err)
			}
			cq, err := c.CreateCQ(16, CQOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1 << 30, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("CreateQP with max_send_wr 1<<30: err = %v, want EINVAL", err)
			}
			if _, err := pd.CreateQP(QPInit{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1000, MaxRecvSGE: 1}}); !errors.Is(err, unix.EINVAL) {
				t.Errorf("CreateQP with 1000 SGEs: err = %v, want EINVAL", err)
			}
			if err := cq.Close(); err != nil {
				t.Errorf("CQ close after failed QP creates: %v (a failed create leaked a reference?)", err)
			}
			// A closed context refuses verbs without a syscall.
			if got := countFDs(t); got != fds {
				t.Errorf("fds %d → %d after failed creates", fds, got)
			}
		})
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
