package rigtest

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kmsg is the kernel log device KernelLogWatch reads; a variable so the unit
// test can point it at a file.
var kmsg = "/dev/kmsg"

// KernelLogWatch watches the kernel log from now on: the first record whose
// message contains one of subs is sent on the returned channel (buffered;
// nothing else is ever sent). It stops reading when t ends. It fails t if
// the kernel log cannot be read.
//
// Tests use it where a kernel documents a behaviour only in its log: 5.10's
// rxe says "Failed resending result. This flow is not handled" when it
// cannot send an atomic's ACK, and the requester then never completes.
func KernelLogWatch(t testing.TB, subs ...string) <-chan string {
	t.Helper()
	f, err := os.Open(kmsg)
	if err != nil {
		t.Fatalf("kernel log: %v", err)
	}
	// /dev/kmsg: reading starts at the oldest record; SEEK_END skips to
	// the next one written.
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		t.Fatalf("kernel log: seek to its end: %v", err)
	}
	found := make(chan string, 1)
	var once sync.Once
	stop := func() { once.Do(func() { f.Close() }) }
	t.Cleanup(stop)
	go func() {
		defer stop()
		buf := make([]byte, 8192)
		for {
			// /dev/kmsg gives one record per read, "prio,seq,usec,flags;message\n"
			// and continuation lines starting with a space; a read blocks
			// until there is one (a plain file, in the unit test, ends).
			n, err := f.Read(buf)
			switch {
			case errors.Is(err, syscall.EPIPE):
				continue // records overwritten before we read them
			case err == io.EOF:
				time.Sleep(20 * time.Millisecond)
				continue
			case err != nil:
				return // closed: the test ended
			}
			for _, rec := range strings.Split(string(buf[:n]), "\n") {
				if rec == "" || rec[0] == ' ' {
					continue
				}
				if i := strings.IndexByte(rec, ';'); i >= 0 {
					rec = rec[i+1:]
				}
				for _, s := range subs {
					if strings.Contains(rec, s) {
						found <- rec
						return
					}
				}
			}
		}
	}()
	return found
}
