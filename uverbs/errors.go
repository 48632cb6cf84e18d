package uverbs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
	"golang.org/x/sys/unix"
)

// ErrNotSupported is returned for what the device, its provider or the
// running kernel cannot do. errors.Is(err, ErrNotSupported) works on every
// error that means it.
var ErrNotSupported = provider.ErrNotSupported

// ErrClosed is returned by a verb on an object that was closed. It is
// provider.ErrClosed, so fast-path errors match it too.
var ErrClosed = provider.ErrClosed

// OpError is a verb that failed: which verb, on which device, how it went
// to the kernel, and why. errors.Is(err, unix.EINVAL) reaches the errno.
type OpError struct {
	Verb      string           // "CreateCQ", "RegMR", …
	Device    string           // kernel device name
	Transport CommandTransport // how the command went (none: refused before any syscall)
	Err       error            // the errno, or a goverbs error
	Advice    string           // what to do about it, when the cause is known
}

// Error names the verb, the device, the transport and the cause, with advice when there is any.
func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("uverbs: ")
	b.WriteString(e.Verb)
	if e.Device != "" {
		b.WriteString(" on ")
		b.WriteString(e.Device)
	}
	if e.Transport != CommandNone {
		fmt.Fprintf(&b, " (%s)", e.Transport)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Advice != "" {
		b.WriteString(": ")
		b.WriteString(e.Advice)
	}
	return b.String()
}

// Unwrap returns the errno or goverbs error, for errors.Is and errors.As.
func (e *OpError) Unwrap() error { return e.Err }

// opError wraps err for verb, adding advice for causes we recognise. It
// inlines: a command that succeeded pays a compare, not a call.
func opError(verb, dev string, tr abi.Transport, err error) error {
	if err == nil {
		return nil
	}
	return newOpError(verb, dev, tr, err)
}

// newOpError is opError for an error.
func newOpError(verb, dev string, tr abi.Transport, err error) error {
	e := &OpError{Verb: verb, Device: dev, Transport: CommandTransport(tr), Err: err}
	switch {
	case verb == "Open" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV)):
		e.Advice = "the device is gone (removed, or its driver unloaded); list the devices again with Devices()"
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.EIO) && tr != abi.TransportNone:
		e.Advice = "the device is gone (removed, or its driver unloaded); close the context and open the device again"
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		e.Advice = "out of file descriptors (a context holds two, a completion channel one): close some, or raise RLIMIT_NOFILE (ulimit -n)"
	case errors.Is(err, unix.EACCES) && tr == abi.TransportWrite:
		// uverbs_write refuses callers whose credentials are not the
		// opener's (ib_safe_file_access in rdma/ib.h); ioctl does not.
		e.Advice = "the kernel refuses write() commands from credentials other than the opener's (setuid, capset or setgroups after Open, or a thread that changed them); open the device after changing credentials"
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		if !errors.Is(err, ErrNotSupported) {
			e.Err = fmt.Errorf("%w (%w)", ErrNotSupported, err)
		}
	case verb == "RegMR" || verb == "ReregMR":
		if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EFAULT) {
			e.Advice = memlockAdvice()
		}
	}
	return e
}

// memlockAdvice explains RLIMIT_MEMLOCK, the usual cause of a registration
// refused with ENOMEM or EPERM.
func memlockAdvice() string {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &l) != nil {
		return "registration pins pages against RLIMIT_MEMLOCK; raise it with ulimit -l"
	}
	if l.Cur == unix.RLIM_INFINITY {
		return "RLIMIT_MEMLOCK is unlimited, so the kernel refused for another reason (check the buffer is mapped and the access flags)"
	}
	return fmt.Sprintf("RLIMIT_MEMLOCK is %s; registration pins pages against it: raise it with ulimit -l (or LimitMEMLOCK= in a systemd unit)", sizeString(l.Cur))
}

func sizeString(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// argError is a verb refused before any syscall because of bad input.
func argError(verb, dev, format string, args ...any) error {
	return &OpError{Verb: verb, Device: dev, Err: fmt.Errorf("%w: %s", unix.EINVAL, fmt.Sprintf(format, args...))}
}
