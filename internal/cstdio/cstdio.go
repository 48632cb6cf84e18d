// Package cstdio gives a Go command the standard output buffering of C's
// stdio, for commands that stand in for rdma-core's C tools:
//
//   - their output interleaves with stderr's (2>&1) as the C tool's does;
//   - a fully buffered stdout (a pipe, a file) makes no write(2) until a
//     block fills or the program ends. A write is an ordinary syscall to
//     Go's runtime, and one made just before a measured loop (perftest's
//     banner and table header) wakes the runtime's monitor out of its deep
//     sleep into naps and 10 ms preemptions of the loop's spinning
//     goroutine (docs/COST.md, session 48); C's printf into its buffer
//     makes no syscall there.
package cstdio

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Stdout buffers standard output as C's stdio does: line-buffered on a
// terminal, otherwise fully buffered in blocks of the file's st_blksize
// (4096 for pipes and most files), flushed when a block fills and at exit
// (the program calls Flush). It is not safe for concurrent use.
type Stdout struct {
	w    io.Writer
	buf  []byte
	size int
	line bool
}

// New wraps f with the buffering glibc would choose for it; w receives
// the writes (f itself in a program; nil f: fully buffered in 4096-byte
// blocks).
func New(f *os.File, w io.Writer) *Stdout {
	s := &Stdout{w: w, size: 4096}
	if f == nil {
		return s
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		s.line, s.size = true, 1024
		return s
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Blksize > 0 {
		s.size = int(st.Blksize)
	}
	return s
}

// Write appends p, writing out full blocks as glibc's fwrite does: fill
// the buffer, flush it, write whole blocks of what remains directly, keep
// the tail.
func (s *Stdout) Write(p []byte) (int, error) {
	n := len(p)
	if s.line {
		s.buf = append(s.buf, p...)
		if i := bytes.LastIndexByte(s.buf, '\n'); i >= 0 {
			if err := s.writeOut(s.buf[:i+1]); err != nil {
				return 0, err
			}
			s.buf = append(s.buf[:0], s.buf[i+1:]...)
		}
		return n, nil
	}
	room := s.size - len(s.buf)
	if len(p) <= room {
		// Even a buffer this fills up exactly is written out only by the
		// next write, or at exit.
		s.buf = append(s.buf, p...)
		return n, nil
	}
	s.buf = append(s.buf, p[:room]...)
	p = p[room:]
	if err := s.Flush(); err != nil {
		return 0, err
	}
	if whole := len(p) - len(p)%s.size; whole > 0 {
		if err := s.writeOut(p[:whole]); err != nil {
			return 0, err
		}
		p = p[whole:]
	}
	s.buf = append(s.buf, p...)
	return n, nil
}

// Flush writes out what is buffered.
func (s *Stdout) Flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	err := s.writeOut(s.buf)
	s.buf = s.buf[:0]
	return err
}

func (s *Stdout) writeOut(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

// Run runs a command's body with os.Stdout buffered as C's stdio would
// buffer it, then writes out what is left (C's exit does the same) and
// returns the body's exit status.
func Run(body func(stdout io.Writer) int) int {
	out := New(os.Stdout, os.Stdout)
	code := body(out)
	out.Flush() //nolint:errcheck // as C's exit, which reports nothing either
	return code
}
