package rsocket

import "net"

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
