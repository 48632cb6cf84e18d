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

// SetTestHookAccepted sets the hook that runs in Accept once the CM
// reported a connection ESTABLISHED, before Accept starts and checks it;
// the hook gets the connection's CM Done channel (nil: no hook). Tests
// only; set it while no Accept is in progress.
func SetTestHookAccepted(f func(done <-chan struct{})) {
	if f == nil {
		testHookAccepted = nil
		return
	}
	testHookAccepted = func(c *Conn) { f(c.rc.Done()) }
}

// Abort disconnects c at the CM without rsocket's DISCONNECT message, as
// a peer that gives up on the connection or dies does: the QPs go to the
// error state and both sides get DISCONNECTED.
func Abort(c net.Conn) error { return c.(*Conn).rc.Disconnect() }

// Lingered says how Close's iWARP linger ended ("" if Close did not get
// that far, e.g. not on iWARP).
func Lingered(c net.Conn) string {
	cc := c.(*Conn)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.lingered
}

// Transfers is how many data transfers c has sent (rsocket's send
// sequence number, which counts them and nothing else).
func Transfers(c net.Conn) uint16 {
	cc := c.(*Conn)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.sseqNo
}
