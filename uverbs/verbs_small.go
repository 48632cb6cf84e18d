package uverbs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// IncRKey returns rkey with its low byte (the key's tag, which the owner
// of a memory window or fast-registration MR picks) incremented, wrapping
// within the byte: the next key to bind a type 2 window or re-register
// with (ibv_inc_rkey). The index in the upper 24 bits stays.
func IncRKey(rkey uint32) uint32 {
	return rkey&^0xff | (rkey+1)&0xff
}

// PKeyIndex returns the index of pkey in port's P_Key table
// (ibv_get_pkey_index): the table is read entry by entry (QueryPKey, from
// sysfs) until pkey is found, comparing all 16 bits (the membership bit
// too). A pkey the table does not hold is an error for which
// errors.Is(err, unix.ENOENT) holds.
func (c *Context) PKeyIndex(port int, pkey uint16) (int, error) {
	for i := 0; ; i++ {
		p, err := c.QueryPKey(port, i)
		switch {
		case err != nil && i > 0 && errors.Is(err, unix.EINVAL):
			return -1, &OpError{Verb: "PKeyIndex", Device: c.dev.Name,
				Err: fmt.Errorf("%w: P_Key %#04x is not in port %d's table (%d entries)", unix.ENOENT, pkey, port, i)}
		case err != nil:
			return -1, err
		case p == pkey:
			return i, nil
		}
	}
}
