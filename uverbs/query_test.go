package uverbs

import (
	"errors"
	"net"
	"reflect"
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/internal/kernel"
	"golang.org/x/sys/unix"
)

func TestFormatFWVersion(t *testing.T) {
	raw := uint64(16)<<32 | uint64(35)<<16 | 1012
	for _, tc := range []struct {
		d    DriverID
		raw  uint64
		want string
	}{
		{DriverRXE, 0, "0.0.0"},
		{DriverSIW, 0, "0.0.0"},
		{DriverMLX5, raw, "16.35.1012"},
		{DriverMLX5, uint64(20)<<32 | uint64(1)<<16 | 7, "20.1.0007"},
		{DriverMLX4, uint64(2)<<32 | uint64(42)<<16 | 5000, "2.42.5000"},
		{DriverHNS, uint64(1)<<32 | 7, "1.0.007"},
		{DriverIRDMA, uint64(1)<<32 | 52, "1.52"},
		{DriverCXGB4, 0x01020304, "1.2.3.4"},
		{DriverOCRDMA, 0, "kernel"},
	} {
		if got := formatFWVersion(tc.d, tc.raw, "kernel"); got != tc.want {
			t.Errorf("formatFWVersion(%v, %#x) = %q, want %q", tc.d, tc.raw, got, tc.want)
		}
	}
}

// TestDeviceAttrResponseLength checks that fields past the kernel's
// response_length stay zero, as rdma-core's CAN_COPY leaves them.
func TestDeviceAttrResponseLength(t *testing.T) {
	var r abi.IbUverbsExQueryDeviceResp
	r.Base.MaxQp = 7
	r.Base.NodeGuid = guid(0x505400fffe123456) // guid is its own inverse
	r.OdpCaps.GeneralCaps = 1
	r.TimestampMask = 0xff
	r.HcaCoreClock = 1000
	r.DeviceCapFlagsEx = 1 << 34
	r.MaxDmSize = 4096
	r.XrcOdpCaps = 3
	c := &Context{dev: Device{Name: "t", Driver: DriverRXE}}
	full := c.deviceAttr(&r, int(reflectSize(r)))
	if !full.Extended || full.MaxQP != 7 || full.NodeGUID != 0x505400fffe123456 || full.ODPCaps.General != ODPSupport ||
		full.CompletionTimestampMask != 0xff || full.HCACoreClock != 1000 || full.CapFlagsEx != DeviceRawScatterFCS ||
		full.MaxDMSize != 4096 || full.XRCODPCaps != 3 || full.FWVersion != "0.0.0" {
		t.Errorf("full response: %+v", full)
	}
	short := c.deviceAttr(&r, exRespClockEnd)
	if short.HCACoreClock != 1000 || short.CapFlagsEx != 0 || short.MaxDMSize != 0 || short.XRCODPCaps != 0 {
		t.Errorf("response_length %d: %+v", exRespClockEnd, short)
	}
	legacy := c.deviceAttr(&r, 0)
	if legacy.Extended || legacy.MaxQP != 7 || legacy.ODPCaps.General != 0 || legacy.TMCaps != (TMCaps{}) {
		t.Errorf("legacy: %+v", legacy)
	}
}

func reflectSize[T any](v T) uintptr { return uintptr(len(abi.Bytes(&v))) }

func TestFlagNames(t *testing.T) {
	got := DeviceCap(0x01223c76 | 1<<30).Names()
	want := []string{"BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG", "CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE",
		"PORT_ACTIVE_EVENT", "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "SRQ_RESIZE", "MEM_WINDOW", "MEM_MGT_EXTENSIONS",
		"MEM_WINDOW_TYPE_2B", "0x40000000"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %q\nwant    %q", got, want)
	}
	if u := DeviceCap(0x01223c76 | 1<<30).Unknown(); u != 1<<30 {
		t.Errorf("Unknown = %#x", u)
	}
	if n := ODPTransportCap(0).Names(); len(n) != 0 {
		t.Errorf("no bits: %q", n)
	}
}

// TestIfName: SIOCGIFNAME agrees with the net package on every interface.
func TestIfName(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, i := range ifs {
		if got := ifName(i.Index); got != i.Name {
			t.Errorf("ifName(%d) = %q, want %q", i.Index, got, i.Name)
		}
	}
	if n := ifName(1 << 30); n != "" {
		t.Errorf("ifName of a missing interface = %q", n)
	}
	names := netdevNames{}
	if names.name(0) != "" || names.name(-1) != "" {
		t.Errorf("index 0 or -1 has a name")
	}
}

// legacyKernel plays a kernel without RDMA_VERBS_IOCTL and without the
// extended QUERY_DEVICE (pre-4.x uverbs): every command by write().
type legacyKernel struct {
	t       *testing.T
	asyncFd int
	cmds    []uint32
}

func (k *legacyKernel) Ioctl(fd int, req uint, arg []byte) error { return unix.ENOTTY }

// Doorbell is a write to the fake.
func (k *legacyKernel) Doorbell(fd int, p []byte) (int, error) { return k.Write(fd, p) }

func (k *legacyKernel) Write(fd int, p []byte) (int, error) {
	cmd := ne.Uint32(p)
	k.cmds = append(k.cmds, cmd)
	out := func(n int) []byte { return kernel.UserMemory(ne.Uint64(p[8:]), n) }
	switch cmd {
	case abi.IB_USER_VERBS_CMD_GET_CONTEXT:
		r := abi.IbUverbsGetContextResp{AsyncFd: uint32(k.asyncFd), NumCompVectors: 3}
		copy(out(8), abi.Bytes(&r))
	case abi.IB_USER_VERBS_CMD_QUERY_DEVICE:
		r := abi.IbUverbsQueryDeviceResp{FwVer: 1<<32 | 2<<16 | 3, NodeGuid: guid(0x0002c90300498f20), MaxQp: 42,
			DeviceCapFlags: uint32(DeviceBadPKeyCntr), PhysPortCnt: 2, MaxPkeys: 128, AtomicCap: 1}
		copy(out(176), abi.Bytes(&r))
	case abi.IB_USER_VERBS_CMD_QUERY_PORT:
		r := abi.IbUverbsQueryPortResp{State: 4, MaxMtu: 5, ActiveMtu: 4, GidTblLen: 128, Lid: 7, LinkLayer: 1,
			ActiveWidth: 2, ActiveSpeed: 32, PhysState: 5, PortCapFlags: uint32(PortCMSup | PortSM)}
		if p[16] != 1 && p[16] != 2 {
			return 0, unix.EINVAL
		}
		copy(out(40), abi.Bytes(&r))
	case abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED:
		return 0, unix.EOPNOTSUPP
	default:
		return 0, unix.ENOSYS
	}
	return len(p), nil
}

func (k *legacyKernel) Mmap(int, int64, int) ([]byte, error) { return nil, unix.ENODEV }
func (k *legacyKernel) Munmap([]byte) error                  { return nil }
func (k *legacyKernel) Close(int) error                      { return nil }

// TestQueryLegacyKernel: on a kernel without ioctl and without the
// extended QUERY_DEVICE, QueryDevice falls back to the legacy command (as
// rdma-core does on EOPNOTSUPP) and QueryPort goes by write.
func TestQueryLegacyKernel(t *testing.T) {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[1])
	k := &legacyKernel{t: t, asyncFd: pipe[0]}
	const path = "/dev/infiniband/uverbs-legacy-test"
	defer kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 1000, k, nil })()
	c, err := Open(Device{Name: "old0", CharDev: path, Driver: DriverMTHCA})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := c.Syscalls()
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Syscalls() - before; n != 2 {
		t.Errorf("QueryDevice on a legacy kernel: %d syscalls, want 2 (extended, then legacy)", n)
	}
	if a.Extended || a.MaxQP != 42 || a.NodeGUID != 0x0002c90300498f20 || a.PhysPortCnt != 2 || a.MaxPKeys != 128 ||
		a.CapFlags != DeviceBadPKeyCntr || a.AtomicCap != AtomicHCA || a.FWVersion != "1.2.3" || a.CapFlagsEx != 0 {
		t.Errorf("legacy QueryDevice: %+v", a)
	}
	p, err := c.QueryPort(2)
	if err != nil {
		t.Fatal(err)
	}
	want := PortAttr{State: PortActive, MaxMTU: MTU4096, ActiveMTU: MTU2048, GIDTableLen: 128, LID: 7,
		LinkLayer: LinkLayerInfiniBand, ActiveWidth: 2, ActiveSpeed: 32, PhysState: PhysLinkUp, CapFlags: PortCMSup | PortSM}
	if p != want {
		t.Errorf("QueryPort(2) = %+v\nwant %+v", p, want)
	}
	if p.ActiveWidth.String() != "4X" || p.ActiveSpeed.String() != "25.0 Gbps" || p.CapFlags.Names()[0] != "SM" {
		t.Errorf("port strings: %v %v %q", p.ActiveWidth, p.ActiveSpeed, p.CapFlags.Names())
	}
	if _, err := c.QueryPort(3); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(3): %v, want EINVAL", err)
	}
	if _, err := c.QueryPort(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryPort(0): %v, want EINVAL", err)
	}
	for verb, want := range map[string]CommandTransport{"QueryDevice": CommandWrite, "QueryPort": CommandWrite} {
		if got := c.Transports()[verb]; got != want {
			t.Errorf("%s went by %v, want %v", verb, got, want)
		}
	}
	wantCmds := []uint32{0, abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED, 1, 2, 2}
	if !reflect.DeepEqual(k.cmds, wantCmds) {
		t.Errorf("commands %#x, want %#x", k.cmds, wantCmds)
	}
}
