package uverbs

// Device and port queries: QUERY_DEVICE (extended, falling back to legacy)
// and QUERY_PORT (ioctl, falling back to write). rdma-core's counterparts are
// ibv_cmd_query_device_any and ibv_cmd_query_port in libibverbs/cmd_device.c;
// ibv_devinfo -v prints every field of both.

import (
	"encoding/binary"
	"strconv"
)

// DeviceCap is a set of device capability bits (enum ibv_device_cap_flags;
// the bits above 31 are IBV_DEVICE_RAW_SCATTER_FCS and
// IBV_DEVICE_PCI_WRITE_END_PADDING). The kernel's IB_DEVICE_* bits are the
// same numbers.
type DeviceCap uint64

// Device capability bits, with their libibverbs names.
const (
	DeviceResizeMaxWR         DeviceCap = 1 << 0  // IBV_DEVICE_RESIZE_MAX_WR
	DeviceBadPKeyCntr         DeviceCap = 1 << 1  // IBV_DEVICE_BAD_PKEY_CNTR
	DeviceBadQKeyCntr         DeviceCap = 1 << 2  // IBV_DEVICE_BAD_QKEY_CNTR
	DeviceRawMulti            DeviceCap = 1 << 3  // IBV_DEVICE_RAW_MULTI
	DeviceAutoPathMig         DeviceCap = 1 << 4  // IBV_DEVICE_AUTO_PATH_MIG
	DeviceChangePhyPort       DeviceCap = 1 << 5  // IBV_DEVICE_CHANGE_PHY_PORT
	DeviceUDAVPortEnforce     DeviceCap = 1 << 6  // IBV_DEVICE_UD_AV_PORT_ENFORCE
	DeviceCurrQPStateMod      DeviceCap = 1 << 7  // IBV_DEVICE_CURR_QP_STATE_MOD
	DeviceShutdownPort        DeviceCap = 1 << 8  // IBV_DEVICE_SHUTDOWN_PORT
	DeviceInitType            DeviceCap = 1 << 9  // IBV_DEVICE_INIT_TYPE
	DevicePortActiveEvent     DeviceCap = 1 << 10 // IBV_DEVICE_PORT_ACTIVE_EVENT
	DeviceSysImageGUID        DeviceCap = 1 << 11 // IBV_DEVICE_SYS_IMAGE_GUID
	DeviceRCRNRNakGen         DeviceCap = 1 << 12 // IBV_DEVICE_RC_RNR_NAK_GEN
	DeviceSRQResize           DeviceCap = 1 << 13 // IBV_DEVICE_SRQ_RESIZE
	DeviceNNotifyCQ           DeviceCap = 1 << 14 // IBV_DEVICE_N_NOTIFY_CQ
	DeviceMemWindow           DeviceCap = 1 << 17 // IBV_DEVICE_MEM_WINDOW
	DeviceUDIPCsum            DeviceCap = 1 << 18 // IBV_DEVICE_UD_IP_CSUM
	DeviceXRC                 DeviceCap = 1 << 20 // IBV_DEVICE_XRC
	DeviceMemMgtExtensions    DeviceCap = 1 << 21 // IBV_DEVICE_MEM_MGT_EXTENSIONS
	DeviceMemWindowType2A     DeviceCap = 1 << 23 // IBV_DEVICE_MEM_WINDOW_TYPE_2A
	DeviceMemWindowType2B     DeviceCap = 1 << 24 // IBV_DEVICE_MEM_WINDOW_TYPE_2B
	DeviceRCIPCsum            DeviceCap = 1 << 25 // IBV_DEVICE_RC_IP_CSUM
	DeviceRawIPCsum           DeviceCap = 1 << 26 // IBV_DEVICE_RAW_IP_CSUM
	DeviceManagedFlowSteering DeviceCap = 1 << 29 // IBV_DEVICE_MANAGED_FLOW_STEERING
	DeviceRawScatterFCS       DeviceCap = 1 << 34 // IBV_DEVICE_RAW_SCATTER_FCS
	DevicePCIWriteEndPadding  DeviceCap = 1 << 36 // IBV_DEVICE_PCI_WRITE_END_PADDING
)

var deviceCapNames = []flagName{
	{uint64(DeviceResizeMaxWR), "RESIZE_MAX_WR"},
	{uint64(DeviceBadPKeyCntr), "BAD_PKEY_CNTR"},
	{uint64(DeviceBadQKeyCntr), "BAD_QKEY_CNTR"},
	{uint64(DeviceRawMulti), "RAW_MULTI"},
	{uint64(DeviceAutoPathMig), "AUTO_PATH_MIG"},
	{uint64(DeviceChangePhyPort), "CHANGE_PHY_PORT"},
	{uint64(DeviceUDAVPortEnforce), "UD_AV_PORT_ENFORCE"},
	{uint64(DeviceCurrQPStateMod), "CURR_QP_STATE_MOD"},
	{uint64(DeviceShutdownPort), "SHUTDOWN_PORT"},
	{uint64(DeviceInitType), "INIT_TYPE"},
	{uint64(DevicePortActiveEvent), "PORT_ACTIVE_EVENT"},
	{uint64(DeviceSysImageGUID), "SYS_IMAGE_GUID"},
	{uint64(DeviceRCRNRNakGen), "RC_RNR_NAK_GEN"},
	{uint64(DeviceSRQResize), "SRQ_RESIZE"},
	{uint64(DeviceNNotifyCQ), "N_NOTIFY_CQ"},
	{uint64(DeviceMemWindow), "MEM_WINDOW"},
	{uint64(DeviceUDIPCsum), "UD_IP_CSUM"},
	{uint64(DeviceXRC), "XRC"},
	{uint64(DeviceMemMgtExtensions), "MEM_MGT_EXTENSIONS"},
	{uint64(DeviceMemWindowType2A), "MEM_WINDOW_TYPE_2A"},
	{uint64(DeviceMemWindowType2B), "MEM_WINDOW_TYPE_2B"},
	{uint64(DeviceRCIPCsum), "RC_IP_CSUM"},
	{uint64(DeviceRawIPCsum), "RAW_IP_CSUM"},
	{uint64(DeviceManagedFlowSteering), "MANAGED_FLOW_STEERING"},
	{uint64(DeviceRawScatterFCS), "RAW_SCATTER_FCS"},
	{uint64(DevicePCIWriteEndPadding), "PCI_WRITE_END_PADDING"},
}

// Names lists the set bits by the names ibv_devinfo prints
// ("BAD_PKEY_CNTR", …), in bit order; bits without a name come last as one
// hexadecimal number ("0x40000").
func (f DeviceCap) Names() []string { return flagNames(uint64(f), deviceCapNames) }

// Unknown is the set bits that have no name.
func (f DeviceCap) Unknown() DeviceCap { return DeviceCap(unknownBits(uint64(f), deviceCapNames)) }

// AtomicCap is how atomic operations are guaranteed (enum ibv_atomic_cap).
type AtomicCap uint32

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0 // IBV_ATOMIC_NONE: no atomics
	AtomicHCA  AtomicCap = 1 // IBV_ATOMIC_HCA: atomic among this device's QPs
	AtomicGlob AtomicCap = 2 // IBV_ATOMIC_GLOB: atomic with the CPU too
)

// String is the name ibv_devinfo prints: "ATOMIC_NONE", "ATOMIC_HCA",
// "ATOMIC_GLOB", or "invalid atomic capability".
func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

// ODPCaps are on-demand paging capabilities (struct ibv_odp_caps).
type ODPCaps struct {
	General ODPGeneralCap
	RC      ODPTransportCap
	UC      ODPTransportCap
	UD      ODPTransportCap
}

// ODPGeneralCap is enum ibv_odp_general_caps.
type ODPGeneralCap uint64

// General ODP capabilities.
const (
	ODPSupport         ODPGeneralCap = 1 << 0 // IBV_ODP_SUPPORT
	ODPSupportImplicit ODPGeneralCap = 1 << 1 // IBV_ODP_SUPPORT_IMPLICIT
)

var odpGeneralNames = []flagName{
	{uint64(ODPSupport), "ODP_SUPPORT"},
	{uint64(ODPSupportImplicit), "ODP_SUPPORT_IMPLICIT"},
}

// Names lists the set bits as ibv_devinfo names them ("ODP_SUPPORT",
// "ODP_SUPPORT_IMPLICIT"); other bits come last as one hexadecimal number.
func (f ODPGeneralCap) Names() []string { return flagNames(uint64(f), odpGeneralNames) }

// Unknown is the set bits that have no name.
func (f ODPGeneralCap) Unknown() ODPGeneralCap {
	return ODPGeneralCap(unknownBits(uint64(f), odpGeneralNames))
}

// ODPTransportCap is enum ibv_odp_transport_cap_bits: which operations of a
// transport may use on-demand paging.
type ODPTransportCap uint32

// Per-transport ODP capabilities.
const (
	ODPSupportSend    ODPTransportCap = 1 << 0 // IBV_ODP_SUPPORT_SEND
	ODPSupportRecv    ODPTransportCap = 1 << 1 // IBV_ODP_SUPPORT_RECV
	ODPSupportWrite   ODPTransportCap = 1 << 2 // IBV_ODP_SUPPORT_WRITE
	ODPSupportRead    ODPTransportCap = 1 << 3 // IBV_ODP_SUPPORT_READ
	ODPSupportAtomic  ODPTransportCap = 1 << 4 // IBV_ODP_SUPPORT_ATOMIC
	ODPSupportSRQRecv ODPTransportCap = 1 << 5 // IBV_ODP_SUPPORT_SRQ_RECV
)

var odpTransportNames = []flagName{
	{uint64(ODPSupportSend), "SUPPORT_SEND"},
	{uint64(ODPSupportRecv), "SUPPORT_RECV"},
	{uint64(ODPSupportWrite), "SUPPORT_WRITE"},
	{uint64(ODPSupportRead), "SUPPORT_READ"},
	{uint64(ODPSupportAtomic), "SUPPORT_ATOMIC"},
	{uint64(ODPSupportSRQRecv), "SUPPORT_SRQ"},
}

// Names lists the set bits as ibv_devinfo names them ("SUPPORT_SEND", …,
// "SUPPORT_SRQ"); other bits come last as one hexadecimal number.
func (f ODPTransportCap) Names() []string { return flagNames(uint64(f), odpTransportNames) }

// Unknown is the set bits that have no name.
func (f ODPTransportCap) Unknown() ODPTransportCap {
	return ODPTransportCap(unknownBits(uint64(f), odpTransportNames))
}

// QPTypeMask is a set of QP types, bit n standing for QP type n (as
// ibv_is_qpt_supported reads it).
type QPTypeMask uint32

// QP type bits used by the capability fields.
const (
	QPTypeMaskRC        QPTypeMask = 1 << 2 // IBV_QPT_RC
	QPTypeMaskUC        QPTypeMask = 1 << 3 // IBV_QPT_UC
	QPTypeMaskUD        QPTypeMask = 1 << 4 // IBV_QPT_UD
	QPTypeMaskRawPacket QPTypeMask = 1 << 8 // IBV_QPT_RAW_PACKET
)

var qpTypeMaskNames = []flagName{
	{uint64(QPTypeMaskRC), "RC"},
	{uint64(QPTypeMaskUC), "UC"},
	{uint64(QPTypeMaskUD), "UD"},
	{uint64(QPTypeMaskRawPacket), "RAW_PACKET"},
}

// Names lists the QP types in the set ("RC", "UC", "UD", "RAW_PACKET");
// other bits come last as one hexadecimal number.
func (m QPTypeMask) Names() []string { return flagNames(uint64(m), qpTypeMaskNames) }

// TSOCaps are TCP segmentation offload capabilities (struct ibv_tso_caps).
type TSOCaps struct {
	MaxTSO        uint32
	SupportedQPTs QPTypeMask
}

// RSSCaps are receive-side scaling capabilities (struct ibv_rss_caps).
type RSSCaps struct {
	SupportedQPTs              QPTypeMask
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	RxHashFieldsMask           uint64 // driver data (mlx5)
	RxHashFunction             uint8  // driver data (mlx5)
}

// PacketPacingCaps are rate-limit capabilities (struct
// ibv_packet_pacing_caps); rates in kbit/s.
type PacketPacingCaps struct {
	QPRateLimitMin uint32
	QPRateLimitMax uint32
	SupportedQPTs  QPTypeMask
}

// RawPacketCap is enum ibv_raw_packet_caps.
type RawPacketCap uint32

// Raw packet capabilities.
const (
	RawPacketCVLANStripping RawPacketCap = 1 << 0 // IBV_RAW_PACKET_CAP_CVLAN_STRIPPING
	RawPacketScatterFCS     RawPacketCap = 1 << 1 // IBV_RAW_PACKET_CAP_SCATTER_FCS
	RawPacketIPCsum         RawPacketCap = 1 << 2 // IBV_RAW_PACKET_CAP_IP_CSUM
	RawPacketDelayDrop      RawPacketCap = 1 << 3 // IBV_RAW_PACKET_CAP_DELAY_DROP
)

var rawPacketNames = []flagName{
	{uint64(RawPacketCVLANStripping), "C-VLAN stripping offload"},
	{uint64(RawPacketScatterFCS), "Scatter FCS offload"},
	{uint64(RawPacketIPCsum), "IP csum offload"},
	{uint64(RawPacketDelayDrop), "Delay drop"},
}

// Names lists the set bits as ibv_devinfo words them ("C-VLAN stripping
// offload", "Scatter FCS offload", "IP csum offload", "Delay drop"); other
// bits come last as one hexadecimal number.
func (f RawPacketCap) Names() []string { return flagNames(uint64(f), rawPacketNames) }

// TMCaps are tag-matching capabilities (struct ibv_tm_caps).
type TMCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          TMCap
	MaxOps         uint32
	MaxSGE         uint32
}

// TMCap is enum ibv_tm_cap_flags.
type TMCap uint32

// TMCapRC: tag matching on RC QPs (IBV_TM_CAP_RC).
const TMCapRC TMCap = 1 << 0

// Names lists the set bits ("IBV_TM_CAP_RC", as ibv_devinfo prints it);
// other bits come last as one hexadecimal number.
func (f TMCap) Names() []string {
	return flagNames(uint64(f), []flagName{{uint64(TMCapRC), "IBV_TM_CAP_RC"}})
}

// CQModerationCaps bound CQ event moderation (struct
// ibv_cq_moderation_caps): completions per event and microseconds.
type CQModerationCaps struct {
	MaxCount  uint16
	MaxPeriod uint16
}

// flagName names one bit.
type flagName struct {
	bit  uint64
	name string
}

func flagNames(v uint64, names []flagName) []string {
	out := []string{}
	for _, n := range names {
		if v&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if u := unknownBits(v, names); u != 0 {
		out = append(out, "0x"+strconv.FormatUint(u, 16))
	}
	return out
}

func unknownBits(v uint64, names []flagName) uint64 {
	for _, n := range names {
		v &^= n.bit
	}
	return v
}

// guid turns a big-endian GUID read as a native-endian word back into
// the GUID as a number.
func guid(raw uint64) uint64 {
	var b [8]byte
	ne.PutUint64(b[:], raw)
	return binary.BigEndian.Uint64(b[:])
}
