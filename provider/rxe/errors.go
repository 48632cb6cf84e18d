package rxe

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

var errInvalid = unix.EINVAL

// WRError is a work request refused before anything was posted: the
// error every provider returns (see provider.WRError). errors.Is works on
// the errno the kernel or librxe would have returned for the same request
// (EINVAL for a malformed request or a QP not ready to send, ENOMEM for a
// full queue), on provider.ErrNotSupported for requests rxe cannot carry
// and on provider.ErrClosed for a closed queue.
type WRError = provider.WRError

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
