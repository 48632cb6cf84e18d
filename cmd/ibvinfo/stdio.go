package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// cStdout buffers standard output as C's stdio does for ibv_devinfo, so
// that when stdout and stderr share one file (2>&1) the lines interleave
// exactly as ibv_devinfo's do: line-buffered on a terminal, otherwise
// fully buffered in blocks of the file's st_blksize (4096 for pipes and
// most files), flushed when a block fills and at exit. stderr is
// unbuffered: each message is one write.
type cStdout struct {
	w    io.Writer
	buf  []byte
	size int
	line bool
}

// newCStdout wraps f with the buffering glibc would choose for it; w
// receives the writes (f itself in the program).
func newCStdout(f *os.File, w io.Writer) *cStdout {
	s := &cStdout{w: w, size: 4096}
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
func (s *cStdout) Write(p []byte) (int, error) {
	n := len(p)
	if s.line {
		s.buf = append(s.buf, p...)
		if i := strings.LastIndexByte(string(s.buf), '\n'); i >= 0 {
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
func (s *cStdout) Flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	err := s.writeOut(s.buf)
	s.buf = s.buf[:0]
	return err
}

func (s *cStdout) writeOut(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

// printf formats to w (the buffered stdout).
func printf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }

// strerror is glibc's message for an errno: Go's text with its first letter
// capitalised, which is how Go's table was made from glibc's.
func strerror(err error) string {
	var e syscall.Errno
	if !errors.As(err, &e) {
		e = syscall.EIO
	}
	m := e.Error()
	if m == "" {
		return m
	}
	return strings.ToUpper(m[:1]) + m[1:]
}
