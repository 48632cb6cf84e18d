package abi

import (
	"testing"
)

// FuzzIoctlResponse lets a fake kernel write arbitrary bytes back into the
// header, the attributes and the output arena, as a buggy or hostile kernel
// could: decoding the answer (Result, Valid, the copy to the caller's
// outputs) must never panic, and an output is copied only when the kernel
// marked it valid.
func FuzzIoctlResponse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 2, 0, 0, 0}, []byte{1, 2, 3, 4})
	f.Add(make([]byte, 100), []byte{0xff})
	f.Fuzz(func(t *testing.T, hdrAndAttrs, arena []byte) {
		k := &fakeKernel{respond: func(s *seenIoctl, buf []byte) {
			setOutput(buf, 6, arena) // while the pointers are still ours
			// Overwrite everything past the first 8 bytes (length, ids,
			// count) with fuzz data; keep the attribute ids so outputs can
			// be matched.
			for i := 24; i < len(buf); i++ {
				if (i-24)%16 < 2 { // attr_id
					continue
				}
				if len(hdrAndAttrs) > 0 {
					buf[i] = hdrAndAttrs[i%len(hdrAndAttrs)]
				}
			}
		}}
		f := openFake(t, k)
		var out [8]byte
		b := NewIoctl(3, 0)
		h := b.NewObject(0)
		o := b.PtrOut(6, out[:])
		b.Uint32In(1, 7)
		if err := f.Ioctl(b); err != nil {
			t.Fatal(err)
		}
		_ = b.Result(h)
		_ = b.Result(-1)
		if !b.Valid(o) && out != ([8]byte{}) {
			t.Fatalf("output copied although not marked valid: %v", out)
		}
	})
}
