// Package writedoorbell is the send doorbell of the providers whose kernel
// driver runs the send queue in software (rxe and siw): a write() to the
// uverbs command file of a legacy POST_SEND with no work requests. Both
// kernels map the send queue to user space and refuse work requests in the
// command; an empty one makes the driver look at the queue (rxe runs the
// QP's requester, siw starts its send processing if it is idle). The
// command is built once per QP; ringing it allocates nothing.
//
// Error is what PostSend returns when the kernel refused the doorbell after
// the requests were placed in the queue; each provider's doc says when the
// kernel processes them.
//
// It owns the command's bytes and that error, and imports abi only.
package writedoorbell

import "fmt"

// Error is a doorbell write the kernel refused after the requests were
// placed in the send queue, and which the provider could not take back:
// they stay posted.
type Error struct {
	Provider string // "rxe", "siw"
	Posted   int    // requests placed in the queue by this call
	Err      error
}

// Error names the provider, how many requests were placed and the doorbell's failure.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: PostSend: %d work requests placed in the send queue, but the doorbell write failed: %v", e.Provider, e.Posted, e.Err)
}

// Unwrap returns the doorbell write's error, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }
