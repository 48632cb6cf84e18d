package rsocket

import (
	"encoding/binary"
	"fmt"
)

// The rsocket wire protocol, as librdmacm's rsocket.c (rdma-core 44)
// speaks it on SOCK_STREAM sockets.
//
// Every message is an RDMA WRITE WITH IMMEDIATE (on iWARP, which has no
// immediate data: an RDMA WRITE followed by a 4-byte inline SEND carrying
// the same word). The immediate word is op<<29 | data:
//
//	op 0 DATA       data = bytes written into the peer's current target buffer
//	op 4 SGL        data = the sender's receive credits (its receive sequence
//	                number plus its receive queue size); the write itself, when
//	                it has 16 bytes, is a new target buffer entry (rs_sge) put
//	                into the peer's target SGL
//	op 6 IOMAP_SGL  data = the index of an iomap entry written (riomap)
//	op 7 CTRL       data = 0 DISCONNECT, 1 KEEPALIVE, 2 SHUTDOWN
//
// Ops 1, 3 and 5 are reserved; op 2 (WRITE) never travels. A keepalive is a
// zero-length RDMA WRITE without immediate data: nothing arrives at the
// peer's receive queue.
const (
	opData     = 0
	opWrite    = 2
	opSGL      = 4
	opIOMapSGL = 6
	opCtrl     = 7

	ctrlDisconnect = 0
	ctrlKeepalive  = 1
	ctrlShutdown   = 2

	msgDataMask = 1<<29 - 1
)

func msgSet(op, data uint32) uint32 { return op<<29 | data&msgDataMask }
func msgOp(m uint32) uint32         { return m >> 29 }
func msgData(m uint32) uint32       { return m & msgDataMask }

// Sizes and limits of rsocket.c.
const (
	olapStart   = 2048  // RS_OLAP_START_SIZE: the first transfer of a send
	maxTransfer = 65536 // RS_MAX_TRANSFER: transfers double up to this
	sndLowat    = 2048  // RS_SNDLOWAT: send only with this much send buffer free
	qpMinSize   = 16    // RS_QP_MIN_SIZE
	qpMaxSize   = 0xfffe
	qpCtrlSize  = 4 // RS_QP_CTRL_SIZE: control messages in flight
	sglSize     = 2 // RS_SGL_SIZE: entries of the target SGL
	sgeSize     = 16
	msgSize     = 4 // RS_MSG_SIZE: an iWARP message

	// Defaults of rsocket.c (rs_configure without /etc/rdma/rsocket).
	defaultInline = 64
	defaultSQSize = 384
	defaultRQSize = 384
	defaultMem    = 1 << 17 // receive buffer
	defaultWMem   = 1 << 17 // send buffer
)

// Connection flags (rs_conn_data.flags).
const (
	connFlagNet   = 1 << 0 // the sender's host order is big-endian (network)
	connFlagIOMap = 1 << 1 // the sender has an iomap after its target SGL
)

// connDataLen is the size of struct rs_conn_data, the private data of the
// connect request and of the accept.
const connDataLen = 40

// sge is struct rs_sge: a remote buffer.
type sge struct {
	Addr   uint64
	Key    uint32
	Length uint32
}

// connData is struct rs_conn_data. On the wire: version u8, flags u8,
// credits be16, reserved[3], target_iomap_size u8 (a scaled value),
// target_sgl {addr be64, key be32, length be32} (the SGL the peer writes new
// target buffers into; length counts entries), data_buf {addr be64, key
// be32, length be32} (the first target buffer: half the receive buffer).
type connData struct {
	Version    uint8
	Flags      uint8
	Credits    uint16
	IOMapSize  uint8
	TargetSGL  sge
	DataBuffer sge
}

func (d *connData) marshal(b []byte) {
	_ = b[connDataLen-1]
	b[0] = d.Version
	b[1] = d.Flags
	binary.BigEndian.PutUint16(b[2:], d.Credits)
	b[4], b[5], b[6] = 0, 0, 0
	b[7] = d.IOMapSize
	putSGE(b[8:], d.TargetSGL)
	putSGE(b[24:], d.DataBuffer)
}

func putSGE(b []byte, s sge) {
	binary.BigEndian.PutUint64(b, s.Addr)
	binary.BigEndian.PutUint32(b[8:], s.Key)
	binary.BigEndian.PutUint32(b[12:], s.Length)
}

func getSGE(b []byte) sge {
	return sge{Addr: binary.BigEndian.Uint64(b), Key: binary.BigEndian.Uint32(b[8:]), Length: binary.BigEndian.Uint32(b[12:])}
}

// parseConnData decodes the peer's private data (IB CMs pad it with zeros).
func parseConnData(b []byte) (connData, error) {
	var d connData
	if len(b) < connDataLen {
		return d, fmt.Errorf("private data of %d bytes, rsocket's is %d", len(b), connDataLen)
	}
	d.Version = b[0]
	d.Flags = b[1]
	d.Credits = binary.BigEndian.Uint16(b[2:])
	d.IOMapSize = b[7]
	d.TargetSGL = getSGE(b[8:])
	d.DataBuffer = getSGE(b[24:])
	if d.Version != 1 {
		return d, fmt.Errorf("rsocket version %d, only 1 is known", d.Version)
	}
	if d.TargetSGL.Length == 0 || d.DataBuffer.Length == 0 {
		return d, fmt.Errorf("peer's target SGL has %d entries, its first buffer %d bytes", d.TargetSGL.Length, d.DataBuffer.Length)
	}
	return d, nil
}

// scaleToValue decodes rsocket's 8-bit scaled sizes (rs_scale_to_value).
func scaleToValue(v, bits int) int {
	if v <= 1<<(bits-1) {
		return v
	}
	return (v &^ (1 << (bits - 1))) << bits
}
