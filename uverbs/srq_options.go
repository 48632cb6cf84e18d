package uverbs

// SRQAttr is a shared receive queue's attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR  uint32 // receives the SRQ holds
	MaxSGE uint32 // SGEs per receive (Query only)
	// Limit is the limit event's threshold: when fewer than Limit
	// receives are posted, an EventSRQLimitReached async event fires once
	// (0: off).
	Limit uint32
}

// Modify changes the attributes mask names (MODIFY_SRQ: one syscall):
// SRQAttrMaxWR resizes the SRQ (devices with DeviceSRQResize),
// SRQAttrLimit arms the limit event.
func (srq *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	return srq.modify(attr.MaxWR, attr.Limit, mask)
}

// Query returns the SRQ's attributes (QUERY_SRQ: one syscall). Limit is 0
// once the limit event has fired.
func (srq *SRQ) Query() (SRQAttr, error) {
	maxWR, maxSGE, limit, err := srq.query()
	return SRQAttr{MaxWR: maxWR, MaxSGE: maxSGE, Limit: limit}, err
}
