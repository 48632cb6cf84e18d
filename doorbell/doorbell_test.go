package doorbell_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/doorbell"
	"github.com/goverbs/goverbs/mmap"
)

// The tests store into anonymous mappings from package mmap, the memory the
// fast path uses for queues and doorbell records, and take addresses with
// Region.Pointer, so this file needs no unsafe. Real MMIO (a device BAR
// mapped write-combining) is not reachable here: these tests show which bytes
// each store writes and that nothing beyond them changes; that the device
// sees one access per store rests on the instruction chosen (see the .s
// files).

func region(t testing.TB, fill byte) *mmap.Region {
	t.Helper()
	r, err := mmap.Anonymous(mmap.PageSize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	b := r.Bytes()
	for i := range b {
		b[i] = fill
	}
	return r
}

func requireSupported(t *testing.T) {
	t.Helper()
	if !doorbell.Supported {
		t.Skipf("no doorbell implementation on %s; TestUnsupportedPanics covers it", runtime.GOARCH)
	}
}

// untouched reports the first byte of b outside [lo, hi) that is not fill.
func untouched(t *testing.T, b []byte, lo, hi int, fill byte) {
	t.Helper()
	for i, c := range b {
		if (i < lo || i >= hi) && c != fill {
			t.Fatalf("byte %d changed to %#x; only bytes %d..%d may change", i, c, lo, hi-1)
		}
	}
}

func TestStore64BE(t *testing.T) {
	requireSupported(t)
	r := region(t, 0xee)
	doorbell.Store64BE(r.Pointer(8), 0x0102030405060708)
	b := r.Bytes()
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8}; !bytes.Equal(b[8:16], want) {
		t.Errorf("bytes 8..15 = % x, want % x", b[8:16], want)
	}
	untouched(t, b, 8, 16, 0xee)

	doorbell.Store64BE(r.Pointer(r.Len()-8), 0xfedcba9876543210)
	if want := []byte{0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}; !bytes.Equal(b[r.Len()-8:], want) {
		t.Errorf("last 8 bytes = % x, want % x", b[r.Len()-8:], want)
	}
}

func TestStore32BE(t *testing.T) {
	requireSupported(t)
	r := region(t, 0xee)
	doorbell.Store32BE(r.Pointer(4), 0xa1b2c3d4)
	b := r.Bytes()
	if want := []byte{0xa1, 0xb2, 0xc3, 0xd4}; !bytes.Equal(b[4:8], want) {
		t.Errorf("bytes 4..7 = % x, want % x", b[4:8], want)
	}
	untouched(t, b, 4, 8, 0xee)

	// mlx5's CQ doorbell record: [0] = BE32(consumer index).
	doorbell.Store32BE(r.Pointer(64), 0x00000102)
	if want := []byte{0, 0, 1, 2}; !bytes.Equal(b[64:68], want) {
		t.Errorf("bytes 64..67 = % x, want % x", b[64:68], want)
	}
}

// TestStoreRecord: the word holds v most significant byte first in memory,
// and its neighbours are untouched.
func TestStoreRecord(t *testing.T) {
	w := [3]uint32{0xeeeeeeee, 0xeeeeeeee, 0xeeeeeeee}
	doorbell.StoreRecord(&w[1], 0xa1b2c3d4)
	b := binary.NativeEndian.AppendUint32(nil, w[1])
	if want := []byte{0xa1, 0xb2, 0xc3, 0xd4}; !bytes.Equal(b, want) {
		t.Errorf("record bytes = % x, want % x", b, want)
	}
	if w[0] != 0xeeeeeeee || w[2] != 0xeeeeeeee {
		t.Errorf("neighbours changed: %#x %#x", w[0], w[2])
	}
}

func TestCopy64(t *testing.T) {
	requireSupported(t)
	// CopyWC64 copies as Copy64 does, between its two flushes.
	for name, copy64 := range map[string]func(dst *mmap.Region, off int, src *mmap.Region){
		"Copy64":   func(d *mmap.Region, off int, s *mmap.Region) { doorbell.Copy64(d.Pointer(off), s.Pointer(128)) },
		"CopyWC64": func(d *mmap.Region, off int, s *mmap.Region) { doorbell.CopyWC64(d.Pointer(off), s.Pointer(128)) },
	} {
		src := region(t, 0x55)
		dst := region(t, 0xaa)
		sb := src.Bytes()
		for i := range 64 {
			sb[128+i] = byte(i + 1)
		}
		for _, off := range []int{0, 64, 192, dst.Len() - 64} {
			copy64(dst, off, src)
			db := dst.Bytes()
			if !bytes.Equal(db[off:off+64], sb[128:192]) {
				t.Fatalf("%s to offset %d: got % x", name, off, db[off:off+64])
			}
			untouched(t, db, off, off+64, 0xaa)
			for i := range db {
				db[i] = 0xaa
			}
		}
		// The source is only read.
		untouched(t, sb, 128, 192, 0x55)
		for i := range 64 {
			if sb[128+i] != byte(i+1) {
				t.Fatalf("%s: source byte %d changed", name, 128+i)
			}
		}
	}
}

func TestBarriers(t *testing.T) {
	requireSupported(t)
	// They have no result to check: they must run without faulting (an
	// instruction the CPU or the assembler got wrong would SIGILL).
	doorbell.ToDevice()
	doorbell.FromDevice()
	doorbell.FlushWC()
}

func TestNoAllocs(t *testing.T) {
	requireSupported(t)
	a, b := region(t, 0), region(t, 1)
	n := testing.AllocsPerRun(100, func() {
		doorbell.ToDevice()
		doorbell.Store32BE(a.Pointer(0), 1)
		doorbell.FlushWC()
		doorbell.Copy64(a.Pointer(64), b.Pointer(0))
		doorbell.Store64BE(a.Pointer(8), 2)
		doorbell.FlushWC()
		doorbell.CopyWC64(a.Pointer(128), b.Pointer(0))
		doorbell.FromDevice()
	})
	if n != 0 {
		t.Errorf("%.1f allocations per doorbell sequence, want 0", n)
	}
}

func TestUnsupportedPanics(t *testing.T) {
	if doorbell.Supported {
		t.Skipf("%s has an implementation; TestUnderQEMU/riscv64 runs this test on the fallback", runtime.GOARCH)
	}
	r := region(t, 0)
	for name, f := range map[string]func(){
		"ToDevice":   doorbell.ToDevice,
		"FromDevice": doorbell.FromDevice,
		"FlushWC":    doorbell.FlushWC,
		"Store64BE":  func() { doorbell.Store64BE(r.Pointer(0), 1) },
		"Store32BE":  func() { doorbell.Store32BE(r.Pointer(0), 1) },
		"Copy64":     func() { doorbell.Copy64(r.Pointer(0), r.Pointer(64)) },
		"CopyWC64":   func() { doorbell.CopyWC64(r.Pointer(0), r.Pointer(64)) },
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, runtime.GOARCH) || !strings.Contains(msg, "Supported") {
					t.Errorf("%s: panic %q, want one naming GOARCH and doorbell.Supported", name, msg)
				}
			}()
			f()
		}()
	}
}

func BenchmarkStore64BE(b *testing.B) {
	if !doorbell.Supported {
		b.Skip("not supported")
	}
	p := region(b, 0).Pointer(64)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		doorbell.Store64BE(p, i)
	}
}

func BenchmarkStore32BE(b *testing.B) {
	if !doorbell.Supported {
		b.Skip("not supported")
	}
	p := region(b, 0).Pointer(64)
	b.ReportAllocs()
	for i := uint32(0); b.Loop(); i++ {
		doorbell.Store32BE(p, i)
	}
}

func BenchmarkToDevice(b *testing.B) {
	if !doorbell.Supported {
		b.Skip("not supported")
	}
	b.ReportAllocs()
	for b.Loop() {
		doorbell.ToDevice()
	}
}

func BenchmarkFromDevice(b *testing.B) {
	if !doorbell.Supported {
		b.Skip("not supported")
	}
	b.ReportAllocs()
	for b.Loop() {
		doorbell.FromDevice()
	}
}

func BenchmarkFlushWC(b *testing.B) {
	if !doorbell.Supported {
		b.Skip("not supported")
	}
	b.ReportAllocs()
	for b.Loop() {
		doorbell.FlushWC()
	}
}

func BenchmarkCopy64(b *testing.B) {
	if !doorbell.Supported {
		b.Skip("not supported")
	}
	dst, src := region(b, 0).Pointer(0), region(b, 1).Pointer(0)
	b.SetBytes(64)
	b.ReportAllocs()
	for b.Loop() {
		doorbell.Copy64(dst, src)
	}
}
