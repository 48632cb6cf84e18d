package uverbs

import (
	"embed"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"testing"
	"testing/fstest"
)

// captureFS wraps a sysfs fs.FS and copies everything discovery reads into
// a directory, producing a fixture tree for testdata/discovery/sysfs/.
type captureFS struct {
	fsys fs.FS
	out  string
	errs []error
}

func (c *captureFS) note(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

func (c *captureFS) Open(name string) (fs.File, error) { return c.fsys.Open(name) }

func (c *captureFS) ReadFile(name string) ([]byte, error) {
	b, err := fs.ReadFile(c.fsys, name)
	if err == nil {
		p := filepath.Join(c.out, filepath.FromSlash(name))
		c.note(os.MkdirAll(filepath.Dir(p), 0o755))
		c.note(os.WriteFile(p, b, 0o644))
	}
	return b, err
}

func (c *captureFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := fs.ReadDir(c.fsys, name)
	if err == nil {
		c.note(os.MkdirAll(filepath.Join(c.out, filepath.FromSlash(name)), 0o755))
		// Keep the directory's subdirectories (ports/1) even when nothing
		// in them is read.
		for _, e := range ents {
			sub := path.Join(name, e.Name())
			if fi, err := fs.Stat(c.fsys, sub); err == nil && fi.IsDir() {
				c.note(os.MkdirAll(filepath.Join(c.out, filepath.FromSlash(sub)), 0o755))
			}
		}
	}
	return ents, err
}

func (c *captureFS) ReadLink(name string) (string, error) {
	target, err := fs.ReadLink(c.fsys, name)
	if err == nil {
		p := filepath.Join(c.out, filepath.FromSlash(name))
		c.note(os.MkdirAll(filepath.Dir(p), 0o755))
		c.note(os.Symlink(target, p))
	}
	return target, err
}

func (c *captureFS) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(c.fsys, name) }

func (c *captureFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := fs.Stat(c.fsys, name)
	if err == nil {
		p := filepath.Join(c.out, filepath.FromSlash(name))
		if fi.IsDir() {
			c.note(os.MkdirAll(p, 0o755))
		} else if b, err := fs.ReadFile(c.fsys, name); err == nil {
			c.note(os.MkdirAll(filepath.Dir(p), 0o755))
			c.note(os.WriteFile(p, b, 0o644))
		}
	}
	return fi, err
}

// testdata is embedded so that the fixture tests run wherever the test
// binary does (the rig runs it far from the source tree).
//
//go:embed all:testdata/discovery
var testdata embed.FS

// fixture returns a sysfs tree from testdata/discovery/sysfs as a MapFS
// (empty directories in git hold a .keep file, which discovery ignores).
func fixture(t *testing.T, name string) fstest.MapFS {
	t.Helper()
	sub, err := fs.Sub(testdata, "testdata/discovery/sysfs/"+name)
	if err != nil {
		t.Fatal(err)
	}
	m := fstest.MapFS{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if d.IsDir() {
			m[p] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
			return nil
		}
		b, err := fs.ReadFile(sub, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil || len(m) == 0 {
		t.Fatalf("fixture %s: %d files, %v", name, len(m), err)
	}
	return m
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := testdata.ReadFile("testdata/discovery/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseGUID(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0002:c903:0049:8f20", 0x0002c90300498f20, true},
		{"5054:00ff:fe12:3456", 0x505400fffe123456, true},
		{"0:0:0:1", 1, true},
		{"FFFF:ffff:FFFF:ffff", ^uint64(0), true},
		{"0002:c903:0049", 0, false},
		{"0002:c903:0049:8f20:0000", 0, false},
		{"00002:c903:0049:8f20", 0, false},
		{"0002:c903::8f20", 0, false},
		{"0002:c903:0049:8f2g", 0, false},
		{"+002:c903:0049:8f20", 0, false},
		{"", 0, false},
	} {
		got, err := parseGUID(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseGUID(%q) = %#x, %v", c.in, got, err)
		}
		if c.ok {
			if s := formatGUID(got); c.in[0] != 'F' && c.in != "0:0:0:1" && s != c.in {
				t.Errorf("formatGUID(%#x) = %q, want %q", got, s, c.in)
			}
		}
	}
}

func TestParseSysfsValues(t *testing.T) {
	if nt, err := parseNodeType("1: CA"); err != nil || nt != NodeCA {
		t.Errorf("node type CA: %v, %v", nt, err)
	}
	if nt, err := parseNodeType("4: RNIC"); err != nil || nt != NodeRNIC {
		t.Errorf("node type RNIC: %v, %v", nt, err)
	}
	for _, bad := range []string{"CA", "x: CA", "-1: CA", "256: big", ""} {
		if _, err := parseNodeType(bad); err == nil {
			t.Errorf("parseNodeType(%q): no error", bad)
		}
	}
	if v, err := parseSysfsInt("6"); err != nil || v != 6 {
		t.Errorf("abi 6: %d, %v", v, err)
	}
	for _, bad := range []string{"", "-1", "x", "99999999999"} {
		if _, err := parseSysfsInt(bad); err == nil {
			t.Errorf("parseSysfsInt(%q): no error", bad)
		}
	}
	if ma, mi, err := parseDevNumber("231:192"); err != nil || ma != 231 || mi != 192 {
		t.Errorf("dev: %d:%d, %v", ma, mi, err)
	}
	for _, bad := range []string{"231", "231:", ":1", "a:b", "1:2:3"} {
		if _, _, err := parseDevNumber(bad); err == nil {
			t.Errorf("parseDevNumber(%q): no error", bad)
		}
	}
	for _, c := range []struct {
		name, prefix string
		n            int
		ok           bool
	}{
		{"uverbs0", "uverbs", 0, true}, {"uverbs12", "uverbs", 12, true}, {"uverbs", "uverbs", 0, false},
		{"uverbs01", "uverbs", 0, false}, {"uverbs-1", "uverbs", 0, false}, {"uverbs+1", "uverbs", 0, false}, {"abi_version", "uverbs", 0, false},
		{"1", "", 1, true}, {"power", "", 0, false},
	} {
		n, ok := parseIndexedName(c.name, c.prefix)
		if n != c.n || ok != c.ok {
			t.Errorf("parseIndexedName(%q, %q) = %d, %v", c.name, c.prefix, n, ok)
		}
	}
}

// TestSysfsRigFixture reads the sysfs tree captured in the rig (Debian's
// 6.1.0-56 kernel: rxe0, siw0, rxea, rxeb) and expects what the rig test
// saw there.
func TestSysfsCaptured(t *testing.T) {
	devs, err := sysfsReader{fsys: fixture(t, "rig-6.1")}.devices()
	if err != nil {
		t.Fatal(err)
	}
	want := loadGolden(t, "rig-6.1.sysfs.json")
	if !reflect.DeepEqual(devs, want) {
		t.Errorf("devices\n%s\nwant\n%s", dumpDevices(devs), dumpDevices(want))
	}
	byName := map[string]Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	if d := byName["rxe0"]; d.Driver != DriverRXE || d.NodeType != NodeCA || d.Transport != TransportIB ||
		d.DriverABI != 2 || d.CoreABI != 6 || d.Ports[0].Netdev != "eth0" || d.Source != "sysfs" || d.Index != 0 {
		t.Errorf("rxe0: %+v", d)
	}
	if d := byName["siw0"]; d.Driver != DriverSIW || d.NodeType != NodeRNIC || d.Transport != TransportIWARP ||
		d.DriverABI != 1 || d.Ports[0].Netdev != "" {
		t.Errorf("siw0: %+v", d)
	}
}

// TestSysfsMLX5Fixture reads a hand-made tree shaped like a dual-port
// ConnectX (port 1 InfiniBand, port 2 RoCE), with the parent device's driver
// link that hardware devices have. Not captured from hardware.
func TestSysfsMLX5Fixture(t *testing.T) {
	m := fixture(t, "mlx5-handmade")
	// The parent device's driver link (git and embed hold no symlinks).
	m["class/infiniband/mlx5_0/device/driver"] = &fstest.MapFile{
		Data: []byte("../../../../bus/pci/drivers/mlx5_core"), Mode: fs.ModeSymlink | 0o777}
	devs, err := sysfsReader{fsys: m}.devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{{
		Name: "mlx5_0", NodeGUID: 0x0002c90300498f20, SysImageGUID: 0x0002c90300498f23,
		NodeType: NodeCA, Transport: TransportIB, Driver: DriverMLX5, FWVersion: "16.35.2000",
		NodeDesc: "host1 mlx5_0", CharDev: "/dev/infiniband/uverbs1", UverbsName: "uverbs1",
		CoreABI: 6, DriverABI: 1, Source: "sysfs", major: 231, minor: 193,
		Ports: []Port{{Number: 1}, {Number: 2, Netdev: "enp1s0f1", NetdevIndex: 7}},
	}, {
		Name: "mystery0", NodeGUID: 1, NodeType: NodeSwitch, Transport: TransportIB, Driver: DriverUnknown,
		CharDev: "/dev/infiniband/uverbs3", UverbsName: "uverbs3", CoreABI: 6, DriverABI: 9, Source: "sysfs",
		major: 231, minor: 195, Ports: []Port{{Number: 1}, {Number: 2}, {Number: 10}},
	}}
	if !reflect.DeepEqual(devs, want) {
		t.Errorf("devices\n%s\nwant\n%s", dumpDevices(devs), dumpDevices(want))
	}
}

func TestSysfsNoRDMA(t *testing.T) {
	devs, err := sysfsReader{fsys: fstest.MapFS{"class/net/lo/ifindex": {Data: []byte("1\n")}}}.devices()
	if err != nil || len(devs) != 0 {
		t.Errorf("no infiniband_verbs class: %v, %v", devs, err)
	}
}

func TestSysfsBadValues(t *testing.T) {
	base := func() fstest.MapFS {
		return fstest.MapFS{
			"class/infiniband_verbs/abi_version":         {Data: []byte("6\n")},
			"class/infiniband_verbs/uverbs0/ibdev":       {Data: []byte("rxe0\n")},
			"class/infiniband_verbs/uverbs0/abi_version": {Data: []byte("2\n")},
			"class/infiniband_verbs/uverbs0/dev":         {Data: []byte("231:192\n")},
			"class/infiniband/rxe0/node_type":            {Data: []byte("1: CA\n")},
			"class/infiniband/rxe0/node_guid":            {Data: []byte("5054:00ff:fe12:3456\n")},
			"class/infiniband/rxe0/ports/1/state":        {Data: []byte("4: ACTIVE\n")},
		}
	}
	if devs, err := (sysfsReader{fsys: base()}).devices(); err != nil || len(devs) != 1 || devs[0].Ports[0].Number != 1 {
		t.Fatalf("minimal tree: %+v, %v", devs, err)
	}
	for file, val := range map[string]string{
		"class/infiniband_verbs/abi_version":         "six",
		"class/infiniband_verbs/uverbs0/abi_version": "",
		"class/infiniband_verbs/uverbs0/dev":         "231",
		"class/infiniband_verbs/uverbs0/ibdev":       "../etc",
		"class/infiniband/rxe0/node_type":            "CA",
		"class/infiniband/rxe0/node_guid":            "5054:00ff:fe12",
	} {
		m := base()
		m[file] = &fstest.MapFile{Data: []byte(val + "\n")}
		if _, err := (sysfsReader{fsys: m}).devices(); err == nil {
			t.Errorf("%s = %q: no error", file, val)
		}
	}
	// A uverbs node whose IB device vanished is skipped, not an error.
	m := base()
	delete(m, "class/infiniband/rxe0/node_type")
	if devs, err := (sysfsReader{fsys: m}).devices(); err != nil || len(devs) != 0 {
		t.Errorf("vanished device: %+v, %v", devs, err)
	}
	if _, err := (sysfsReader{fsys: m}).read("../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("read ../x: %v", err)
	}
}
