package rdmacm

// TokenHolder says who holds the channel's reader token: "channel" (its own
// goroutine), "waiter" (a call waiting for an event) or "none".
func TokenHolder(ch *EventChannel) string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.bgReading:
		return "channel"
	case ch.reading:
		return "waiter"
	}
	return "none"
}
