package rsocket_test

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// TestRigDeadlinesMovedWhileWaiting is nettest's ConcurrentMethods made
// sharp: for 200 ms Reads and Writes keep waiting on the CQ while other
// goroutines keep moving the deadlines a millisecond or two ahead, then the
// deadline is cleared and the connection must work. A wait ended by a
// deadline that SetDeadline has moved on since is a timeout, never a broken
// connection. When it was taken for one (CI, 6.12), every later call failed
// with "context deadline exceeded": nettest's single run caught that in 26
// of 150 runs, this test in 3 of 3 (6.12, before the fix).
func TestRigDeadlinesMovedWhileWaiting(t *testing.T) {
	rigtest.Require(t)
	l := listener(t, rsocket.Config{})
	const rounds, goroutines = 10, 4
	for r := range rounds {
		c1, c2, err := connect(l)
		if err != nil {
			t.Fatal(err)
		}
		echoed := make(chan error, 1)
		go func() { _, err := io.Copy(c2, c2); echoed <- err }()
		// For a while, Reads and Writes keep waiting on the CQ while
		// setters keep moving deadlines a millisecond or two ahead: waits
		// end by deadlines that are moved on at once.
		stop := time.Now().Add(200 * time.Millisecond)
		var wg sync.WaitGroup
		loop := func(f func(i int)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					f(i)
				}
			}()
		}
		for range goroutines {
			loop(func(int) { c1.Read(make([]byte, 1024)) })  //nolint:errcheck // timeouts expected
			loop(func(int) { c1.Write(make([]byte, 1024)) }) //nolint:errcheck // timeouts expected
			loop(func(i int) { c1.SetDeadline(time.Now().Add(time.Duration(i%3) * time.Millisecond)) })
			loop(func(i int) { c1.SetReadDeadline(time.Now().Add(time.Duration(i%2) * time.Millisecond)) })
			loop(func(i int) { c1.SetWriteDeadline(time.Now().Add(time.Duration(i%2) * time.Millisecond)) })
		}
		wg.Wait()
		// The connection must work again once the deadline is cleared: the
		// echo returns all it was sent, the marker last.
		if err := c1.SetDeadline(time.Time{}); err != nil {
			t.Fatalf("round %d: SetDeadline: %v", r, err)
		}
		wrote := make(chan error, 1)
		go func() { _, err := c1.Write([]byte{0xff}); wrote <- err }()
		watchdog := time.AfterFunc(30*time.Second, func() { c1.Close(); c2.Close() })
		buf := make([]byte, 4096)
		for {
			n, err := c1.Read(buf)
			if n > 0 && bytes.IndexByte(buf[:n], 0xff) == n-1 {
				break
			}
			if err != nil {
				t.Fatalf("round %d: Read after the deadline was cleared: %v", r, err)
			}
		}
		if err := <-wrote; err != nil {
			t.Fatalf("round %d: Write after the deadline was cleared: %v", r, err)
		}
		watchdog.Stop()
		c1.Close()
		<-echoed
		c2.Close()
	}
}
