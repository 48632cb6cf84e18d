package siw

import (
	"fmt"

	"github.com/goverbs/goverbs/provider"
	"github.com/goverbs/goverbs/provider/internal/writedoorbell"
	"golang.org/x/sys/unix"
)

// errDeviceLost is every fast-path call's answer once the device was
// disassociated (Context.DeviceLost).
var errDeviceLost = fmt.Errorf("siw: the device is gone (disassociated; close the context): %w", unix.EIO)

// WRError is a work request refused before anything was posted: the error
// every provider returns (see provider.WRError).
type WRError = provider.WRError

// DoorbellError is a doorbell write the kernel refused after the requests
// were placed in the send queue, and which could not be taken back (the
// kernel already owned some of them): they stay posted. rxe returns the
// same type.
type DoorbellError = writedoorbell.Error
