package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// NullMR is a null memory region (ibv_alloc_null_mr): a local key through
// which a receive or a READ's data is discarded and from which a send
// gathers zeroes, at any address and of any length, without touching
// memory. It has no rkey and no kernel object.
type NullMR struct {
	pd   *PD
	lkey uint32
}

// AllocNullMR returns the PD's null memory region (ibv_alloc_null_mr; no
// syscall). Only mlx5 devices whose kernel reports a dump-fill mkey have
// one; elsewhere (rxe, siw, mlx5 without it) it is refused with
// ErrNotSupported.
func (pd *PD) AllocNullMR() (_ *NullMR, err error) {
	const verb = "AllocNullMR"
	dev := pd.ctx.dev.Name
	if err := pd.use(verb, dev); err != nil {
		return nil, err
	}
	defer pd.done()
	k, ok := pd.ctx.prov.(provider.NullMRKeyer)
	if !ok {
		return nil, opError(verb, dev, abi.TransportNone,
			fmt.Errorf("%w: the %s provider has no null memory region", ErrNotSupported, pd.ctx.dev.Driver))
	}
	lkey, err := k.NullMRKey()
	if err != nil {
		return nil, opError(verb, dev, abi.TransportNone, err)
	}
	return &NullMR{pd: pd, lkey: lkey}, nil
}

// LKey is the null MR's local key.
func (m *NullMR) LKey() uint32 { return m.lkey }

// SGE is a scatter/gather element of n bytes through the null MR (its
// address does not matter).
func (m *NullMR) SGE(n uint32) SGE { return SGE{Length: n, LKey: m.lkey} }

// Close releases the null MR (ibv_dereg_mr of it frees only user memory).
func (m *NullMR) Close() error { return nil }
