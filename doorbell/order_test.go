package doorbell_test

import (
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/doorbell"
)

// publish is a post's shape in miniature: a WQE word, the barrier, then the
// doorbell-record word. TestInlinedOrder reads its amd64 code.
//
//go:noinline
func publish(p *[2]uint32) {
	p[0] = 0x11
	doorbell.ToDevice()
	p[1] = 0x22
}

func TestPublish(t *testing.T) {
	requireSupported(t)
	var p [2]uint32
	publish(&p)
	if p != [2]uint32{0x11, 0x22} {
		t.Errorf("publish stored %#x", p)
	}
}

// release is a queue's publication in miniature: an entry word, then the
// index word through Publish32. TestInlinedOrder reads its amd64 code.
//
//go:noinline
func release(entry *uint32, index *atomic.Uint32) {
	*entry = 0x33
	doorbell.Publish32(index, 0x44)
}

func TestPublish32(t *testing.T) {
	var entry uint32
	var index atomic.Uint32
	release(&entry, &index)
	if entry != 0x33 || index.Load() != 0x44 {
		t.Errorf("release stored %#x, %#x", entry, index.Load())
	}
}
