package rigtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeSysfs builds a sysfs tree with two uverbs nodes: uverbs0 for rxe0
// (found only through class/infiniband_verbs) and uverbs1 for siw0 (found
// through the device's own infiniband_verbs directory).
func fakeSysfs(t *testing.T) {
	root := t.TempDir()
	mk := func(p, content string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("class/infiniband_verbs/uverbs0/ibdev", "rxe0\n")
	mk("class/infiniband_verbs/uverbs1/ibdev", "siw0\n")
	mk("class/infiniband/siw0/device/infiniband_verbs/uverbs1/ibdev", "siw0\n")
	old := sysfs
	sysfs = root
	t.Cleanup(func() { sysfs = old })
}

func TestUverbsOf(t *testing.T) {
	fakeSysfs(t)
	for name, want := range map[string]string{
		"rxe0": "uverbs0", "siw0": "uverbs1", "rxea": "", "": "", "../siw0": "",
	} {
		if got := uverbsOf(name); got != want {
			t.Errorf("uverbsOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// recorder stands in for a testing.TB to see whether a helper skipped or
// failed, and what it reported. Like the real ones, Skip and Fatal end the
// calling goroutine.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
	errs, logs      []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine, as the testing package
// runs a test, so that Goexit ends only f.
func run(t *testing.T, f func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestMissingDeviceSkipsOutsideRigFailsInside(t *testing.T) {
	fakeSysfs(t)
	for _, rig := range []string{"", "1"} {
		t.Setenv("GOVERBS_RIG", rig)
		var got string
		r := run(t, func(tb testing.TB) { got = Device(tb, "rxeb") })
		if rig == "1" && (!r.failed || r.skipped) {
			t.Errorf("in rig: missing device did not fail the test (skipped=%v)", r.skipped)
		}
		if rig == "" && (!r.skipped || r.failed) {
			t.Errorf("outside rig: missing device did not skip the test (failed=%v)", r.failed)
		}
		if got != "" {
			t.Errorf("Device returned %q for a missing device", got)
		}
		r = run(t, func(tb testing.TB) { got = Device(tb, "siw0") })
		if r.failed || r.skipped || got != "/dev/infiniband/uverbs1" {
			t.Errorf("Device(siw0) = %q (failed=%v skipped=%v), want /dev/infiniband/uverbs1", got, r.failed, r.skipped)
		}
	}
}

func TestCommand(t *testing.T) {
	for _, rig := range []string{"", "1"} {
		t.Setenv("GOVERBS_RIG", rig)
		r := run(t, func(tb testing.TB) { Command(tb, "goverbs-no-such-tool") })
		if (rig == "1") != r.failed || (rig == "") != r.skipped {
			t.Errorf("GOVERBS_RIG=%q: missing tool gave failed=%v skipped=%v", rig, r.failed, r.skipped)
		}
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	var out string
	r := run(t, func(tb testing.TB) { out = Command(tb, "sh", "-c", "echo hi") })
	if r.failed || out != "hi\n" {
		t.Errorf("Command(sh -c 'echo hi') = %q, failed=%v", out, r.failed)
	}
	r = run(t, func(tb testing.TB) { Command(tb, "sh", "-c", "exit 3") })
	if !r.failed {
		t.Error("a tool that exits non-zero did not fail the test")
	}
}

func TestInRigKernelRequire(t *testing.T) {
	t.Setenv("GOVERBS_RIG", "")
	t.Setenv("GOVERBS_RIG_KERNEL", "6.1.0-56-amd64")
	if InRig() || Kernel() != "6.1.0-56-amd64" {
		t.Errorf("InRig()=%v Kernel()=%q", InRig(), Kernel())
	}
	if r := run(t, Require); !r.skipped {
		t.Error("Require did not skip outside the rig")
	}
	t.Setenv("GOVERBS_RIG", "1")
	if r := run(t, Require); r.skipped || r.failed || !InRig() {
		t.Error("Require stopped the test inside the rig")
	}
}

// TestGIDsUnchanged: the check passes while the tables stay, and names the
// GID that appeared when one does (slirp's router advertisement once added
// a fec0:: GID between two runs of a comparison test).
func TestGIDsUnchanged(t *testing.T) {
	fakeSysfs(t)
	gid := func(dev, idx, v string) {
		p := filepath.Join(sysfs, "class/infiniband", dev, "ports/1/gids", idx)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	zero := "0000:0000:0000:0000:0000:0000:0000:0000"
	gid("rxe0", "0", "fe80:0000:0000:0000:5054:00ff:fe12:3456")
	gid("rxe0", "1", "0000:0000:0000:0000:0000:ffff:0a00:020f")
	gid("rxe0", "2", zero)
	gid("siw0", "0", "5254:0012:3456:0000:0000:0000:0000:0000")
	if got, want := GIDTables(), "rxe0/1/gids/0 fe80:0000:0000:0000:5054:00ff:fe12:3456\n"+
		"rxe0/1/gids/1 0000:0000:0000:0000:0000:ffff:0a00:020f\nsiw0/1/gids/0 5254:0012:3456:0000:0000:0000:0000:0000"; got != want {
		t.Errorf("GIDTables:\n%s\nwant\n%s", got, want)
	}
	var quiet fakeTB
	GIDsUnchanged(&quiet)()
	if quiet.failed {
		t.Errorf("unchanged tables reported as changed: %s", quiet.msg)
	}
	var moved fakeTB
	check := GIDsUnchanged(&moved)
	gid("rxe0", "2", "fec0:0000:0000:0000:5054:00ff:fe12:3456")
	check()
	if !moved.failed || !strings.Contains(moved.msg, "+ rxe0/1/gids/2 fec0:0000:0000:0000:5054:00ff:fe12:3456") {
		t.Errorf("a new fec0:: GID: failed=%v, message %q", moved.failed, moved.msg)
	}
}

// fakeTB records what a check reports instead of failing the real test.
type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

func TestHexAddr(t *testing.T) {
	for in, want := range map[string]string{"0F03000A:1F90": "10.0.3.15:8080", "0100007F:0016": "127.0.0.1:22", "bogus": "bogus"} {
		if got := hexAddr(in); got != want {
			t.Errorf("hexAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRDMACoreToolIgnoresPATH: a goverbs command of the same name first in
// PATH (the rig's /rig/bin) is never returned; a missing tool fails in the
// rig and skips outside.
func TestRDMACoreToolIgnoresPATH(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	for _, dir := range []string{ours, theirs} {
		if err := os.WriteFile(filepath.Join(dir, "rstream"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(theirs, "notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", ours)
	old := rdmaCoreDirs
	rdmaCoreDirs = []string{filepath.Join(theirs, "none"), theirs}
	t.Cleanup(func() { rdmaCoreDirs = old })
	var got string
	r := run(t, func(tb testing.TB) { got = RDMACoreTool(tb, "rstream") })
	if want := filepath.Join(theirs, "rstream"); got != want || r.failed || r.skipped {
		t.Errorf("RDMACoreTool(rstream) = %q (failed=%v skipped=%v), want %q", got, r.failed, r.skipped, want)
	}
	for _, name := range []string{"ucmatose", "notexec"} {
		for _, rig := range []string{"", "1"} {
			t.Setenv("GOVERBS_RIG", rig)
			got = ""
			r := run(t, func(tb testing.TB) { got = RDMACoreTool(tb, name) })
			if (rig == "1") != r.failed || (rig == "") != r.skipped || got != "" {
				t.Errorf("GOVERBS_RIG=%q: RDMACoreTool(%s) = %q, failed=%v skipped=%v", rig, name, got, r.failed, r.skipped)
			}
		}
	}
}
