package mlx5_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestUnsupportedArch: where the doorbell package has no assembly, opening
// an mlx5 device fails with ErrNotSupported before any command. It runs
// on such an architecture (riscv64 under QEMU, by TestOtherArchitectures).
func TestUnsupportedArch(t *testing.T) {
	if doorbell.Supported {
		t.Skipf("GOARCH=%s has the doorbell assembly; TestOtherArchitectures runs this test on riscv64", runtime.GOARCH)
	}
	d, dev := newModel(t, nil, model.Options{})
	_, err := uverbs.Open(dev)
	if !errors.Is(err, uverbs.ErrNotSupported) {
		t.Fatalf("Open on GOARCH=%s: %v, want ErrNotSupported", runtime.GOARCH, err)
	}
	t.Logf("Open: %v", err)
	if s := d.Stats(); s.Contexts != 0 {
		t.Errorf("a context was created: %+v", s)
	}
}

// TestOtherArchitectures builds this package's tests for arm64 and riscv64
// and, when qemu-user-static is installed, runs them: on arm64 the fast
// path with the arm64 barriers and stores against the device model, on
// riscv64 the ErrNotSupported path. -short skips it.
func TestOtherArchitectures(t *testing.T) {
	if testing.Short() || os.Getenv("GOVERBS_MLX5_NO_CROSS") != "" || runtime.GOARCH != "amd64" {
		t.Skip("cross-architecture run skipped (-short, nested, or not on amd64)")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	for _, c := range []struct{ arch, qemu, run string }{
		{"arm64", "qemu-aarch64-static", "TestSmoke|TestSendQueueWrap|TestCrossDevice|TestArmWithoutSyscall|TestConformance/dynamic-uar"},
		{"riscv64", "qemu-riscv64-static", "TestUnsupportedArch"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "mlx5.test."+c.arch)
			build := exec.Command(gocmd, "test", "-c", "-o", bin, ".")
			build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+c.arch, "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("building for %s: %v\n%s", c.arch, err, out)
			}
			qemu, err := exec.LookPath(c.qemu)
			if err != nil {
				t.Skipf("built for %s but not run: %s is not installed", c.arch, c.qemu)
			}
			run := exec.Command(qemu, bin, "-test.run", c.run, "-test.v")
			run.Env = append(os.Environ(), "GOVERBS_MLX5_NO_CROSS=1")
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("%s under %s: %v\n%s", c.arch, c.qemu, err, out)
			}
			t.Logf("%s under %s:\n%s", c.arch, c.qemu, tail(out, 12))
		})
	}
}

func tail(b []byte, lines int) []byte {
	n := 0
	for i := len(b) - 1; i > 0; i-- {
		if b[i-1] == '\n' {
			n++
			if n == lines {
				return b[i:]
			}
		}
	}
	return b
}
