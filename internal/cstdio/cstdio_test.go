package cstdio

import (
	"fmt"
	"testing"
)

// TestFullBlocks: a fully buffered stdout writes 4096-byte blocks, and
// a block that fills up exactly waits for the next write.
func TestFullBlocks(t *testing.T) {
	var writes []int
	w := writerFunc(func(p []byte) (int, error) { writes = append(writes, len(p)); return len(p), nil })
	s := New(nil, w)
	s.Write(make([]byte, 4000))
	s.Write(make([]byte, 96))
	if len(writes) != 0 {
		t.Fatalf("full buffer written before the next write: %v", writes)
	}
	s.Write(make([]byte, 10))
	s.Write(make([]byte, 9000))
	s.Flush()
	if want := []int{4096, 4096, 4096, 818}; fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
