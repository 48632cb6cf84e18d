package uverbs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// goldenDevice is Device as stored in testdata: the exported fields plus
// the char device number.
type goldenDevice struct {
	Device
	Major, Minor uint32
}

func dumpDevices(devs []Device) string {
	g := make([]goldenDevice, len(devs))
	for i, d := range devs {
		g[i] = goldenDevice{d, d.major, d.minor}
	}
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

func loadGolden(t *testing.T, name string) []Device {
	t.Helper()
	b := readTestdata(t, name)
	var g []goldenDevice
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	devs := make([]Device, len(g))
	for i, x := range g {
		devs[i] = x.Device
		devs[i].major, devs[i].minor = x.Major, x.Minor
	}
	return devs
}

func TestStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{DriverMLX5.String(), "mlx5"}, {DriverRXE.String(), "rxe"}, {DriverSIW.String(), "siw"},
		{DriverIRDMA.String(), "irdma"}, {DriverQIB.String(), "ipathverbs"}, {DriverVMWPVRDMA.String(), "pvrdma"},
		{DriverUnknown.String(), "unknown"}, {DriverID(99).String(), "driver(99)"},
		{NodeCA.String(), "InfiniBand channel adapter"}, {NodeRNIC.String(), "iWARP NIC"},
		{NodeUSNICUDP.String(), "usNIC UDP"}, {NodeUnspecified.String(), "unspecified"},
		{NodeUnknown.String(), "unknown"}, {NodeType(8).String(), "unknown"},
		{TransportIB.String(), "InfiniBand"}, {TransportIWARP.String(), "iWARP"},
		{TransportUnspecified.String(), "unspecified"}, {TransportUnknown.String(), "invalid transport"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	for nt, tr := range map[NodeType]Transport{
		NodeCA: TransportIB, NodeSwitch: TransportIB, NodeRouter: TransportIB, NodeRNIC: TransportIWARP,
		NodeUSNIC: TransportUSNIC, NodeUSNICUDP: TransportUSNICUDP, NodeUnspecified: TransportUnspecified,
		NodeUnknown: TransportUnknown, 200: TransportUnknown,
	} {
		if nt.transport() != tr {
			t.Errorf("%v.transport() = %v, want %v", nt, nt.transport(), tr)
		}
	}
	// The driver ids of 6.1's uapi header (rdma/ib_user_ioctl_verbs.h).
	if DriverMLX5 != 1 || DriverRXE != 14 || DriverSIW != 18 || DriverERDMA != 19 || DriverIRDMA != DriverI40IW {
		t.Errorf("driver id values changed")
	}
}

// rigSysfs is a small sysfs tree matching rigLikeKernel.
func rigSysfs() fstest.MapFS {
	m := fstest.MapFS{"class/infiniband_verbs/abi_version": {Data: []byte("6\n")}}
	for i, d := range []struct{ name, guid, nt, desc, parent string }{
		{"rxe0", "5054:00ff:fe12:3456", "1: CA", "rxe", "eth0"},
		{"siw0", "0cba:afff:fe76:ae48", "4: RNIC", "Software iWARP stack", ""},
		{"rxea", "1084:68ff:fe12:0156", "1: CA", "rxe", "va"},
		{"rxeb", "dc06:c9ff:fe11:b1e2", "1: CA", "rxe", "vb"},
	} {
		u := fmt.Sprintf("class/infiniband_verbs/uverbs%d/", i)
		m[u+"ibdev"] = &fstest.MapFile{Data: []byte(d.name + "\n")}
		m[u+"abi_version"] = &fstest.MapFile{Data: []byte(map[bool]string{true: "1\n", false: "2\n"}[d.parent == ""])}
		m[u+"dev"] = &fstest.MapFile{Data: []byte(fmt.Sprintf("231:%d\n", 192+i))}
		p := "class/infiniband/" + d.name + "/"
		m[p+"node_type"] = &fstest.MapFile{Data: []byte(d.nt + "\n")}
		m[p+"node_guid"] = &fstest.MapFile{Data: []byte(d.guid + "\n")}
		m[p+"sys_image_guid"] = &fstest.MapFile{Data: []byte(d.guid + "\n")}
		m[p+"fw_ver"] = &fstest.MapFile{Data: []byte("\n")}
		m[p+"node_desc"] = &fstest.MapFile{Data: []byte(d.desc + "\n")}
		m[p+"ports/1/state"] = &fstest.MapFile{Data: []byte("4: ACTIVE\n")}
		if d.parent != "" {
			m[p+"parent"] = &fstest.MapFile{Data: []byte(d.parent + "\n")}
			m[p+"ports/1/gid_attrs/ndevs/0"] = &fstest.MapFile{Data: []byte(d.parent + "\n")}
		}
	}
	for n, i := range map[string]string{"eth0": "2", "siwnet": "3", "va": "5", "vb": "4"} {
		m["class/net/"+n+"/ifindex"] = &fstest.MapFile{Data: []byte(i + "\n")}
	}
	return m
}

func fakeDiscovery(k *fakeKernel, m fstest.MapFS) discovery {
	return discovery{sys: sysfsReader{fsys: m}, dial: func() (nlTransport, error) { return k, nil }}
}

func TestDevicesNetlink(t *testing.T) {
	d := fakeDiscovery(rigLikeKernel(), rigSysfs())
	devs, err := d.devices()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, dev := range devs {
		names = append(names, dev.Name)
		if dev.Source != "netlink" || dev.CoreABI != 6 {
			t.Errorf("%s: source %q core ABI %d", dev.Name, dev.Source, dev.CoreABI)
		}
	}
	if strings.Join(names, ",") != "rxe0,siw0,rxea,rxeb" {
		t.Errorf("order %v, want kernel index order", names)
	}
	want := Device{
		Name: "siw0", Index: 1, NodeGUID: 0x0cbaaffffe76ae48, SysImageGUID: 0x0cbaaffffe76ae48,
		NodeType: NodeRNIC, Transport: TransportIWARP, Driver: DriverSIW, NodeDesc: "Software iWARP stack",
		CharDev: "/dev/infiniband/uverbs1", UverbsName: "uverbs1", CoreABI: 6, DriverABI: 1,
		Ports: []Port{{Number: 1, Netdev: "siwnet", NetdevIndex: 3}}, Source: "netlink", major: 231, minor: 193,
	}
	if !reflect.DeepEqual(devs[1], want) {
		t.Errorf("siw0\n%+v\nwant\n%+v", devs[1], want)
	}
	// netlink and sysfs agree on every field both provide.
	sys, err := d.sys.devices()
	if err != nil {
		t.Fatal(err)
	}
	compareSources(t, devs, sys)

	dev, err := d.deviceByName("rxeb")
	if err != nil || dev.Index != 3 || dev.Ports[0].Netdev != "vb" {
		t.Errorf("deviceByName(rxeb) = %+v, %v", dev, err)
	}
	_, err = d.deviceByName("mlx5_0")
	if !errors.Is(err, ErrNoDevice) || err.Error() != `uverbs: no such RDMA device: "mlx5_0"` {
		t.Errorf("deviceByName(mlx5_0) = %v", err)
	}
}

// compareSources checks that devices found through netlink and through
// sysfs agree on everything sysfs knows.
func compareSources(t *testing.T, nl, sys []Device) {
	t.Helper()
	if len(nl) != len(sys) {
		t.Fatalf("netlink found %d devices, sysfs %d", len(nl), len(sys))
	}
	bySys := map[string]Device{}
	for _, d := range sys {
		bySys[d.Name] = d
	}
	for _, n := range nl {
		s, ok := bySys[n.Name]
		if !ok {
			t.Errorf("%s: not found through sysfs", n.Name)
			continue
		}
		if n.Source != "netlink" || s.Source != "sysfs" || s.Index != 0 {
			t.Errorf("%s: sources %q/%q, sysfs index %d", n.Name, n.Source, s.Source, s.Index)
		}
		// Every field sysfs provides, ports aside.
		s2 := s
		s2.Index, s2.Source, s2.Ports = n.Index, n.Source, n.Ports
		if !reflect.DeepEqual(n, s2) {
			t.Errorf("%s: netlink and sysfs differ\nnetlink %+v\nsysfs   %+v", n.Name, n, s)
		}
		if len(n.Ports) != len(s.Ports) {
			t.Errorf("%s: %d ports through netlink, %d through sysfs", n.Name, len(n.Ports), len(s.Ports))
			continue
		}
		for i, sp := range s.Ports {
			np := n.Ports[i]
			if sp.Number != np.Number || (sp.Netdev != "" && sp != np) {
				t.Errorf("%s: port netlink %+v, sysfs %+v", n.Name, np, sp)
			}
		}
	}
}

func TestDevicesFallbacks(t *testing.T) {
	// Netlink unavailable (no NETLINK_RDMA: ib_core not loaded): sysfs.
	d := discovery{sys: sysfsReader{fsys: rigSysfs()}, dial: func() (nlTransport, error) {
		return nil, fmt.Errorf("socket: %w", unix.EPROTONOSUPPORT)
	}}
	devs, err := d.devices()
	if err != nil || len(devs) != 4 || devs[0].Source != "sysfs" || devs[1].Driver != DriverSIW {
		t.Fatalf("sysfs fallback: %v, %v", devs, err)
	}
	// Netlink dump refused: sysfs. Both failing: both errors, errno reachable.
	k := rigLikeKernel()
	k.dumpErr = unix.EPERM
	if devs, err := fakeDiscovery(k, rigSysfs()).devices(); err != nil || len(devs) != 4 || devs[0].Source != "sysfs" {
		t.Errorf("dump refused: %v, %v", devs, err)
	}
	bad := rigSysfs()
	bad["class/infiniband_verbs/uverbs1/dev"] = &fstest.MapFile{Data: []byte("x\n")}
	k = rigLikeKernel()
	k.dumpErr = unix.EPERM
	_, err = fakeDiscovery(k, bad).devices()
	if !errors.Is(err, unix.EPERM) || !strings.HasPrefix(err.Error(), "uverbs: devices: netlink dump: ") ||
		!strings.Contains(err.Error(), "sysfs fallback") {
		t.Errorf("both failing: %v", err)
	}
	if _, err := fakeDiscovery(k, bad).deviceByName("rxe0"); !errors.Is(err, unix.EPERM) || errors.Is(err, ErrNoDevice) ||
		!strings.HasPrefix(err.Error(), "uverbs: devices: ") || !strings.HasSuffix(err.Error(), `(looking up "rxe0")`) {
		t.Errorf("deviceByName, both failing: %v", err)
	}
	// No RDMA at all: no devices, no error.
	none := discovery{sys: sysfsReader{fsys: fstest.MapFS{}}, dial: nil}
	if devs, err := none.devices(); err != nil || len(devs) != 0 {
		t.Errorf("no RDMA: %v, %v", devs, err)
	}
	if _, err := none.deviceByName("rxe0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("no RDMA, deviceByName: %v", err)
	}
}

func TestDevicesNetlinkPartial(t *testing.T) {
	k := rigLikeKernel()
	k.devs[0].chardev = nil               // rxe0: kernel has no uverbs answer: sysfs has uverbs0
	k.devs[1].chardevE = unix.EINVAL      // siw0 vanished between dump and query...
	k.devs[2].chardev.HasDriverID = false // rxea: no UVERBS_DRIVER_ID: inferred from sysfs
	k.devs[3].portErr = unix.EINVAL       // rxeb: port query fails: netdev from sysfs
	m := rigSysfs()
	delete(m, "class/infiniband_verbs/uverbs1/ibdev") // ...and sysfs no longer has it
	devs, err := fakeDiscovery(k, m).devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 3 || devs[0].Name != "rxe0" || devs[1].Name != "rxea" || devs[2].Name != "rxeb" {
		t.Fatalf("devices %s", dumpDevices(devs))
	}
	if d := devs[0]; d.UverbsName != "uverbs0" || d.DriverABI != 2 || d.Driver != DriverRXE || d.minor != 192 {
		t.Errorf("rxe0 from sysfs uverbs: %+v", d)
	}
	if d := devs[1]; d.Driver != DriverRXE {
		t.Errorf("rxea inferred driver %v", d.Driver)
	}
	if d := devs[2]; d.Ports[0] != (Port{Number: 1, Netdev: "vb", NetdevIndex: 4}) {
		t.Errorf("rxeb port from sysfs: %+v", d.Ports)
	}
	// A device without any uverbs char device is left out.
	k = rigLikeKernel()
	k.devs[2].chardev = nil
	m = rigSysfs()
	delete(m, "class/infiniband_verbs/uverbs2/ibdev")
	devs, err = fakeDiscovery(k, m).devices()
	if err != nil || len(devs) != 3 {
		t.Errorf("device without uverbs: %v, %v", devs, err)
	}
	// Other errors fail discovery (and fall back to sysfs).
	k = rigLikeKernel()
	k.devs[0].portErr = unix.EPERM
	if _, err := fakeDiscovery(k, m).netlinkDevices(); !errors.Is(err, unix.EPERM) {
		t.Errorf("port EPERM: %v", err)
	}
	k = rigLikeKernel()
	k.devs[0].chardevE = unix.EACCES
	if _, err := fakeDiscovery(k, m).netlinkDevices(); !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "rxe0") {
		t.Errorf("chardev EACCES: %v", err)
	}
	// Absurd answers are refused.
	k = rigLikeKernel()
	k.devs[0].nd.Ports = 1 << 20
	if _, err := fakeDiscovery(k, m).netlinkDevices(); err == nil {
		t.Errorf("a million ports: no error")
	}
	k = rigLikeKernel()
	k.devs[0].nd.Name = ".."
	if _, err := fakeDiscovery(k, m).netlinkDevices(); err == nil {
		t.Errorf("device named ..: no error")
	}
}

// TestDevicesReplay replays the netlink exchanges recorded in the rig
// (Debian's 6.1.0-56 kernel) against the sysfs tree captured in the same
// run, and expects what the rig test saw.
func TestDevicesReplay(t *testing.T) {
	recs, err := parseRecording(readTestdata(t, "netlink/rig-6.1.nlrec"))
	if err != nil {
		t.Fatal(err)
	}
	rt := &replayTransport{t: t, recs: recs}
	d := discovery{sys: sysfsReader{fsys: fixture(t, "rig-6.1")}, dial: func() (nlTransport, error) { return rt, nil }}
	devs, err := d.netlinkDevices()
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.recs) != 0 {
		t.Errorf("%d recorded records left over", len(rt.recs))
	}
	checkIbvDevices(t, devs, string(readTestdata(t, "rig-6.1.ibv_devices.txt")))
	want := loadGolden(t, "rig-6.1.netlink.json")
	if !reflect.DeepEqual(devs, want) {
		t.Errorf("devices\n%s\nwant\n%s", dumpDevices(devs), dumpDevices(want))
	}
	sys, err := d.sys.devices()
	if err != nil {
		t.Fatal(err)
	}
	compareSources(t, devs, sys)
}

// checkIbvDevices compares devs with the output of rdma-core's
// ibv_devices: the same devices, in the same order, with the same node GUIDs
// (ibv_devices prints be64toh(ibv_get_device_guid()) as %016llx).
func checkIbvDevices(t *testing.T, devs []Device, out string) {
	t.Helper()
	byName := map[string]Device{}
	var ours []string
	for _, dev := range devs {
		byName[dev.Name] = dev
		ours = append(ours, dev.Name)
	}
	var order []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] == "device" || strings.HasPrefix(f[0], "---") {
			continue
		}
		order = append(order, f[0])
		dev, ok := byName[f[0]]
		if !ok {
			t.Errorf("ibv_devices lists %s, we do not", f[0])
			continue
		}
		if got := fmt.Sprintf("%016x", dev.NodeGUID); got != f[1] {
			t.Errorf("%s: node GUID %s, ibv_devices says %s", f[0], got, f[1])
		}
	}
	if len(order) == 0 || strings.Join(order, ",") != strings.Join(ours, ",") {
		t.Errorf("order %v, ibv_devices %v", ours, order)
	}
}

// ---- the real kernel ----------------------------------------------------------------

// rigExpect is what the rig promises (internal/rigtest's package doc).
var rigExpect = []struct {
	name      string
	driver    DriverID
	nodeType  NodeType
	transport Transport
	driverABI int
	netdev    string
}{
	{"rxe0", DriverRXE, NodeCA, TransportIB, 2, "eth0"},
	{"siw0", DriverSIW, NodeRNIC, TransportIWARP, 1, "siwnet"},
	{"rxea", DriverRXE, NodeCA, TransportIB, 2, "va"},
	{"rxeb", DriverRXE, NodeCA, TransportIB, 2, "vb"},
}

// TestDevicesRig checks discovery against the real kernel in the rig and
// against rdma-core's own tools. With GOVERBS_CAPTURE=DIR it also writes the
// netlink exchanges and the sysfs files it read to DIR (fixtures for
// TestDevicesReplay and TestSysfsRigFixture).
func TestDevicesRig(t *testing.T) {
	rigtest.Require(t)
	t.Logf("kernel %s", rigtest.Kernel())

	capture := os.Getenv("GOVERBS_CAPTURE")
	d := defaultDiscovery
	var rec *recordingTransport
	var cfs *captureFS
	if capture != "" {
		cfs = &captureFS{fsys: os.DirFS("/sys"), out: filepath.Join(capture, "sysfs")}
		d.sys = sysfsReader{fsys: cfs}
		d.dial = func() (nlTransport, error) {
			t, err := dialNetlink()
			if err != nil {
				return nil, err
			}
			rec = &recordingTransport{t: t}
			return rec, nil
		}
	}

	devs, err := d.netlinkDevices()
	if err != nil {
		t.Fatalf("netlink discovery: %v", err)
	}
	pub, err := Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if !reflect.DeepEqual(pub, devs) {
		t.Errorf("Devices() differs from netlink discovery\n%s\n%s", dumpDevices(pub), dumpDevices(devs))
	}
	t.Logf("devices:\n%s", dumpDevices(devs))
	byName := map[string]Device{}
	for _, dev := range devs {
		byName[dev.Name] = dev
	}
	for _, w := range rigExpect {
		dev, ok := byName[w.name]
		if !ok {
			t.Errorf("%s: not found", w.name)
			continue
		}
		if dev.Driver != w.driver || dev.NodeType != w.nodeType || dev.Transport != w.transport ||
			dev.DriverABI != w.driverABI || dev.CoreABI != 6 || dev.Source != "netlink" {
			t.Errorf("%s: driver %v node type %v transport %v driver ABI %d core ABI %d source %s",
				w.name, dev.Driver, dev.NodeType, dev.Transport, dev.DriverABI, dev.CoreABI, dev.Source)
		}
		if cd := rigtest.Device(t, w.name); dev.CharDev != cd {
			t.Errorf("%s: char dev %s, rigtest says %s", w.name, dev.CharDev, cd)
		}
		var st unix.Stat_t
		if err := unix.Stat(dev.CharDev, &st); err != nil {
			t.Errorf("%s: %v", w.name, err)
		} else if unix.Major(st.Rdev) != dev.major || unix.Minor(st.Rdev) != dev.minor {
			t.Errorf("%s: %s is %d:%d, netlink said %d:%d", w.name, dev.CharDev,
				unix.Major(st.Rdev), unix.Minor(st.Rdev), dev.major, dev.minor)
		}
		if len(dev.Ports) != 1 || dev.Ports[0].Number != 1 || dev.Ports[0].Netdev != w.netdev {
			t.Errorf("%s: ports %+v, want port 1 on %s", w.name, dev.Ports, w.netdev)
			continue
		}
		ifi, err := net.InterfaceByName(w.netdev)
		if err != nil || ifi.Index != dev.Ports[0].NetdevIndex {
			t.Errorf("%s: netdev index %d, interface %v (%v)", w.name, dev.Ports[0].NetdevIndex, ifi, err)
		}
	}

	// rdma-core's view: ibv_devices lists name and GUID in its own order.
	out := rigtest.Command(t, "ibv_devices")
	checkIbvDevices(t, devs, out)
	// ibv_devinfo: transport string and number, GUIDs in sysfs format.
	for _, dev := range devs {
		info := rigtest.Command(t, "ibv_devinfo", "-d", dev.Name)
		for _, want := range []string{
			fmt.Sprintf("transport:\t\t\t%s (%d)", dev.Transport, dev.Transport),
			"node_guid:\t\t\t" + formatGUID(dev.NodeGUID),
			"sys_image_guid:\t\t\t" + formatGUID(dev.SysImageGUID),
		} {
			if !strings.Contains(info, want) {
				t.Errorf("%s: ibv_devinfo has no %q:\n%s", dev.Name, want, info)
			}
		}
	}

	// The sysfs path agrees with netlink on every field both provide.
	sys, err := d.sys.devices()
	if err != nil {
		t.Fatalf("sysfs discovery: %v", err)
	}
	t.Logf("sysfs:\n%s", dumpDevices(sys))
	compareSources(t, devs, sys)

	// DeviceByName.
	if dev, err := DeviceByName("rxea"); err != nil || dev.Name != "rxea" || dev.Ports[0].Netdev != "va" {
		t.Errorf("DeviceByName(rxea) = %+v, %v", dev, err)
	}
	if _, err := DeviceByName("nosuch0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("DeviceByName(nosuch0) = %v", err)
	}

	if capture != "" {
		if rec == nil {
			t.Fatal("capture: nothing recorded")
		}
		if len(cfs.errs) > 0 {
			t.Fatalf("capture: %v", cfs.errs)
		}
		if err := os.MkdirAll(filepath.Join(capture, "netlink"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(capture, "netlink", "rig.nlrec"), rec.buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(capture, "rig.netlink.json"), []byte(dumpDevices(devs)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(capture, "rig.sysfs.json"), []byte(dumpDevices(sys)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(capture, "ibv_devices.txt"), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("captured to %s", capture)
	}
}

// TestNetlinkErrorsRig checks what the real kernel answers to requests that
// must fail, and that the errno reaches the caller.
func TestNetlinkErrorsRig(t *testing.T) {
	rigtest.Require(t)
	tr, err := dialNetlink()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close()
	c := newNLClient(tr)
	// No device has index 1000: ib_device_get_by_index fails → EINVAL.
	_, err = c.getChardev(1000)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("GET_CHARDEV of index 1000: %v, want EINVAL", err)
	}
	t.Logf("GET_CHARDEV of index 1000: %v", err)
	devs, err := c.getDevices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("dump: %v, %v", devs, err)
	}
	// Port 2 of a one-port device: rdma_is_port_valid fails → EINVAL.
	_, err = c.getPort(devs[0].Index, devs[0].Ports+1)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("PORT_GET of port %d: %v, want EINVAL", devs[0].Ports+1, err)
	}
	t.Logf("PORT_GET of a missing port: %v", err)
	// A char dev type no client has → EOPNOTSUPP (after request_module).
	_, err = c.exchange(rdmaNldevGetChardevType, false, func(r *nlRequest) {
		r.u32(rdmaNldevAttrDevIndex, devs[0].Index)
		r.str(rdmaNldevAttrChardevType, "nosuchclient")
	})
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("GET_CHARDEV nosuchclient: %v, want EOPNOTSUPP", err)
	}
	// GET_CHARDEV without CHARDEV_TYPE → EINVAL.
	_, err = c.exchange(rdmaNldevGetChardevType, false, func(r *nlRequest) {
		r.u32(rdmaNldevAttrDevIndex, devs[0].Index)
	})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("GET_CHARDEV without type: %v, want EINVAL", err)
	}
	// PORT_GET's reply has the type of CMD_GET (5121), not PORT_GET.
	msgs, err := c.exchange(rdmaNldevPortGetType, false, func(r *nlRequest) {
		r.u32(rdmaNldevAttrDevIndex, devs[0].Index)
		r.u32(rdmaNldevAttrPortIndex, 1)
	})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("PORT_GET: %v, %v", msgs, err)
	}
	if msgs[0].Header.Type != rdmaNldevGetType {
		t.Errorf("PORT_GET reply type %d", msgs[0].Header.Type)
	}
	t.Logf("PORT_GET reply type %d (%s)", msgs[0].Header.Type, strconv.Itoa(int(msgs[0].Header.Type)))
}
