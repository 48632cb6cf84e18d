// Package hexaddr reads and writes the QP address messages rdma-core's
// libibverbs examples (ibv_*_pingpong, ibv_xsrq_pingpong) exchange over
// TCP: hexadecimal numbers separated by colons, the first a 16-bit LID,
// the last the GID as 32 hex digits in wire order (gid_to_wire_gid), the
// text NUL-padded to a fixed size. cmd/pingpong and internal/xsrq differ
// only in how many numbers come between.
package hexaddr

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Encode formats s (already "%04x:%06x:..." text without the GID) with
// ":" and the GID's 32 hex digits, NUL-padded to size bytes.
func Encode(size int, s string, gid [16]byte) []byte {
	b := make([]byte, size)
	copy(b, s+":"+hex.EncodeToString(gid[:]))
	return b
}

// Decode parses a message of len(v) numbers and a GID, as the examples'
// sscanf("%x:%x:...:%s") and wire_gid_to_gid do: it fills v (v[0] is the
// LID and must fit in 16 bits, the others in 32) and returns the GID.
func Decode(b []byte, v []uint64) (gid [16]byte, err error) {
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(s, ":")
	if len(f) != len(v)+1 {
		return gid, fmt.Errorf("malformed address message %q", s)
	}
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 32)
		if err != nil {
			return gid, fmt.Errorf("malformed address message %q: %v", s, err)
		}
		v[i] = n
	}
	if len(v) > 0 && v[0] > 0xffff {
		return gid, fmt.Errorf("malformed address message %q: LID out of range", s)
	}
	g, err := hex.DecodeString(f[len(v)])
	if err != nil || len(g) != 16 {
		return gid, fmt.Errorf("malformed address message %q: bad GID", s)
	}
	copy(gid[:], g)
	return gid, nil
}
