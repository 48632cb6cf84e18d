package cpuprofile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartWritesProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	t.Setenv(Env, path)
	stop := Start()
	x := 0
	for i := 0; i < 1e7; i++ {
		x += i
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is a gzipped protocol buffer.
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile of %d bytes (sum %d) does not start as gzip: % x", len(b), x, b[:min(len(b), 8)])
	}
}

func TestRunReturnsCodeAfterProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	t.Setenv(Env, path)
	var size int64 = -1
	code := Run(func() int {
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size() // the file exists while the body runs
		}
		return 3
	})
	if code != 3 || size < 0 {
		t.Fatalf("Run = %d, profile seen during the body: %v; want 3, true", code, size >= 0)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile after Run: %v, %v; want a written file", fi, err)
	}
}

func TestStartUnwritable(t *testing.T) {
	var msg bytes.Buffer
	path := filepath.Join(t.TempDir(), "missing", "cpu.pprof")
	stop := start(path, &msg)
	stop()
	if !strings.Contains(msg.String(), Env) || !strings.Contains(msg.String(), "running without a profile") {
		t.Errorf("message %q: want the variable and that the command runs on", msg.String())
	}
	// The profiler is free again: a later start works.
	ok := filepath.Join(t.TempDir(), "cpu.pprof")
	start(ok, &msg)()
	if _, err := os.Stat(ok); err != nil {
		t.Error(err)
	}
}

func TestStartOff(t *testing.T) {
	var msg bytes.Buffer
	start("", &msg)()
	if msg.Len() != 0 {
		t.Errorf("start without a path said %q", msg.String())
	}
}
