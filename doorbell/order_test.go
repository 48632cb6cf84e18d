package doorbell_test

import (
	"testing"

	"github.com/goverbs/goverbs/doorbell"
)

// publish is a post's shape in miniature: a WQE word, the barrier, then the
// doorbell-record word. TestToDeviceOrder reads its amd64 code.
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
