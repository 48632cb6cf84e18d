package test

import (
	"os"
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
