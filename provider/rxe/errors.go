package rxe

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var errInvalid = unix.EINVAL

// WRError is a work request refused before anything was posted: the whole
// list is left unposted and the queue is exactly as it was. errors.Is works
// on the errno the kernel or librxe would have returned for the same request
// (EINVAL for a malformed request or a QP not ready to send, ENOMEM for a
// full queue), and on provider.ErrNotSupported for requests rxe cannot carry.
type WRError struct {
	Op     string // "PostSend", "PostRecv", "SRQ PostRecv"
	Index  int    // index of the refused request in the list
	Opcode provider.WROpcode
	Recv   bool // a receive request (Opcode is meaningless)
	Cause  string
	Err    error
}

func (e *WRError) Error() string {
	if e.Recv {
		return fmt.Sprintf("rxe: %s: work request %d: %s (nothing posted)", e.Op, e.Index, e.Cause)
	}
	return fmt.Sprintf("rxe: %s: work request %d (%v): %s (nothing posted)", e.Op, e.Index, e.Opcode, e.Cause)
}

func (e *WRError) Unwrap() error { return e.Err }

// DoorbellError is a doorbell write the kernel refused after the requests
// were placed in the send queue: they stay posted and the kernel processes
// them at the next doorbell of this QP (or flushes them if it is moved to
// the error state).
type DoorbellError struct {
	Posted int // requests placed in the queue by this call
	Err    error
}

func (e *DoorbellError) Error() string {
	return fmt.Sprintf("rxe: PostSend: %d work requests placed in the send queue, but the doorbell write failed: %v", e.Posted, e.Err)
}

func (e *DoorbellError) Unwrap() error { return e.Err }
