package rxe

import (
	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
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
// the error state). siw returns the same type.
type DoorbellError = writedoorbell.Error
