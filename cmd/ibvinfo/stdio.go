package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
)

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
