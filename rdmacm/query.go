package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// Path record flags (enum in <rdma/ib_user_sa.h>): what a PathRecord is for.
const (
	PathGMP            = 1 << 0 // usable for management datagrams (the CM's)
	PathPrimary        = 1 << 1
	PathAlternate      = 1 << 2
	PathOutbound       = 1 << 3
	PathInbound        = 1 << 4
	PathInboundReverse = 1 << 5
	PathBidirectional  = PathOutbound | PathInboundReverse
)

// PathRecord is a path the CM resolved for an ID (QUERY PATH): an
// InfiniBand SA PathRecord as the kernel packs it (struct ib_path_rec_data).
// On RoCE the kernel fills it from the route it resolved over IP: the GIDs
// are the source and destination addresses' GIDs, the P_Key 0xffff, and the
// LIDs carry nothing of meaning.
type PathRecord struct {
	Flags                  uint32 // Path* flags
	ServiceID              uint64
	DGID, SGID             [16]byte
	DLID, SLID             uint16
	RawTraffic             bool
	FlowLabel              uint32 // 20 bits
	HopLimit               uint8
	TrafficClass           uint8
	Reversible             bool
	NumbPath               uint8 // 7 bits
	PKey                   uint16
	QoSClass               uint16 // 12 bits
	SL                     uint8  // 4 bits
	MTUSelector, MTU       uint8  // MTU: the IB enum (1: 256 … 5: 4096)
	RateSelector, Rate     uint8  // Rate: the IB enum
	PacketLifeTimeSelector uint8
	PacketLifeTime         uint8 // 4.096 µs × 2^n
	Preference             uint8
}

// pathRecDataSize is sizeof(struct ib_path_rec_data): flags, reserved and
// the 64-byte packed record.
const pathRecDataSize = 72

// decodePathRecord unpacks one struct ib_path_rec_data (IBA's PathRecord
// layout, big-endian, as the kernel's ib_sa_pack_path writes it).
func decodePathRecord(b []byte) (PathRecord, error) {
	if len(b) < pathRecDataSize {
		return PathRecord{}, fmt.Errorf("path record: %d bytes, want %d", len(b), pathRecDataSize)
	}
	var p PathRecord
	p.Flags = binary.NativeEndian.Uint32(b[0:])
	r := b[8:72]
	be := binary.BigEndian
	p.ServiceID = be.Uint64(r[0:])
	copy(p.DGID[:], r[8:24])
	copy(p.SGID[:], r[24:40])
	p.DLID, p.SLID = be.Uint16(r[40:]), be.Uint16(r[42:])
	w := be.Uint32(r[44:])
	p.RawTraffic = w>>31 != 0
	p.FlowLabel = w >> 8 & 0xfffff
	p.HopLimit = uint8(w)
	p.TrafficClass = r[48]
	p.Reversible = r[49]>>7 != 0
	p.NumbPath = r[49] & 0x7f
	p.PKey = be.Uint16(r[50:])
	q := be.Uint16(r[52:])
	p.QoSClass, p.SL = q>>4, uint8(q&0xf)
	p.MTUSelector, p.MTU = r[54]>>6, r[54]&0x3f
	p.RateSelector, p.Rate = r[55]>>6, r[55]&0x3f
	p.PacketLifeTimeSelector, p.PacketLifeTime = r[56]>>6, r[56]&0x3f
	p.Preference = r[57]
	return p, nil
}

// decodeQueryPath reads a QUERY PATH response of n bytes.
func decodeQueryPath(b []byte) ([]PathRecord, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("query path: %d bytes", len(b))
	}
	n := int(binary.NativeEndian.Uint32(b))
	if n > (len(b)-8)/pathRecDataSize {
		return nil, fmt.Errorf("query path: %d paths in %d bytes", n, len(b))
	}
	paths := make([]PathRecord, n)
	for i := range paths {
		p, err := decodePathRecord(b[8+i*pathRecDataSize:])
		if err != nil {
			return nil, err
		}
		paths[i] = p
	}
	return paths, nil
}

// maxPaths is how many paths QueryPath asks for: a primary and an
// alternate (what the kernel's routes hold at most).
const maxPaths = 2

// QueryPath returns the paths the CM resolved for the ID (QUERY with
// RDMA_USER_CM_QUERY_PATH): none before ResolveRoute (or a connection
// request) gave it a route.
func (id *ID) QueryPath() ([]PathRecord, error) {
	out := make([]byte, 8+maxPaths*pathRecDataSize)
	req := abi.RdmaUcmQuery{Id: id.kid, Option: abi.RDMA_USER_CM_QUERY_PATH}
	if err := id.call("QueryPath", abi.RDMA_USER_CM_CMD_QUERY, abi.Bytes(&req), respAtQuery, out); err != nil {
		return nil, err
	}
	p, err := decodeQueryPath(out)
	return p, opError("QueryPath", err)
}

// IBAddr is an AF_IB address (struct sockaddr_ib): a GID, a P_Key and a
// service ID, the form the CM addresses InfiniBand endpoints in.
type IBAddr struct {
	PKey     uint16
	FlowInfo uint32
	GID      [16]byte
	SID      uint64 // service ID: for an IP port space, the space << 16 | the port
	SIDMask  uint64
	ScopeID  uint64
}

// parseSockaddrIB reads a struct sockaddr_ib.
func parseSockaddrIB(b []byte) (IBAddr, error) {
	if len(b) < sizeofSockaddrIB {
		return IBAddr{}, fmt.Errorf("sockaddr_ib: %d bytes", len(b))
	}
	if f := binary.NativeEndian.Uint16(b); f != unix.AF_IB {
		return IBAddr{}, fmt.Errorf("sockaddr_ib: family %d, want AF_IB", f)
	}
	be := binary.BigEndian
	a := IBAddr{PKey: be.Uint16(b[2:]), FlowInfo: be.Uint32(b[4:]), SID: be.Uint64(b[24:]), SIDMask: be.Uint64(b[32:]),
		ScopeID: binary.NativeEndian.Uint64(b[40:])}
	copy(a.GID[:], b[8:24])
	return a, nil
}

// QueryGID returns the ID's source and destination as AF_IB addresses
// (QUERY with RDMA_USER_CM_QUERY_GID): the GIDs the CM uses for its IP
// addresses, the P_Key and the service IDs of their ports.
func (id *ID) QueryGID() (src, dst IBAddr, err error) {
	var resp abi.RdmaUcmQueryAddrResp
	out := abi.Bytes(&resp)
	req := abi.RdmaUcmQuery{Id: id.kid, Option: abi.RDMA_USER_CM_QUERY_GID}
	if err := id.call("QueryGID", abi.RDMA_USER_CM_CMD_QUERY, abi.Bytes(&req), respAtQuery, out); err != nil {
		return IBAddr{}, IBAddr{}, err
	}
	q, err := decodeQueryAddr(out)
	if err == nil {
		src, err = parseSockaddrIB(q.Src)
	}
	if err == nil {
		dst, err = parseSockaddrIB(q.Dst)
	}
	return src, dst, opError("QueryGID", err)
}

// Migrate moves the ID to channel to (MIGRATE_ID, librdmacm's
// rdma_migrate_id): its events, those the kernel still holds too, come
// through to from then on, and the channel it was on may be closed before
// it. A connection request's ID can be moved before Accept, so that the
// connection's events go to a channel of its own; Accept then opens the
// device on to. An ID with a QP (a connection) or multicast groups cannot
// move: its QP belongs to the old channel's device context. Migrate must
// not run while another call on the ID does.
func (id *ID) Migrate(to *EventChannel) error {
	const op = "Migrate"
	from := id.ch
	if to == from {
		return nil
	}
	id.mu.Lock()
	busy := id.qp != nil || len(id.mcasts) > 0
	id.mu.Unlock()
	if busy {
		return opError(op, errors.New("the ID has a QP or multicast groups"))
	}
	// The new channel knows the ID under its uid before the kernel moves
	// it (the uid is unique among channels); the old one keeps it too, for
	// an event its reader may have read just before, until Close. A
	// connection request's ID has no uid before Accept gives it one.
	if id.uid != 0 {
		if err := to.adopt(id.uid, id); err != nil {
			return opError(op, err)
		}
	}
	var resp abi.RdmaUcmMigrateResp
	out := abi.Bytes(&resp)
	req := abi.RdmaUcmMigrateId{Id: id.kid, Fd: uint32(from.Fd())}
	// Under kmu held exclusively: the ID's other commands (id.write) go to
	// the channel it is on, and after Close to none (the kid is not ours).
	id.kmu.Lock()
	err := opError(op, ErrClosed)
	if !id.destroyed {
		err = to.call(op, abi.RDMA_USER_CM_CMD_MIGRATE_ID, abi.Bytes(&req), respAtMigrateID, out)
	}
	if err != nil {
		id.kmu.Unlock()
		if id.uid != 0 {
			to.unregister(id.uid)
		}
		return err
	}
	// The old channel forwards what its reader may still hold, but its
	// Close no longer stops the ID.
	if id.uid != 0 {
		from.adopt(id.uid, moved{id}) //nolint:errcheck // a closed channel delivers nothing more
	}
	id.mu.Lock()
	id.ch = to
	id.formerChs = append(id.formerChs, from)
	hadDev := id.dev != nil
	id.dev = nil
	id.mu.Unlock()
	id.kmu.Unlock()
	if hadDev {
		// The device context is the channel's: open it on to.
		return id.bindDevice(op)
	}
	return nil
}

// moved is a migrated ID as the channel it left sees it: events still
// reach it, the channel's stop does not.
type moved struct{ id *ID }

func (m moved) deliver(ev Event) { m.id.deliver(ev) }
func (m moved) udEvents() bool   { return m.id.udEvents() }
func (m moved) stop(error)       {}

// AF_IB service IDs of the IP port spaces (RDMA_IB_IP_PS_* in
// <rdma/rdma_user_cm.h>): the space in bits 16-31, the port below.
const (
	IBServiceIDTCP  = 0x0000000001060000 // RDMA_IB_IP_PS_TCP
	IBServiceIDUDP  = 0x0000000001110000 // RDMA_IB_IP_PS_UDP
	IBServiceIDIB   = 0x00000000013F0000 // RDMA_IB_IP_PS_IB
	IBServiceIDMask = 0xFFFFFFFFFFFF0000 // RDMA_IB_IP_PS_MASK
)

// putSockaddrIB encodes a as a struct sockaddr_ib into b and returns its
// size.
func putSockaddrIB(b []byte, a IBAddr) int {
	clear(b[:sizeofSockaddrIB])
	be := binary.BigEndian
	binary.NativeEndian.PutUint16(b, unix.AF_IB)
	be.PutUint16(b[2:], a.PKey)
	be.PutUint32(b[4:], a.FlowInfo)
	copy(b[8:24], a.GID[:])
	be.PutUint64(b[24:], a.SID)
	be.PutUint64(b[32:], a.SIDMask)
	binary.NativeEndian.PutUint64(b[40:], a.ScopeID)
	return sizeofSockaddrIB
}

// BindIB binds the ID to an AF_IB address (BIND with a struct
// sockaddr_ib): a GID (zero: any device), a P_Key and a service ID whose
// bits outside SIDMask the kernel fills with a port it picks (QueryGID
// shows it). The kernel takes AF_IB binds whatever its devices are
// (librdmacm probes AF_IB support so). Like Bind, it opens the device the
// kernel bound the ID to, if any.
func (id *ID) BindIB(a IBAddr) error {
	var req abi.RdmaUcmBind
	req.Id = id.kid
	req.AddrSize = uint16(putSockaddrIB(abi.Bytes(&req.Addr), a))
	if err := id.write("BindIB", abi.RDMA_USER_CM_CMD_BIND, abi.Bytes(&req), nil); err != nil {
		return err
	}
	return id.openDevice("BindIB", false)
}

// ResolveAddrIB resolves an AF_IB destination (RESOLVE_ADDR with struct
// sockaddr_ib, then ADDR_RESOLVED), from src if its GID or service ID is
// set: the kernel takes the first port with the AF_IB capability
// (InfiniBand and RoCE, not iWARP) and dst's P_Key that holds dst's GID,
// or a GID of its subnet prefix; ENODEV if none.
func (id *ID) ResolveAddrIB(ctx context.Context, src, dst IBAddr) error {
	var req abi.RdmaUcmResolveAddr
	req.Id = id.kid
	req.TimeoutMs = timeoutMS(ctx)
	if src != (IBAddr{}) {
		req.SrcSize = uint16(putSockaddrIB(abi.Bytes(&req.SrcAddr), src))
	}
	req.DstSize = uint16(putSockaddrIB(abi.Bytes(&req.DstAddr), dst))
	if err := id.write("ResolveAddrIB", abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, abi.Bytes(&req), nil); err != nil {
		return err
	}
	if _, err := id.wait(ctx, "ResolveAddrIB", false, EventAddrResolved); err != nil {
		return err
	}
	return id.bindDevice("ResolveAddrIB")
}
