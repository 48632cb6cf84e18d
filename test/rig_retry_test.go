package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRigBootRetry: a guest that panicked, stalled or ended before its work
// started (no test ran) is booted once more, same kernel and command, and the
// rig says so on stderr and in the boot's note; a guest that failed after its
// work started is never retried (that would hide flakes), nor is any boot when
// RIG_BOOT_RETRY=0. The work starts at init's "devices:" line (run.sh, pair.sh)
// or, with RIG_BOOT_MARK='^RIG-START: ', at the suite's first test.
func TestRigBootRetry(t *testing.T) {
	const retried = "boot retried once: the first ended before the guest's work started ("
	const panicked = "Kernel panic - not syncing: Fatal exception in interrupt"
	for _, c := range []struct {
		name      string
		env       []string
		kvm       string   // FAKE_KVM (without RIG_ACCEL=tcg in env: auto)
		report    string   // prefix of the report line
		note      string   // in the report's note ("" for none at all)
		runs      []string // -accel of each QEMU run
		keepsFail bool     // the first console kept as .boot-failed
	}{
		{name: "panic-once", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=panic-once"},
			report: "rc=7 accel=tcg why= note=", note: retried + panicked, runs: []string{"tcg", "tcg"}, keepsFail: true},
		{name: "panic-twice", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=panic"},
			report: "rc=125 accel=tcg why=" + panicked, note: retried + panicked, runs: []string{"tcg", "tcg"}, keepsFail: true},
		{name: "stall-once", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=stall-once", "RIG_BOOT_STALL=2"},
			report: "rc=7 accel=tcg why= note=", note: retried + "hung during boot: no console output for 2s", runs: []string{"tcg", "tcg"}, keepsFail: true},
		{name: "panic-in-test", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=test-panic"},
			report: "rc=125 accel=tcg why=" + panicked + " note=", runs: []string{"tcg"}},
		{name: "panic-after-devices", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=cmd-panic-once"},
			report: "rc=125 accel=tcg why=" + panicked + " note=", runs: []string{"tcg"}},
		{name: "panic-before-first-test", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=cmd-panic-once", "RIG_BOOT_MARK=^RIG-START: "},
			report: "rc=7 accel=tcg why= note=", note: retried + panicked, runs: []string{"tcg", "tcg"}, keepsFail: true},
		{name: "retry-off", env: []string{"RIG_ACCEL=tcg", "FAKE_TCG=panic-once", "RIG_BOOT_RETRY=0"},
			report: "rc=125 accel=tcg why=" + panicked + " note=", runs: []string{"tcg"}},
		{name: "kvm-then-panic-once", kvm: "internal", env: []string{"FAKE_TCG=panic-once"},
			report: "rc=7 accel=tcg why= note=KVM failed (KVM internal error", note: retried + panicked, runs: []string{"kvm", "tcg", "tcg"}, keepsFail: true},
		{name: "forced-kvm-fails", kvm: "abort", env: []string{"RIG_ACCEL=kvm", "FAKE_TCG=panic-once"},
			report: "rc=125 accel=kvm why=KVM failed (RIG_ACCEL=kvm forces it)", runs: []string{"kvm"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRigAccel(t)
			kvm := c.kvm
			if kvm == "" {
				kvm = "good"
			}
			report, runs, took := r.boot(kvm, c.env...)
			if !strings.HasPrefix(report, c.report) {
				t.Errorf("report %q, want it to begin %q", report, c.report)
			}
			if c.note == "" && strings.Contains(report, "retried") {
				t.Errorf("report %q: this boot must not be retried", report)
			}
			if c.note != "" && !strings.Contains(report, c.note) {
				t.Errorf("report %q, want the note %q", report, c.note)
			}
			if !equal(runs, c.runs) {
				t.Errorf("QEMU ran with -accel %v, want %v", runs, c.runs)
			}
			said := strings.Contains(r.out, "rig: 6.1.0-99-amd64_6.1.999-1: the guest's boot failed before its work started (") &&
				strings.Contains(r.out, "): retrying the same boot once")
			if said != (c.note != "") {
				t.Errorf("stderr says it retries: %v, want %v:\n%s", said, c.note != "", r.out)
			}
			b, err := os.ReadFile(filepath.Join(r.dir, "console.log.boot-failed"))
			if c.keepsFail && (err != nil || len(b) == 0) {
				t.Errorf("the failed boot's console was not kept: %v", err)
			}
			if !c.keepsFail && err == nil {
				t.Errorf("a console of a failed boot was kept, but no boot was retried")
			}
			// the fake's stall lasts 300 s and the host timeout is 60 s: the
			// boot stall must be seen after RIG_BOOT_STALL, not by either
			if took > 45*time.Second {
				t.Errorf("took %v: a stalled boot must be given up after RIG_BOOT_STALL", took)
			}
		})
	}
}

// TestRigSuitePanicRetry: in the suite (lib.sh's rig_suite_boot), a guest
// kernel that panics after a test started costs one more boot for the tests
// that had not finished, never the run: the second boot skips the finished
// ones (their results stay in the panicked console), the note names the
// panic and the test it cut short, and the overlay's rig/env is as it was.
// A second panic stands (rc 125), as does the first with RIG_PANIC_RETRY=0.
func TestRigSuitePanicRetry(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Fatal("no cpio: rig_boot packs the overlay with it (test/rig/setup.sh installs it)")
	}
	const panicked = "Kernel panic - not syncing: Fatal exception in interrupt"
	for _, c := range []struct {
		name, mode string
		env        []string
		rc         string   // rig_suite_boot's status
		done       string   // RIG_SUITE_DONE
		during     string   // the test the panic cut short ("": no retry)
		runs       []string // -accel of each QEMU run
		panicLog   []string // results in console.log.panicked (nil: no such file)
		lastLog    []string // results in console.log
	}{
		{name: "panic-once", mode: "suite-panic-once", rc: "0", done: "a", during: "b",
			runs: []string{"tcg", "tcg"}, panicLog: []string{"a"}, lastLog: []string{"b"}},
		{name: "panic-twice", mode: "test-panic", rc: "125", during: "uverbs",
			runs: []string{"tcg", "tcg"}, panicLog: []string{}, lastLog: []string{}},
		{name: "retry-off", mode: "suite-panic-once", env: []string{"RIG_PANIC_RETRY=0"}, rc: "125",
			runs: []string{"tcg"}, lastLog: []string{"a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRigAccel(t)
			ov := filepath.Join(r.dir, "overlay")
			envText := "export RIG_RUN=x\n"
			envf := filepath.Join(r.dir, "series.env")
			writeFile(t, filepath.Join(ov, "rig", "env"), envText, 0o644)
			writeFile(t, envf, "VMLINUX="+r.vmlinux+"\nINITRD="+r.initrd+"\n", 0o644)
			_ = os.Remove(r.runs)
			logf := filepath.Join(r.dir, "console.log")
			script := `set -euo pipefail; . "$1"; rc=0
rig_suite_boot "$2" "$3" "$4" 60 || rc=$?
echo "rc=$rc done=${RIG_SUITE_DONE% } note=${RIG_BOOT_NOTE:-}"
echo "panic=$RIG_SUITE_PANIC"`
			cmd := exec.Command(r.bash, "-c", script, "bash", r.lib, envf, ov, logf)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Join(r.dir, "bin")+":"+os.Getenv("PATH"),
				"FAKE_TCG="+c.mode, "FAKE_RUNS="+r.runs, "RIG_KVM_DEV="+r.kvm, "RIG_CACHE="+r.cache,
				"RIG_OUT="+r.dir, "RIG_QUIET=1", "RIG_ACCEL=tcg", "RIG_BOOT_MARK=^RIG-START: ", "RIG_STALL=", "RIG_PANIC_RETRY=")
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("rig_suite_boot: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 2 {
				t.Fatalf("want a report and RIG_SUITE_PANIC, have:\n%s", out)
			}
			report, panicVar := lines[len(lines)-2], lines[len(lines)-1]
			t.Logf("%s\n%s", report, out)
			if want := "rc=" + c.rc + " done=" + c.done + " note="; !strings.HasPrefix(report, want) {
				t.Errorf("report %q, want it to begin %q", report, want)
			}
			note := "boot retried once: the guest kernel panicked during " + c.during + " (" + panicked + "; console in " + logf + ".panicked)"
			if c.during != "" && !strings.Contains(report, note) {
				t.Errorf("report %q, want the note %q", report, note)
			}
			wantPanic := "panic=" // RIG_SUITE_PANIC: the note's words, when there was a retry
			if c.during != "" {
				wantPanic += strings.TrimPrefix(note, "boot retried once: ")
			}
			if panicVar != wantPanic {
				t.Errorf("RIG_SUITE_PANIC: %q, want %q", panicVar, wantPanic)
			}
			if c.during == "" && strings.Contains(report, "retried") {
				t.Errorf("report %q: this boot must not be retried", report)
			}
			said := strings.Contains(string(out), "console: the guest kernel panicked during "+c.during+" (") &&
				strings.Contains(string(out), "booting once more for the tests that had not finished")
			if said != (c.during != "") {
				t.Errorf("stderr says it boots once more: %v, want %v", said, c.during != "")
			}
			b, _ := os.ReadFile(r.runs)
			if runs := strings.Fields(string(b)); !equal(runs, c.runs) {
				t.Errorf("QEMU ran with -accel %v, want %v", runs, c.runs)
			}
			for _, l := range []struct {
				path string
				want []string
			}{{logf + ".panicked", c.panicLog}, {logf, c.lastLog}} {
				b, err := os.ReadFile(l.path)
				if l.want == nil {
					if err == nil {
						t.Errorf("%s exists, but no boot panicked and was retried", l.path)
					}
					continue
				}
				if err != nil {
					t.Errorf("%v", err)
					continue
				}
				var got []string
				for _, ln := range strings.Split(string(b), "\n") {
					if f := strings.Fields(ln); len(f) > 1 && f[0] == "RIG-RESULT:" {
						got = append(got, f[1])
					}
				}
				if !equal(got, l.want) {
					t.Errorf("%s has results for %v, want %v", filepath.Base(l.path), got, l.want)
				}
			}
			if b, err := os.ReadFile(filepath.Join(ov, "rig", "env")); err != nil || string(b) != envText {
				t.Errorf("the overlay's rig/env is %q (%v), want it as it was: %q", b, err, envText)
			}
		})
	}
}
