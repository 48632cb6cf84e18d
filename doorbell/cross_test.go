package doorbell_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The tests in this file check the architectures this machine does not run
// natively, with the go command (and qemu-user when it is installed):
//
//   - TestCrossBuild: go vet (whose asmdecl pass checks the assembly's frame
//     offsets against the Go declarations) and a linked test binary for
//     amd64, arm64 and riscv64 (the panicking fallback), and a build for 386.
//   - TestInstructions: disassembles the amd64 and arm64 test binaries and
//     checks each function's instruction words, so that a wrong barrier
//     option (DMB ISHST for OSHST, say) cannot slip in unnoticed.
//   - TestUnderQEMU: runs the arm64 and riscv64 test binaries under
//     qemu-aarch64-static / qemu-riscv64-static (Debian's qemu-user-static)
//     when installed; without it they are only compiled, and the test says so
//     by skipping. QEMU executes the instructions; it does not model how a
//     device observes barriers.
//
// By hand, the same checks are:
//
//	GOARCH=arm64 go vet ./doorbell
//	GOARCH=arm64 go test -c -o /tmp/doorbell.arm64 ./doorbell
//	go tool objdump -s 'doorbell\.[A-Z].*\.abi0$' /tmp/doorbell.arm64
//	GOVERBS_DOORBELL_NO_CROSS=1 qemu-aarch64-static /tmp/doorbell.arm64 -test.v
//	GOARCH=riscv64 go build ./doorbell
//
// -short skips them all; so does GOVERBS_DOORBELL_NO_CROSS (set for the
// binaries run under QEMU, which must not recurse).

func skipCross(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not compiling for other architectures")
	}
	if os.Getenv("GOVERBS_DOORBELL_NO_CROSS") != "" {
		t.Skip("GOVERBS_DOORBELL_NO_CROSS is set")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	return gocmd
}

func goCmd(gocmd, goarch string, args ...string) *exec.Cmd {
	cmd := exec.Command(gocmd, args...)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	return cmd
}

// testBinary builds this package's tests for goarch into dir.
func testBinary(t *testing.T, gocmd, goarch, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "doorbell."+goarch+".test")
	if out, err := goCmd(gocmd, goarch, "test", "-c", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=%s go test -c: %v\n%s", goarch, err, out)
	}
	return bin
}

func TestCrossBuild(t *testing.T) {
	gocmd := skipCross(t)
	for _, c := range [][]string{
		{"amd64", "vet", "."},
		{"arm64", "vet", "."},
		{"arm64", "test", "-c", "-o", os.DevNull, "."},
		{"riscv64", "vet", "."},
		{"riscv64", "test", "-c", "-o", os.DevNull, "."},
		{"386", "build", "."},
	} {
		if out, err := goCmd(gocmd, c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s go %s: %v\n%s", c[0], strings.Join(c[1:], " "), err, out)
		}
	}
}

// wantWords lists, per architecture and function, instruction encodings that
// must appear in order (hex as go tool objdump prints them; GNU syntax in the
// comments).
var wantWords = map[string]map[string][]string{
	"amd64": {
		"FromDevice": {"0faee8", "c3"},     // lfence
		"FlushWC":    {"0faef8", "c3"},     // sfence
		"Store64BE":  {"480fcb", "488918"}, // bswap %rbx; mov %rbx,(%rax)
		"Store32BE":  {"0fcb", "8918"},     // bswap %ebx; mov %ebx,(%rax)
		"Copy64": {"488907", "48895f08", "48894f10", "48895718", // mov %rax,(%rdi) … ascending
			"4c894720", "4c894f28", "4c895730", "4c895f38"},
		"CopyWC64": {"0faef8", "488907", "48895f08", "48894f10", "48895718", // sfence; Copy64's stores; sfence
			"4c894720", "4c894f28", "4c895730", "4c895f38", "0faef8", "c3"},
	},
	"arm64": {
		"ToDevice":   {"d50332bf", "d65f03c0"},                         // dmb oshst; ret
		"FromDevice": {"d50331bf", "d65f03c0"},                         // dmb oshld; ret
		"FlushWC":    {"d5033e9f", "d65f03c0"},                         // dsb st; ret
		"Store64BE":  {"dac00c21", "f9000001"},                         // rev x1, x1; str x1, [x0]
		"Store32BE":  {"5ac00821", "b9000001"},                         // rev w1, w1; str w1, [x0]
		"Copy64":     {"a9000c02", "a9011404", "a9021c06", "a9032408"}, // stp x2, x3, [x0] … [x0, #48]
		"CopyWC64": {"d5033e9f", "a9000c02", "a9011404", "a9021c06", "a9032408", // dsb st; Copy64's stp; dsb st
			"d5033e9f", "d65f03c0"},
	},
}

var objdumpLine = regexp.MustCompile(`^\s+\S+\s+0x[0-9a-f]+\s+([0-9a-f]+)\s`)

func TestInstructions(t *testing.T) {
	gocmd := skipCross(t)
	dir := t.TempDir()
	for _, goarch := range []string{"amd64", "arm64"} {
		bin := testBinary(t, gocmd, goarch, dir)
		for name, want := range wantWords[goarch] {
			sym := `doorbell\.` + name + `\.abi0$`
			out, err := exec.Command(gocmd, "tool", "objdump", "-s", sym, bin).CombinedOutput()
			if err != nil {
				t.Fatalf("go tool objdump -s %s: %v\n%s", sym, err, out)
			}
			var words []string
			for line := range strings.Lines(string(out)) {
				if m := objdumpLine.FindStringSubmatch(line); m != nil {
					words = append(words, m[1])
				}
			}
			i := 0
			for _, w := range words {
				if i < len(want) && w == want[i] {
					i++
				}
			}
			if i < len(want) {
				t.Errorf("%s %s: instruction %s missing or out of order; disassembly:\n%s", goarch, name, want[i], out)
			}
		}
	}
}

// TestInlinedOrder checks what amd64's inlined ToDevice and Publish32 rely
// on, in the code of order_test.go's helpers: the compiler keeps a store
// before the barrier's load of doorbell.order ahead of it and a store after
// it behind it, and no call into doorbell is left (publish: store,
// ToDevice, store); Publish32's index store is a plain MOVL, no locked
// XCHG (release: entry store, Publish32).
func TestInlinedOrder(t *testing.T) {
	gocmd := skipCross(t)
	bin := testBinary(t, gocmd, "amd64", t.TempDir())
	const barrier = `MOVL github\.com/goverbs/goverbs/doorbell\.order\(SB\), `
	for _, c := range []struct {
		fn     string
		forbid []string
		want   []string
	}{
		{"publish", []string{"CALL github.com/goverbs/goverbs/doorbell."},
			[]string{`MOVL \$0x11, 0\(AX\)`, barrier, `MOVL \$0x22, 0x4\(AX\)`}},
		{"release", []string{"XCHG", "CALL github.com/goverbs/goverbs/doorbell."},
			[]string{`MOVL \$0x33, 0\(AX\)`, barrier, `MOVL \$0x44, 0\(BX\)`}},
	} {
		t.Run(c.fn, func(t *testing.T) {
			out, err := exec.Command(gocmd, "tool", "objdump", "-s", `doorbell_test\.`+c.fn+`$`, bin).CombinedOutput()
			if err != nil {
				t.Fatalf("go tool objdump: %v\n%s", err, out)
			}
			i := 0
			for line := range strings.Lines(string(out)) {
				for _, f := range c.forbid {
					if strings.Contains(line, f) {
						t.Errorf("amd64 %s has %q; the barrier should inline to a plain load and store:\n%s", c.fn, f, out)
					}
				}
				if i < len(c.want) && regexp.MustCompile(c.want[i]).MatchString(line) {
					i++
				}
			}
			if i < len(c.want) {
				t.Errorf("amd64 %s: %s missing or out of order; disassembly:\n%s", c.fn, c.want[i], out)
			}
		})
	}
}

func TestUnderQEMU(t *testing.T) {
	gocmd := skipCross(t)
	dir := t.TempDir()
	for _, c := range []struct {
		goarch, qemu string
		mustPass     []string
	}{
		{"arm64", "qemu-aarch64-static", []string{"TestStore64BE", "TestStore32BE", "TestCopy64", "TestBarriers", "TestNoAllocs"}},
		{"riscv64", "qemu-riscv64-static", []string{"TestUnsupportedPanics"}},
	} {
		t.Run(c.goarch, func(t *testing.T) {
			if runtime.GOARCH == c.goarch {
				t.Skipf("native %s: the package's own run covers it", c.goarch)
			}
			qemu, err := exec.LookPath(c.qemu)
			if err != nil {
				t.Skipf("%s not installed (apt-get install qemu-user-static): %s only compiled", c.qemu, c.goarch)
			}
			bin := testBinary(t, gocmd, c.goarch, dir)
			run := exec.Command(qemu, bin, "-test.v", "-test.count=1")
			run.Env = append(os.Environ(), "GOVERBS_DOORBELL_NO_CROSS=1")
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("%s tests under %s: %v\n%s", c.goarch, c.qemu, err, out)
			}
			for _, name := range c.mustPass {
				if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) {
					t.Errorf("%s under %s: %s did not pass:\n%s", c.goarch, c.qemu, name, out)
				}
			}
		})
	}
}
