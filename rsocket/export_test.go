package rsocket

import (
	"net"
	"time"
)

// SetTestHookBeforeCM sets the hook that runs between a drain of a
// connection's CQ and its look at the CM (nil: none). Tests only; set it
// while no connection is in use.
func SetTestHookBeforeCM(f func(net.Conn)) {
	if f == nil {
		testHookBeforeCM = nil
		return
	}
	testHookBeforeCM = func(c *Conn) { f(c) }
}

// SetSpin sets how long waiters poll before parking; it returns the old
// value.
func SetSpin(d time.Duration) time.Duration {
	return time.Duration(spinTime.Swap(int64(d)))
}
