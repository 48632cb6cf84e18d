package siw

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// CreateSRQ prepares an SRQ: no driver input; the answer is struct
// siw_uresp_create_srq {num_rqe, srq_key}, a ring of siw_rqe entries.
func (c *Context) CreateSRQ(a provider.SRQAttr) (provider.Setup[provider.SRQCreated, provider.SRQ], error) {
	return &provider.SetupFunc[provider.SRQCreated, provider.SRQ]{
		Out: make([]byte, len(abi.Bytes(new(abi.SiwUrespCreateSrq)))),
		Done: func(cr provider.SRQCreated, out []byte) (provider.SRQ, error) {
			var resp abi.SiwUrespCreateSrq
			copy(abi.Bytes(&resp), out)
			r, err := mapRing(c.f, "shared receive queue", resp.SrqKey, resp.NumRqe, rqeSize, 0)
			if err != nil {
				return nil, err
			}
			return &SRQ{rq: &recvQueue{c: c, r: r, maxSGE: min(cr.MaxSGE, abi.SIW_MAX_SGE)}}, nil
		},
	}, nil
}

// SRQ is a siw shared receive queue. PostRecv is safe for concurrent use.
type SRQ struct {
	rq *recvQueue
}

var _ provider.SRQ = (*SRQ)(nil)

// PostRecv writes the requests into the ring (see recvQueue.post). No
// syscall.
func (s *SRQ) PostRecv(wrs []provider.RecvWR) (int, error) {
	return s.rq.post("PostSRQRecv", wrs, nil)
}

// Close unmaps the ring, after the kernel SRQ is destroyed.
func (s *SRQ) Close() error { return s.rq.close() }
