// Package inet formats addresses the way glibc does, for the tools whose
// output must match rdma-core's byte for byte (ibvinfo's GID lines, the
// addresses pingpong prints).
//
// It imports nothing of goverbs.
package inet

import (
	"strconv"
	"strings"
)

// Ntop6 formats an IPv6 address exactly as glibc's inet_ntop(AF_INET6)
// does, which ibv_devinfo uses for RoCE v2 GIDs. It differs from Go's
// netip in two places: "::a.b.c.d" for an address whose first 96 bits are
// zero (IPv4-compatible, with a non-zero word 6), and the choice among
// equally long runs of zero words (the first wins in both, but glibc does
// not compress a lone zero word either, so they agree there).
func Ntop6(a [16]byte) string {
	var w [8]int
	for i := range w {
		w[i] = int(a[2*i])<<8 | int(a[2*i+1])
	}
	// The longest run of zero words, first if tied; runs of one word are
	// not compressed.
	bestBase, bestLen, curBase, curLen := -1, 0, -1, 0
	for i := 0; i < 8; i++ {
		if w[i] == 0 {
			if curBase == -1 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase != -1 {
			if bestBase == -1 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase != -1 && (bestBase == -1 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase != -1 && bestLen < 2 {
		bestBase = -1
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase != -1 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			b.WriteString(strconv.Itoa(int(a[12])) + "." + strconv.Itoa(int(a[13])) + "." +
				strconv.Itoa(int(a[14])) + "." + strconv.Itoa(int(a[15])))
			return b.String()
		}
		b.WriteString(strconv.FormatInt(int64(w[i]), 16))
	}
	if bestBase != -1 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}
