package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQEMU stands in for qemu-system-x86_64 in the accelerator tests. Under
// TCG it "boots": it prints the guest's first line and its exit marker. Under
// KVM it does what $FAKE_KVM says, mimicking the hosts the rig met:
//
//	internal  "KVM internal error. Suberror: 1", then silence (the host)
//	abort     QEMU's MSR assertion and SIGABRT (this project's build host)
//	silent    nothing at all
//	late      boots, then a KVM internal error in the middle of the run
//	good      boots like TCG
//
// With FAKE_TCG=lockup the TCG guest boots and then its kernel reports a soft
// lockup forever (seen on 5.10: a task stuck in rxe). The boot-retry tests
// (rig_retry_test.go) use more FAKE_TCG modes; "-once" ones fail the first
// TCG run only and boot the next:
//
//	panic[-once]  the kernel panics 1.9 s into boot, before init's work
//	              ("Oops: int3" in sched_clock_cpu: 6.12 under TCG, seen once)
//	stall-once    init starts, then the console stays silent
//	cmd-panic[-once]  a panic after init's "devices:" line, before the first RIG-START
//	test-panic    a panic after the first RIG-START (a test was running)
//	suite-panic-once  the suite's tests a and b: a passes, the kernel panics
//	              during b; the next run skips a if the initrd's rig/env says
//	              RIG_SKIP=a (run-tests.sh's knob), and both pass
//
// The heartbeat tests (TestRigHeartbeat) use two more: a guest that appends
// its uptime to the beat file of the -virtfs share named rigbeat every 0.3 s
// while a test runs, then
//
//	beat-stops    stops beating and stays silent (a frozen guest)
//	beat-steady   keeps beating, its console silent, for 4 s and exits 0
//
// Every run appends its -accel value to $FAKE_RUNS.
const fakeQEMU = `#!/bin/bash
ulimit -c 0
case " $* " in *" --version "*) echo "QEMU emulator version 0.0.0 (fake)"; exit 0 ;; esac
accel= prev= beat=
for a; do
  [ "$prev" = -accel ] && accel=$a
  case $prev,$a in -virtfs,*mount_tag=rigbeat*) beat=${a#*path=}; beat=${beat%%,*}/beat ;; esac
  prev=$a
done
echo "$accel" >> "$FAKE_RUNS"
beats() { # beats N: N beats 0.3 s apart (none without the share)
  local i; for ((i = 1; i <= $1; i++)); do [ -z "$beat" ] || echo "$i.00" >> "$beat"; sleep 0.3; done; }
testing() { # a guest whose first test started
  echo "[rig 0.50s] init started"; echo "[rig 0.90s] devices: rxe0 rxea rxeb siw0"; echo "RIG-START: uverbs"; }
case $accel,$FAKE_TCG in
  tcg,beat-stops) testing; beats 5; exec sleep 300 ;;
  tcg,beat-steady) testing; beats 14; echo "RIG-RESULT: uverbs PASS 0 4.2"; echo "RIG-EXIT: 0"; exit 0 ;;
esac
if [ "$accel" = tcg ] && [ "$FAKE_TCG" = lockup ]; then
  testing
  while :; do echo "[ 1337.361488] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [x.test:1190]"; sleep 0.2; done
fi
panic() { echo "[    1.934375] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI"
  echo "[    1.934375] RIP: 0010:sched_clock_cpu+0x10/0x190"
  echo "[    1.951118] Kernel panic - not syncing: Fatal exception in interrupt"; exit 0; }
if [ "$accel" = tcg ]; then
  first=; [ "$(grep -c '^tcg$' "$FAKE_RUNS")" = 1 ] && first=1
  if [ "$FAKE_TCG" = suite-panic-once ]; then
    initrd=; prev=; for a; do [ "$prev" = -initrd ] && initrd=$a; prev=$a; done
    echo "[rig 0.50s] init started"; echo "[rig 0.90s] devices: rxe0 rxea rxeb siw0"
    if ! grep -aq '^export RIG_SKIP=a' "$initrd"; then echo "RIG-START: a"; echo "RIG-RESULT: a PASS 0 0.1"; fi
    echo "RIG-START: b"
    [ -z "$first" ] || panic
    echo "RIG-RESULT: b PASS 0 0.2"; echo "RIG-EXIT: 0"; exit 0
  fi
  case $FAKE_TCG in
    panic) panic ;;
    panic-once) [ -z "$first" ] || panic ;;
    stall-once) [ -z "$first" ] || { echo "[rig 0.50s] init started"; exec sleep 300; } ;;
  esac
  echo "[rig 0.50s] init started"
  echo "[rig 0.90s] devices: rxe0 rxea rxeb siw0"
  case $FAKE_TCG in
    cmd-panic) panic ;;
    cmd-panic-once) [ -z "$first" ] || panic ;;
  esac
  echo "RIG-START: uverbs"
  [ "$FAKE_TCG" != test-panic ] || panic
  echo "RIG-RESULT: uverbs PASS 0 0.1"
  echo "RIG-EXIT: 7"; exit 0
fi
case $FAKE_KVM in
  internal) echo "KVM internal error. Suberror: 1" >&2; echo "emulation failure" >&2; exec sleep 300 ;;
  abort) echo "qemu-system-x86_64: ../../accel/kvm/kvm-all.c:2889: kvm_buf_set_msrs: Assertion 'ret == cpu->kvm_msr_buf->nmsrs' failed." >&2
         kill -ABRT $$ ;;
  silent) exec sleep 300 ;;
  late) echo "[rig 0.20s] init started"; sleep 1; echo "KVM internal error. Suberror: 1" >&2; exec sleep 300 ;;
  good) echo "[rig 0.20s] init started"; echo "RIG-EXIT: 7"; exit 0 ;;
esac
exit 99
`

// rigAccel is one host for the accelerator tests: a fake QEMU first in PATH,
// a fake /dev/kvm, and its own rig cache (where the verdicts are kept).
type rigAccel struct {
	t                         *testing.T
	bash, dir, runs, cache    string
	vmlinux, initrd, kvm, lib string
	out                       string // the last boot's output (stderr and the report)
}

func newRigAccel(t *testing.T) *rigAccel {
	bash, lib := hostScript(t, "lib.sh")
	dir := t.TempDir()
	r := &rigAccel{t: t, bash: bash, dir: dir, lib: lib,
		runs: filepath.Join(dir, "runs"), cache: filepath.Join(dir, "cache"),
		vmlinux: filepath.Join(dir, "6.1.0-99-amd64_6.1.999-1", "vmlinux"),
		initrd:  filepath.Join(dir, "initrd"), kvm: filepath.Join(dir, "kvm")}
	for _, f := range []struct {
		path, text string
		mode       os.FileMode
	}{
		{filepath.Join(dir, "bin", "qemu-system-x86_64"), fakeQEMU, 0o755},
		{r.vmlinux, "not a kernel", 0o644}, {r.initrd, "", 0o644}, {r.kvm, "", 0o666},
	} {
		writeFile(t, f.path, f.text, f.mode)
	}
	return r
}

// writeFile writes a test's file, making its directory.
func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

// boot runs lib.sh's rig_qemu once with the fake QEMU in mode and returns
// what it reported ("rc=7 accel=tcg note=..."), the -accel of each QEMU run
// and the wall time.
func (r *rigAccel) boot(mode string, env ...string) (report string, runs []string, took time.Duration) {
	r.t.Helper()
	_ = os.Remove(r.runs)
	script := `set -euo pipefail; . "$1"; rc=0
rig_qemu "$2" "$3" "$4" 60 || rc=$?
echo "rc=$rc accel=$RIG_BOOT_ACCEL why=${RIG_BOOT_WHY:-} note=${RIG_BOOT_NOTE:-}"`
	cmd := exec.Command(r.bash, "-c", script, "bash", r.lib, r.vmlinux, r.initrd, filepath.Join(r.dir, "console.log"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(r.dir, "bin")+":"+os.Getenv("PATH"),
		"FAKE_KVM="+mode, "FAKE_RUNS="+r.runs, "RIG_KVM_DEV="+r.kvm, "RIG_CACHE="+r.cache,
		"RIG_OUT="+r.dir, "RIG_QUIET=1", "RIG_KVM_WAIT=2", "RIG_ACCEL=", "RIG_REFRESH=", "RIG_STALL=")
	cmd.Env = append(cmd.Env, env...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	took = time.Since(t0)
	r.out = string(out)
	if err != nil {
		r.t.Fatalf("rig_qemu with fake QEMU (%s): %v\n%s", mode, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	report = lines[len(lines)-1]
	b, _ := os.ReadFile(r.runs)
	runs = strings.Fields(string(b))
	r.t.Logf("%s: %s (runs %v, %v)\n%s", mode, report, runs, took.Round(time.Millisecond), out)
	return report, runs, took
}

// verdict is the cached accelerator verdict for the fake host and kernel.
func (r *rigAccel) verdict() string {
	r.t.Helper()
	m, _ := filepath.Glob(filepath.Join(r.cache, "accel", "6.1.0-99-amd64_6.1.999-1-*"))
	if len(m) != 1 {
		r.t.Fatalf("want one verdict file in %s/accel, have %v", r.cache, m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func equal(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") }

// TestRigAccelFallback: a KVM that fails the boot in any of the ways seen on
// real hosts costs seconds, the same boot then runs under TCG and says so,
// and the verdict "tcg" is cached so the next boot goes straight to TCG.
func TestRigAccelFallback(t *testing.T) {
	for _, c := range []struct{ mode, why string }{
		{"internal", "KVM internal error"},
		{"abort", "qemu ended (status 134) before the guest's first line"},
		{"silent", "no console line from the guest within 2s"},
		{"late", "KVM internal error"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			r := newRigAccel(t)
			report, runs, took := r.boot(c.mode)
			if !strings.HasPrefix(report, "rc=7 accel=tcg why= note=KVM failed ("+c.why) ||
				!strings.Contains(report, "the same boot ran again under TCG") {
				t.Errorf("report %q: want the guest's status 7 from a TCG retry noting %q", report, c.why)
			}
			if !equal(runs, []string{"kvm", "tcg"}) {
				t.Errorf("QEMU ran with -accel %v, want kvm then tcg", runs)
			}
			// The fake KVM guest hangs for 300 s and the boot's host timeout
			// is 60 s: a fallback that waited for either is a failure. The
			// bound leaves room for a loaded host (~5 s quiet, 11 s at load 27).
			if took > 45*time.Second {
				t.Errorf("the fallback took %v: a failing KVM must be given up at once, not by the host timeout", took)
			}
			if v := r.verdict(); !strings.HasPrefix(v, "tcg "+strings.SplitN(c.why, " (", 2)[0]) {
				t.Errorf("cached verdict %q, want tcg with the reason %q", v, c.why)
			}
			if _, err := os.Stat(filepath.Join(r.dir, "console.log.kvm-failed")); err != nil {
				t.Errorf("the failed KVM console was not kept: %v", err)
			}
			// The verdict holds: the next boot does not try KVM again.
			report, runs, _ = r.boot(c.mode)
			if report != "rc=7 accel=tcg why= note=" || !equal(runs, []string{"tcg"}) {
				t.Errorf("second boot: %q with -accel %v, want TCG at once from the cached verdict", report, runs)
			}
			// RIG_REFRESH asks again.
			if _, runs, _ = r.boot(c.mode, "RIG_REFRESH=1"); !equal(runs, []string{"kvm", "tcg"}) {
				t.Errorf("RIG_REFRESH=1: -accel %v, want kvm then tcg", runs)
			}
		})
	}
}

// TestRigAccelKVM: a KVM that boots the kernel to its first line is used and
// remembered; a forced choice is obeyed and caches nothing; no /dev/kvm means TCG.
func TestRigAccelKVM(t *testing.T) {
	r := newRigAccel(t)
	report, runs, _ := r.boot("good")
	if report != "rc=7 accel=kvm why= note=" || !equal(runs, []string{"kvm"}) {
		t.Errorf("good KVM: %q with -accel %v, want kvm alone", report, runs)
	}
	if v := r.verdict(); !strings.HasPrefix(v, "kvm first line after") {
		t.Errorf("cached verdict %q, want kvm", v)
	}
	if report, runs, _ = r.boot("good"); report != "rc=7 accel=kvm why= note=" || !equal(runs, []string{"kvm"}) {
		t.Errorf("second good boot: %q with -accel %v", report, runs)
	}
	// A KVM that was good and fails later still falls back, and the verdict turns.
	if report, runs, _ = r.boot("internal"); !strings.HasPrefix(report, "rc=7 accel=tcg") || !equal(runs, []string{"kvm", "tcg"}) {
		t.Errorf("cached kvm, then an internal error: %q with -accel %v, want a TCG retry", report, runs)
	}
	if v := r.verdict(); !strings.HasPrefix(v, "tcg KVM internal error") {
		t.Errorf("verdict after the failure %q, want tcg", v)
	}

	f := newRigAccel(t)
	if report, runs, _ = f.boot("abort", "RIG_ACCEL=kvm"); !strings.HasPrefix(report, "rc=125 accel=kvm why=KVM failed (RIG_ACCEL=kvm forces it)") ||
		!equal(runs, []string{"kvm"}) {
		t.Errorf("RIG_ACCEL=kvm, KVM aborting: %q with -accel %v, want a failed boot and no retry", report, runs)
	}
	if report, runs, _ = f.boot("good", "RIG_ACCEL=tcg"); report != "rc=7 accel=tcg why= note=" || !equal(runs, []string{"tcg"}) {
		t.Errorf("RIG_ACCEL=tcg: %q with -accel %v", report, runs)
	}
	if m, _ := filepath.Glob(filepath.Join(f.cache, "accel", "*")); len(m) != 0 {
		t.Errorf("a forced accelerator cached a verdict: %v", m)
	}
	if report, runs, _ = f.boot("good", "RIG_KVM_DEV="+filepath.Join(f.dir, "no-kvm")); report != "rc=7 accel=tcg why= note=" || !equal(runs, []string{"tcg"}) {
		t.Errorf("no /dev/kvm: %q with -accel %v, want TCG", report, runs)
	}
}

// TestRigHeartbeat: a guest whose heartbeat stops while its console is
// silent (a frozen kernel) is killed RIG_BEAT seconds after its last beat,
// long before the console-silence rule (RIG_STALL) or the host timeout
// would; one that keeps beating with a silent console is left to finish; the
// beat's share is gone after either.
func TestRigHeartbeat(t *testing.T) {
	for _, c := range []struct {
		mode, report string
		min, max     time.Duration
	}{
		{"beat-stops", "rc=124 accel=tcg why=hung: the guest's heartbeat stopped (none for 2s; the last at 5.00s of guest uptime), killed by the host note=", 2 * time.Second, 20 * time.Second},
		{"beat-steady", "rc=0 accel=tcg why= note=", 4 * time.Second, 30 * time.Second},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			r := newRigAccel(t)
			tmp := t.TempDir()
			report, _, took := r.boot("good", "RIG_ACCEL=tcg", "FAKE_TCG="+c.mode, "RIG_BEAT=2", "RIG_STALL=1000", "TMPDIR="+tmp)
			if report != c.report {
				t.Errorf("report %q, want %q", report, c.report)
			}
			if took < c.min || took > c.max {
				t.Errorf("the boot took %v, want %v to %v", took, c.min, c.max)
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "rigbeat.*")); len(left) != 0 {
				t.Errorf("the heartbeat share was left behind: %v", left)
			}
		})
	}
}

// TestRigLockup: a guest kernel that keeps reporting a soft lockup keeps its
// console busy, so the silence timer never fires; the rig kills it
// RIG_LOCKUP seconds after the first report and says why.
func TestRigLockup(t *testing.T) {
	r := newRigAccel(t)
	report, _, took := r.boot("good", "RIG_ACCEL=tcg", "FAKE_TCG=lockup", "RIG_LOCKUP=1")
	if !strings.HasPrefix(report, "rc=124 accel=tcg why=hung: the guest kernel still reports a soft lockup 1s after its first: watchdog: BUG: soft lockup") {
		t.Errorf("report %q: want a hung boot naming the soft lockup", report)
	}
	if took > 45*time.Second { // the fake locks up forever; the boot's host timeout is 60 s
		t.Errorf("the lockup was given up after %v, want RIG_LOCKUP (1 s) after the first report, not the host timeout", took)
	}
}
