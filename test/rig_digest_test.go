package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRigDigest runs lib.sh's digest, which suite.sh prints for a failed
// test binary, on a console log whose failure is longer than the digest's
// 60 lines. Under suite.sh's `set -euo pipefail` it must succeed: a digest
// cut by `head` killed its awk with SIGPIPE, and the 141 ended suite.sh
// before its other kernels and its summary.
func TestRigDigest(t *testing.T) {
	bash, lib := hostScript(t, "lib.sh")
	var log strings.Builder
	log.WriteString("RIG-START: other\n=== RUN   TestOther\n    other.go:1: not this binary\n--- FAIL: TestOther (0.00s)\nRIG-RESULT: other FAIL 1 0.1\n")
	log.WriteString("RIG-START: pkg\n=== RUN   TestPasses\n    pass.go:1: quiet\n--- PASS: TestPasses (0.00s)\n=== RUN   TestFails\r\n")
	for i := range 5000 { // more than a pipe holds, so a writer is still writing when a head would stop reading
		fmt.Fprintf(&log, "    fail.go:%d: line %d of the failure\n", i, i)
	}
	log.WriteString("--- FAIL: TestFails (0.01s)\nFAIL\nRIG-RESULT: pkg FAIL 1 0.2\n")
	logf := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(logf, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bash, "-c", `set -euo pipefail; . "$1"; digest "$2" pkg; echo "digest returned"`,
		"bash", lib, logf).CombinedOutput()
	if err != nil {
		t.Fatalf("digest under pipefail: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if last := lines[len(lines)-1]; last != "digest returned" {
		t.Fatalf("last line %q, want the script to go on after digest", last)
	}
	lines = lines[:len(lines)-1]
	if len(lines) != 60 {
		t.Errorf("digest printed %d lines, want 60", len(lines))
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "  | ") {
			t.Errorf("line %d %q lacks the digest's indent", i, l)
		}
		if strings.Contains(l, "other") || strings.Contains(l, "quiet") {
			t.Errorf("line %d %q is not the failed test's output", i, l)
		}
	}
	if want := "  |     fail.go:0: line 0 of the failure"; len(lines) > 0 && lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
}

// TestRigConsoleFault runs lib.sh's console_fault, which suite.sh prints
// after its summary for a guest that hung or died: the head of the last oops
// (30 lines at most, from its first line), or the last 20 lines when the
// console holds none.
func TestRigConsoleFault(t *testing.T) {
	bash, lib := hostScript(t, "lib.sh")
	var oops, quiet strings.Builder
	oops.WriteString("[    5.1] BUG: an early warning\n")
	for i := range 100 {
		fmt.Fprintf(&oops, "[   %d.0] noise %d\n", 10+i, i)
	}
	oops.WriteString("[  200.0] Oops: general protection fault, probably for non-canonical address\r\n")
	for i := range 50 {
		fmt.Fprintf(&oops, "[  200.%d] trace %d\n", i+1, i)
	}
	for i := range 50 {
		fmt.Fprintf(&quiet, "line %d\n", i)
	}
	for _, c := range []struct {
		name, text, first, last string
		n                       int
	}{
		{"oops", oops.String(), "[  200.0] Oops: general protection fault, probably for non-canonical address", "[  200.29] trace 28", 30},
		{"no-oops", quiet.String(), "line 30", "line 49", 20},
	} {
		logf := filepath.Join(t.TempDir(), "console.log")
		if err := os.WriteFile(logf, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bash, "-c", `set -euo pipefail; . "$1"; console_fault "$2"`, "bash", lib, logf).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: console_fault: %v\n%s", c.name, err, out)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "rig: ---- the fault") || lines[len(lines)-1] != "rig: ----" {
			t.Fatalf("%s: no header and footer:\n%s", c.name, out)
		}
		lines = lines[1 : len(lines)-1]
		if len(lines) != c.n || lines[0] != "  | "+c.first || lines[len(lines)-1] != "  | "+c.last {
			t.Errorf("%s: %d lines from %q to %q, want %d from %q to %q", c.name, len(lines), lines[0], lines[len(lines)-1], c.n, c.first, c.last)
		}
	}
}
