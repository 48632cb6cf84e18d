package uverbs

import (
	"sync"

	"github.com/goverbs/goverbs/abi"
)

// destroyer is the close state every kernel object shares: Close is
// idempotent, and a failed destroy (EBUSY while in use) leaves the object
// open and usable, so the caller can release what holds it and retry.
type destroyer struct {
	mu     sync.Mutex
	closed bool
}

// close runs destroy once successfully; later calls return nil.
func (d *destroyer) close(destroy func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	if err := destroy(); err != nil {
		return err
	}
	d.closed = true
	return nil
}

func (d *destroyer) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// destroyObject destroys a kernel object by its ioctl DESTROY method (the
// method's handle attribute is id 0 for every object), with the legacy
// write command as fallback. resp, if not empty, receives the destroy
// response (event counts) through attribute respAttr or the write response.
func (c *Context) destroyObject(verb string, object, method uint16, handle uint32, respAttr uint16, resp []byte, write *abi.Command) error {
	b := abi.NewIoctl(object, method)
	b.Handle(0, handle)
	if len(resp) > 0 {
		b.PtrOut(respAttr, resp)
	}
	_, err := c.ioctl(verb, b, func() error {
		err := c.fallback(verb, write)
		copy(resp, write.Out)
		return err
	})
	return err
}
