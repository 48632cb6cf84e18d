package mmap

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestViews(t *testing.T) {
	r := mustAnonymous(t, PageSize(), Options{})
	b := r.Bytes()

	u32 := r.Uint32(8)
	u32.Store(0xdeadbeef)
	if got := binary.NativeEndian.Uint32(b[8:]); got != 0xdeadbeef {
		t.Errorf("Uint32 store: bytes read %#x", got)
	}
	binary.NativeEndian.PutUint32(b[12:], 7)
	if got := r.Uint32(12).Load(); got != 7 {
		t.Errorf("Uint32 load = %d, want 7", got)
	}
	if r.Uint32(12).Add(1) != 8 || r.Uint32(r.Len()-4).CompareAndSwap(0, 1) != true {
		t.Error("Uint32 Add/CompareAndSwap")
	}

	u64 := r.Uint64(16)
	u64.Store(0x0102030405060708)
	if got := binary.NativeEndian.Uint64(b[16:]); got != 0x0102030405060708 {
		t.Errorf("Uint64 store: bytes read %#x", got)
	}
	if got := r.Uint64(r.Len() - 16).Load(); got != 0 {
		t.Errorf("Uint64 near the end = %#x", got)
	}

	if uintptr(r.Pointer(0)) != r.Addr() || uintptr(r.Pointer(r.Len()-1)) != r.Addr()+uintptr(r.Len()-1) {
		t.Error("Pointer does not match Addr")
	}
}

func TestViewsAllocateNothing(t *testing.T) {
	r := mustAnonymous(t, PageSize(), Options{})
	var sink uint64
	n := testing.AllocsPerRun(100, func() {
		r.Uint32(4).Add(1)
		r.Uint64(8).Store(r.Uint64(8).Load() + 1)
		sink += uint64(uintptr(r.Pointer(100)))
	})
	if n != 0 {
		t.Errorf("views allocate %.1f times per run, want 0", n)
	}
	_ = sink
}

func TestViewsPanicOnMisuse(t *testing.T) {
	r := mustAnonymous(t, PageSize(), Options{})
	end := r.Len()
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"Uint32 misaligned", "4-byte aligned", func() { r.Uint32(2) }},
		{"Uint64 misaligned", "8-byte aligned", func() { r.Uint64(4) }},
		{"Uint32 past end", "do not fit", func() { r.Uint32(end - 2) }},
		{"Uint64 at end", "do not fit", func() { r.Uint64(end) }},
		{"Uint64 negative", "do not fit", func() { r.Uint64(-8) }},
		{"Pointer at end", "do not fit", func() { r.Pointer(end) }},
		{"Pointer negative", "do not fit", func() { r.Pointer(-1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "mmap: ") {
					t.Errorf("panic %q, want one mentioning %q", msg, tc.want)
				}
			}()
			tc.f()
		})
	}

	c, err := Anonymous(PageSize())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "closed") {
			t.Errorf("view after Close: panic %q, want one saying the region is closed", msg)
		}
	}()
	c.Uint32(0)
}
