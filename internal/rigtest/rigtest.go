// Package rigtest is what a test uses to reach a real RDMA device.
//
// Tests that need a kernel with ib_uverbs (rxe, siw) import this package. The
// kernel rig in test/rig finds them by that import, builds them as static test
// binaries and runs them inside QEMU guests booted on Debian's kernels, with
// GOVERBS_RIG=1 and GOVERBS_RIG_KERNEL=<uname -r> set. The guest has these
// devices:
//
//	rxe0  RoCEv2 on eth0, 10.0.2.15/24 (GID index 1 is ::ffff:10.0.2.15)
//	rxea  RoCEv2 on veth va, 10.99.0.1/24, wired to rxeb
//	rxeb  RoCEv2 on veth vb, 10.99.0.2/24, wired to rxea
//	siw0  iWARP on a dummy netdev, 10.0.3.15/24
//
// The rule every helper follows: outside the rig a missing device or tool
// skips the test (so `go test ./...` on a laptop stays green), inside the rig
// it fails the test. A rig test never passes by skipping.
//
// It is imported by tests only and imports nothing of goverbs.
package rigtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sysfs is the root the device lookups read; a variable so the unit test can
// point it at a fake tree.
var sysfs = "/sys"

// InRig reports whether the test runs inside the kernel rig (GOVERBS_RIG=1).
func InRig() bool { return os.Getenv("GOVERBS_RIG") == "1" }

// Kernel returns the guest kernel release the rig booted (uname -r), or ""
// outside the rig.
func Kernel() string { return os.Getenv("GOVERBS_RIG_KERNEL") }

// Require skips the test outside the rig and does nothing inside it.
func Require(t testing.TB) {
	t.Helper()
	if !InRig() {
		t.Skip("rigtest: needs the kernel rig (run `make test` to use the QEMU rig)")
	}
}

// missing skips outside the rig and fails inside it.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InRig() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (run `make test` to use the QEMU rig)", args...)
}

// Device returns the uverbs character device ("/dev/infiniband/uverbsN") of
// the RDMA device called name (rxe0, rxea, rxeb, siw0).
func Device(t testing.TB, name string) string {
	t.Helper()
	if uv := uverbsOf(name); uv != "" {
		return "/dev/infiniband/" + uv
	}
	missing(t, "rigtest: no RDMA device %s", name)
	return ""
}

// uverbsOf maps an RDMA device name to its uverbs node name ("uverbs0"), or
// "" when there is none.
func uverbsOf(name string) string {
	if name == "" || strings.ContainsRune(name, '/') {
		return ""
	}
	// The device's own view: .../infiniband/<name>/device/infiniband_verbs/uverbsN.
	// rxe and siw have no parent device on some kernels, so this may not exist.
	if ents, err := os.ReadDir(filepath.Join(sysfs, "class/infiniband", name, "device/infiniband_verbs")); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "uverbs") {
				return e.Name()
			}
		}
	}
	// Every uverbs node names its device in ibdev.
	nodes, _ := filepath.Glob(filepath.Join(sysfs, "class/infiniband_verbs/uverbs*"))
	for _, n := range nodes {
		b, err := os.ReadFile(filepath.Join(n, "ibdev"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return filepath.Base(n)
		}
	}
	return ""
}

// Command runs an rdma-core tool (ibv_devinfo, ib_send_lat, ...) found in PATH
// and returns its combined output. A tool that is missing skips outside the
// rig and fails inside it; a tool that exits non-zero fails the test.
func Command(t testing.TB, name string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, "rigtest: no %s in PATH", name)
		return ""
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("rigtest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// rdmaCoreDirs are where Debian installs rdma-core's tools. The rig puts
// goverbs' own commands first in PATH (/rig/bin), and some share rdma-core's
// names (rping, rstream): a PATH lookup would find goverbs'.
var rdmaCoreDirs = []string{"/usr/bin", "/usr/sbin"}

// RDMACoreTool returns the path of rdma-core's tool called name (rstream,
// rping, ib_send_lat, ...), never a goverbs command of the same name: it looks
// only where Debian installs rdma-core. A missing tool fails the test in the
// rig and skips it outside.
func RDMACoreTool(t testing.TB, name string) string {
	t.Helper()
	for _, dir := range rdmaCoreDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	missing(t, "rigtest: rdma-core's %s is not in %s", name, strings.Join(rdmaCoreDirs, " or "))
	return ""
}

// GIDTables returns every non-zero GID of every RDMA device's ports as
// "dev/port/gids/index value" lines, sorted: the tables a comparison test relies on.
func GIDTables() string {
	paths, _ := filepath.Glob(filepath.Join(sysfs, "class/infiniband/*/ports/*/gids/*"))
	var lines []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		g := strings.TrimSpace(string(b))
		if err != nil || g == "" || strings.Trim(g, "0:") == "" {
			continue
		}
		rel, _ := filepath.Rel(filepath.Join(sysfs, "class/infiniband"), p)
		lines = append(lines, strings.Replace(rel, "/ports/", "/", 1)+" "+g)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// GIDsUnchanged snapshots the GID tables and returns a check to defer: it
// fails the test if any GID appeared, vanished or changed meanwhile. A test
// that compares two programs' views of the devices (ibvinfo against
// ibv_devinfo) is void if the tables moved between the two runs; the rig's
// guest settles them before any test starts, and this says so when it did not.
func GIDsUnchanged(t testing.TB) func() {
	t.Helper()
	before := GIDTables()
	return func() {
		t.Helper()
		if after := GIDTables(); after != before {
			t.Errorf("rigtest: the GID tables changed during the test, so its comparison is void "+
				"(the rig settles them before tests start: something reconfigured a netdev)\n%s",
				gidDiff(before, after))
		}
	}
}

// gidDiff lists the GID lines only one of two snapshots has.
func gidDiff(before, after string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			if l != "" {
				m[l] = true
			}
		}
		return m
	}
	b, a := in(before), in(after)
	var out []string
	for l := range b {
		if !a[l] {
			out = append(out, "  - "+l)
		}
	}
	for l := range a {
		if !b[l] {
			out = append(out, "  + "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
