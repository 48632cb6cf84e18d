package rxe

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// CreateSRQ prepares an SRQ: no driver input; the answer is struct
// rxe_create_srq_resp {mmap info, srq_num}.
func (c *Context) CreateSRQ(a provider.SRQAttr) (provider.Setup[provider.SRQCreated, provider.SRQ], error) {
	return &provider.SetupFunc[provider.SRQCreated, provider.SRQ]{
		Out: make([]byte, len(abi.Bytes(new(abi.RxeCreateSrqResp)))),
		Done: func(cr provider.SRQCreated, out []byte) (provider.SRQ, error) {
			var resp abi.RxeCreateSrqResp
			copy(abi.Bytes(&resp), out)
			q, err := mapQueue(c.f, "shared receive", resp.Mi, recvWQESize+sgeSize)
			if err != nil {
				return nil, err
			}
			return &SRQ{rq: newRecvQueue(q, cr.MaxSGE), num: resp.SrqNum}, nil
		},
	}, nil
}

// SRQ is an rxe shared receive queue. PostRecv is safe for concurrent use.
//
// Resizing (MODIFY_SRQ with IB_SRQ_MAX_WR) is not supported: the kernel
// answers EFAULT and leaves the queue as it was; changing the limit works.
type SRQ struct {
	rq  *recvQueue
	num uint32
}

var _ provider.SRQ = (*SRQ)(nil)

// Num is the SRQ number the kernel reported.
func (s *SRQ) Num() uint32 { return s.num }

// PostRecv checks every request, then copies them into the queue and
// publishes the producer index once. No syscall.
func (s *SRQ) PostRecv(wrs []provider.RecvWR) (int, error) {
	if isOne(wrs) && s.rq.postOne(&wrs[0]) {
		return 1, nil
	}
	return s.rq.post("PostSRQRecv", wrs)
}

// Close unmaps the queue, after the kernel SRQ is destroyed.
func (s *SRQ) Close() error { return s.rq.close() }
