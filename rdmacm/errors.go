package rdmacm

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/goverbs/goverbs/uverbs"
)

// ErrClosed is returned by an operation on a closed channel, ID,
// connection or listener, and wakes the calls blocked on one that is
// being closed. It is uverbs.ErrClosed.
var ErrClosed = uverbs.ErrClosed

// ErrDisconnected is returned by calls blocked on a connection when a
// DISCONNECTED event arrives for it (the peer disconnected or died).
var ErrDisconnected = errors.New("rdmacm: disconnected")

// ErrDeviceRemoved is returned by calls blocked on an ID when a
// DEVICE_REMOVAL event arrives for it: close it, so the device can go.
var ErrDeviceRemoved = errors.New("rdmacm: device removed")

// OpError is an rdma_cm operation that failed: which, and why.
// errors.Is(err, unix.ECONNREFUSED) and the like reach the errno.
type OpError struct {
	Op  string // "ResolveAddr", "Connect", …
	Err error
}

// Error names the operation and its cause.
func (e *OpError) Error() string { return "rdmacm: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

func opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Err: err}
}

// EventError is an operation answered by an event that says it failed:
// ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, CONNECT_ERROR, REJECTED,
// MULTICAST_ERROR. errors.Is(err, unix.ETIMEDOUT) matches the event's
// status when it is an errno.
type EventError struct {
	Event Event
}

// Error names the failing event and, when it has them, its reason, status and private data.
func (e *EventError) Error() string {
	s := fmt.Sprintf("%v event", e.Event.Type)
	switch {
	case e.Event.Type == EventRejected:
		s += fmt.Sprintf(", reason %d", e.Event.Status)
		if len(e.Event.PrivateData) > 0 {
			s += fmt.Sprintf(", %d bytes of private data", len(e.Event.PrivateData))
		}
	case e.Event.Status < 0:
		s += ": " + syscall.Errno(-e.Event.Status).Error()
	case e.Event.Status > 0:
		s += fmt.Sprintf(", status %d", e.Event.Status)
	}
	return s
}

// Unwrap returns the errno of a negative status (nil otherwise).
func (e *EventError) Unwrap() error {
	if e.Event.Status < 0 && e.Event.Type != EventRejected {
		return syscall.Errno(-e.Event.Status)
	}
	return nil
}

// Rejected reports whether err is a connection rejected by the peer (a
// REJECTED event), and returns that event: its Reason and PrivateData.
func Rejected(err error) (Event, bool) {
	var ee *EventError
	if errors.As(err, &ee) && ee.Event.Type == EventRejected {
		return ee.Event, true
	}
	return Event{}, false
}
