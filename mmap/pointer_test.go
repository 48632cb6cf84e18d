package mmap

import (
	"strings"
	"testing"
)

func TestPointer(t *testing.T) {
	r := mustAnonymous(t, PageSize(), Options{})
	if uintptr(r.Pointer(0)) != r.Addr() || uintptr(r.Pointer(r.Len()-1)) != r.Addr()+uintptr(r.Len()-1) {
		t.Error("Pointer does not match Addr")
	}
}

func TestPointerAllocatesNothing(t *testing.T) {
	r := mustAnonymous(t, PageSize(), Options{})
	var sink uintptr
	if n := testing.AllocsPerRun(100, func() { sink += uintptr(r.Pointer(100)) }); n != 0 {
		t.Errorf("Pointer allocates %.1f times per run, want 0", n)
	}
	_ = sink
}

func TestPointerPanicsOnMisuse(t *testing.T) {
	r := mustAnonymous(t, PageSize(), Options{})
	end := r.Len()
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"at end", "outside", func() { r.Pointer(end) }},
		{"negative", "outside", func() { r.Pointer(-1) }},
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
			t.Errorf("Pointer after Close: panic %q, want one saying the region is closed", msg)
		}
	}()
	c.Pointer(0)
}
