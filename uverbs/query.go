package uverbs

// Device and port queries: QUERY_DEVICE (extended, falling back to legacy)
// and QUERY_PORT (ioctl, falling back to write). rdma-core's counterparts are
// ibv_cmd_query_device_any and ibv_cmd_query_port in libibverbs/cmd_device.c;
// ibv_devinfo -v prints every field of both.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// DeviceAttr is what a device can do (struct ibv_device_attr_ex): the
// answer to QUERY_DEVICE. Counts are the kernel's unsigned 32-bit values.
type DeviceAttr struct {
	// FWVersion is the firmware version as the device's rdma-core
	// provider formats RawFWVersion ("0.0.0" for rxe and siw,
	// "16.35.1012" for mlx5). For drivers whose format goverbs does not
	// know, it is the kernel's own string (sysfs fw_ver), possibly empty.
	FWVersion string
	// RawFWVersion is the fw_ver word of the command's response.
	RawFWVersion uint64
	// NodeGUID and SysImageGUID are GUIDs as numbers, as in Device.
	NodeGUID     uint64
	SysImageGUID uint64
	MaxMRSize    uint64 // largest memory region, bytes
	PageSizeCap  uint64 // supported page sizes, a bit per size
	VendorID     uint32 // IEEE OUI (0xffffff for rxe)
	VendorPartID uint32
	HWVersion    uint32
	MaxQP        uint32 // queue pairs
	MaxQPWR      uint32 // work requests per queue
	// CapFlags is device_cap_flags: the low 32 bits of the device's
	// capabilities (the legacy response has no more).
	CapFlags              DeviceCap
	MaxSGE                uint32 // scatter/gather entries per send or receive WR
	MaxSGERd              uint32 // SGEs per RDMA read
	MaxCQ                 uint32
	MaxCQE                uint32 // entries per CQ
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32 // outstanding RDMA reads/atomics a QP can be the target of
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32 // resources for incoming reads/atomics, device-wide
	MaxQPInitRdAtom       uint32 // outstanding RDMA reads/atomics a QP can initiate
	MaxEEInitRdAtom       uint32
	AtomicCap             AtomicCap
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32 // memory windows
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32 // QPs per multicast group
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8 // ports, numbered from 1

	// Extended reports that the kernel answered the extended command;
	// when false every field below is zero.
	Extended bool
	// ODPCaps are the on-demand paging capabilities (RC, UC, UD);
	// XRCODPCaps is the XRC transport's.
	ODPCaps    ODPCaps
	XRCODPCaps ODPTransportCap
	// CompletionTimestampMask is the mask of the completion timestamp
	// counter (0: no timestamps).
	CompletionTimestampMask uint64
	// HCACoreClock is the frequency of the timestamp clock in kHz (0:
	// none).
	HCACoreClock uint64
	// CapFlagsEx is device_cap_flags_ex: all 64 capability bits.
	CapFlagsEx DeviceCap
	// TSOCaps, PacketPacingCaps and the receive-hash part of RSSCaps come
	// from driver data (mlx5); they are zero for devices without them.
	TSOCaps          TSOCaps
	RSSCaps          RSSCaps
	MaxWQTypeRQ      uint32 // receive work queues (ibv_create_wq)
	PacketPacingCaps PacketPacingCaps
	RawPacketCaps    RawPacketCap
	TMCaps           TMCaps // tag matching
	CQModerationCaps CQModerationCaps
	MaxDMSize        uint64 // device memory (ibv_alloc_dm), bytes
}

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

// QueryDevice asks the device what it can do: the extended QUERY_DEVICE
// (one syscall), or the legacy command on kernels that lack the extended
// one (EOPNOTSUPP or ENOSYS, as rdma-core falls back).
func (c *Context) QueryDevice() (_ DeviceAttr, err error) {
	sp := c.begin("QueryDevice")
	defer func() { sp.end(err) }()
	var req abi.IbUverbsExQueryDevice
	var resp abi.IbUverbsExQueryDeviceResp
	cmd := abi.Command{
		Num: abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED,
		In:  abi.Bytes(&req), Out: abi.Bytes(&resp),
	}
	err = c.invoke("QueryDevice", &cmd)
	if err == nil {
		return c.deviceAttr(&resp, int(resp.ResponseLength)), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return DeviceAttr{}, err
	}
	var lreq abi.IbUverbsQueryDevice
	lcmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_QUERY_DEVICE, In: abi.Bytes(&lreq), Out: abi.Bytes(&resp.Base)}
	if err := c.invoke("QueryDevice", &lcmd); err != nil {
		return DeviceAttr{}, err
	}
	return c.deviceAttr(&resp, 0), nil
}

// Offsets of the extended response's fields (struct
// ib_uverbs_ex_query_device_resp), for the response_length checks
// rdma-core makes before it trusts a field. The layout test of package abi
// pins the struct.
const (
	exRespOdpEnd       = 176 + 8 + 24 // base, comp_mask+response_length, odp_caps
	exRespTimestampEnd = exRespOdpEnd + 8
	exRespClockEnd     = exRespTimestampEnd + 8
	exRespCapExEnd     = exRespClockEnd + 8
	exRespRSSEnd       = exRespCapExEnd + 16
	exRespWQEnd        = exRespRSSEnd + 4
	exRespRawPacketEnd = exRespWQEnd + 4
	exRespTMEnd        = exRespRawPacketEnd + 24
	exRespCQModEnd     = exRespTMEnd + 8
	exRespDMEnd        = exRespCQModEnd + 8
	exRespXRCODPEnd    = exRespDMEnd + 4
)

// deviceAttr decodes a QUERY_DEVICE response; n is the extended
// response_length (0: legacy answer). Fields past n are left zero, as
// rdma-core's CAN_COPY does.
func (c *Context) deviceAttr(r *abi.IbUverbsExQueryDeviceResp, n int) DeviceAttr {
	b := &r.Base
	a := DeviceAttr{
		RawFWVersion: b.FwVer,
		NodeGUID:     guid(b.NodeGuid), SysImageGUID: guid(b.SysImageGuid),
		MaxMRSize: b.MaxMrSize, PageSizeCap: b.PageSizeCap,
		VendorID: b.VendorId, VendorPartID: b.VendorPartId, HWVersion: b.HwVer,
		MaxQP: b.MaxQp, MaxQPWR: b.MaxQpWr, CapFlags: DeviceCap(b.DeviceCapFlags),
		MaxSGE: b.MaxSge, MaxSGERd: b.MaxSgeRd, MaxCQ: b.MaxCq, MaxCQE: b.MaxCqe,
		MaxMR: b.MaxMr, MaxPD: b.MaxPd,
		MaxQPRdAtom: b.MaxQpRdAtom, MaxEERdAtom: b.MaxEeRdAtom, MaxResRdAtom: b.MaxResRdAtom,
		MaxQPInitRdAtom: b.MaxQpInitRdAtom, MaxEEInitRdAtom: b.MaxEeInitRdAtom,
		AtomicCap: AtomicCap(b.AtomicCap), MaxEE: b.MaxEe, MaxRDD: b.MaxRdd, MaxMW: b.MaxMw,
		MaxRawIPv6QP: b.MaxRawIpv6Qp, MaxRawEthyQP: b.MaxRawEthyQp,
		MaxMcastGrp: b.MaxMcastGrp, MaxMcastQPAttach: b.MaxMcastQpAttach,
		MaxTotalMcastQPAttach: b.MaxTotalMcastQpAttach,
		MaxAH:                 b.MaxAh, MaxFMR: b.MaxFmr, MaxMapPerFMR: b.MaxMapPerFmr,
		MaxSRQ: b.MaxSrq, MaxSRQWR: b.MaxSrqWr, MaxSRQSGE: b.MaxSrqSge,
		MaxPKeys: b.MaxPkeys, LocalCAAckDelay: b.LocalCaAckDelay, PhysPortCnt: b.PhysPortCnt,
	}
	a.FWVersion = formatFWVersion(c.dev.Driver, b.FwVer, c.dev.FWVersion)
	if n == 0 {
		return a
	}
	a.Extended = true
	if n >= exRespOdpEnd {
		o := r.OdpCaps
		a.ODPCaps = ODPCaps{
			General: ODPGeneralCap(o.GeneralCaps),
			RC:      ODPTransportCap(o.PerTransportCaps.RcOdpCaps),
			UC:      ODPTransportCap(o.PerTransportCaps.UcOdpCaps),
			UD:      ODPTransportCap(o.PerTransportCaps.UdOdpCaps),
		}
	}
	if n >= exRespTimestampEnd {
		a.CompletionTimestampMask = r.TimestampMask
	}
	if n >= exRespClockEnd {
		a.HCACoreClock = r.HcaCoreClock
	}
	if n >= exRespCapExEnd {
		a.CapFlagsEx = DeviceCap(r.DeviceCapFlagsEx)
	}
	if n >= exRespRSSEnd {
		a.RSSCaps.SupportedQPTs = QPTypeMask(r.RssCaps.SupportedQpts)
		a.RSSCaps.MaxRWQIndirectionTables = r.RssCaps.MaxRwqIndirectionTables
		a.RSSCaps.MaxRWQIndirectionTableSize = r.RssCaps.MaxRwqIndirectionTableSize
	}
	if n >= exRespWQEnd {
		a.MaxWQTypeRQ = r.MaxWqTypeRq
	}
	if n >= exRespRawPacketEnd {
		a.RawPacketCaps = RawPacketCap(r.RawPacketCaps)
	}
	if n >= exRespTMEnd {
		t := r.TmCaps
		a.TMCaps = TMCaps{MaxRndvHdrSize: t.MaxRndvHdrSize, MaxNumTags: t.MaxNumTags, Flags: TMCap(t.Flags), MaxOps: t.MaxOps, MaxSGE: t.MaxSge}
	}
	if n >= exRespCQModEnd {
		a.CQModerationCaps = CQModerationCaps{MaxCount: r.CqModerationCaps.MaxCqModerationCount, MaxPeriod: r.CqModerationCaps.MaxCqModerationPeriod}
	}
	if n >= exRespDMEnd {
		a.MaxDMSize = r.MaxDmSize
	}
	if n >= exRespXRCODPEnd {
		a.XRCODPCaps = ODPTransportCap(r.XrcOdpCaps)
	}
	return a
}

// formatFWVersion renders the raw fw_ver word the way the device's
// rdma-core provider does (each provider's query_device in rdma-core v44),
// so that FWVersion reads as ibv_devinfo prints it. Drivers not listed keep
// the kernel's string (sysfs fw_ver / netlink), which is what providers
// such as ocrdma and mana end up showing.
func formatFWVersion(d DriverID, raw uint64, kernel string) string {
	major, minor, sub := raw>>32&0xffff, raw>>16&0xffff, raw&0xffff
	var le [8]byte // the word's bytes in memory (providers that memcpy it)
	ne.PutUint64(le[:], raw)
	switch d {
	case DriverRXE, DriverSIW, DriverERDMA, DriverHFI1, DriverQIB, DriverMTHCA, DriverVMWPVRDMA:
		return fmt.Sprintf("%d.%d.%d", major, minor, sub)
	case DriverMLX5:
		return fmt.Sprintf("%d.%d.%04d", major, minor, sub)
	case DriverMLX4, DriverHNS:
		return fmt.Sprintf("%d.%d.%03d", major, minor, sub)
	case DriverIRDMA:
		return fmt.Sprintf("%d.%d", major, sub)
	case DriverBNXTRE, DriverEFA:
		return fmt.Sprintf("%d.%d.%d.%d", le[0], le[1], le[2], le[3])
	case DriverCXGB4, DriverQEDR:
		return fmt.Sprintf("%d.%d.%d.%d", raw>>24&0xff, raw>>16&0xff, raw>>8&0xff, raw&0xff)
	}
	return kernel
}

// PortAttr is one port's state (struct ibv_port_attr): the answer to
// QUERY_PORT.
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTableLen   uint32
	CapFlags      PortCap
	MaxMsgSize    uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTableLen  uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8 // encoded: 1 → 1 VL, 2 → 2, 3 → 4, 4 → 8, 5 → 15
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   Width
	ActiveSpeed   Speed
	// ActiveSpeedEx is the kernel's extended speed (IB_SPEED_* up to XDR),
	// carried only by the ioctl answer of newer kernels; 0 elsewhere.
	ActiveSpeedEx uint32
	PhysState     PhysState
	LinkLayer     LinkLayer
	Flags         PortFlag
	// CapFlags2 is port_cap_flags2, which only the ioctl form of
	// QUERY_PORT returns (0 when the command went by write).
	CapFlags2 PortCap2
}

// PortState is enum ibv_port_state.
type PortState uint8

// Port states.
const (
	PortNOP         PortState = 0 // IBV_PORT_NOP
	PortDown        PortState = 1 // IBV_PORT_DOWN
	PortInit        PortState = 2 // IBV_PORT_INIT
	PortArmed       PortState = 3 // IBV_PORT_ARMED
	PortActive      PortState = 4 // IBV_PORT_ACTIVE
	PortActiveDefer PortState = 5 // IBV_PORT_ACTIVE_DEFER
)

// String is libibverbs' ibv_port_state_str: "PORT_DOWN", "PORT_ACTIVE", …,
// "invalid state".
func (s PortState) String() string {
	switch s {
	case PortNOP:
		return "PORT_NOP"
	case PortDown:
		return "PORT_DOWN"
	case PortInit:
		return "PORT_INIT"
	case PortArmed:
		return "PORT_ARMED"
	case PortActive:
		return "PORT_ACTIVE"
	case PortActiveDefer:
		return "PORT_ACTIVE_DEFER"
	}
	return "invalid state"
}

// PhysState is the physical port state (IB spec PortPhysicalState).
type PhysState uint8

// Physical port states.
const (
	PhysSleep             PhysState = 1
	PhysPolling           PhysState = 2
	PhysDisabled          PhysState = 3
	PhysPortConfTraining  PhysState = 4
	PhysLinkUp            PhysState = 5
	PhysLinkErrorRecovery PhysState = 6
	PhysPHYTest           PhysState = 7
)

// String is the name ibv_devinfo prints ("LINK_UP", "POLLING", …, with
// its spelling "PORT_CONFIGURATION TRAINNING"), or "invalid physical
// state".
func (s PhysState) String() string {
	switch s {
	case PhysSleep:
		return "SLEEP"
	case PhysPolling:
		return "POLLING"
	case PhysDisabled:
		return "DISABLED"
	case PhysPortConfTraining:
		return "PORT_CONFIGURATION TRAINNING"
	case PhysLinkUp:
		return "LINK_UP"
	case PhysLinkErrorRecovery:
		return "LINK_ERROR_RECOVERY"
	case PhysPHYTest:
		return "PHY TEST"
	}
	return "invalid physical state"
}

// LinkLayer is a port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0 // IBV_LINK_LAYER_UNSPECIFIED
	LinkLayerInfiniBand  LinkLayer = 1 // IBV_LINK_LAYER_INFINIBAND
	LinkLayerEthernet    LinkLayer = 2 // IBV_LINK_LAYER_ETHERNET
)

// String is "Unspecified", "InfiniBand", "Ethernet" or "Unknown", as
// ibv_devinfo prints it.
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "Unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// Width is a port's active link width (IB_WIDTH_*: 1 → 1X, 2 → 4X, 4 →
// 8X, 8 → 12X, 16 → 2X).
type Width uint8

// Lanes is the number of lanes (0 for an invalid width).
func (w Width) Lanes() int {
	switch w {
	case 1:
		return 1
	case 2:
		return 4
	case 4:
		return 8
	case 8:
		return 12
	case 16:
		return 2
	}
	return 0
}

// String is "1X", "4X", … or "invalid width".
func (w Width) String() string {
	if n := w.Lanes(); n != 0 {
		return strconv.Itoa(n) + "X"
	}
	return "invalid width"
}

// Speed is a port's active per-lane speed (IB_SPEED_*: 1 SDR, 2 DDR, 4
// QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR).
type Speed uint8

// Gbps is the per-lane signalling rate ibv_devinfo prints ("2.5", "10.0",
// …), or "" for an invalid speed.
func (s Speed) Gbps() string {
	switch s {
	case 1:
		return "2.5"
	case 2:
		return "5.0"
	case 4, 8:
		return "10.0"
	case 16:
		return "14.0"
	case 32:
		return "25.0"
	case 64:
		return "50.0"
	case 128:
		return "100.0"
	}
	return ""
}

// String is "2.5 Gbps", … or "invalid speed", as ibv_devinfo prints it.
func (s Speed) String() string {
	if g := s.Gbps(); g != "" {
		return g + " Gbps"
	}
	return "invalid speed"
}

// PortFlag is enum ib_uverbs_query_port_flags.
type PortFlag uint8

// PortGRHRequired: every packet on the port needs a GRH
// (IB_UVERBS_QPF_GRH_REQUIRED), as on RoCE.
const PortGRHRequired PortFlag = 1

// PortCap is enum ibv_port_cap_flags (the IB PortInfo CapabilityMask).
type PortCap uint32

// Port capability bits.
const (
	PortSM                   PortCap = 1 << 1  // IBV_PORT_SM
	PortNoticeSup            PortCap = 1 << 2  // IBV_PORT_NOTICE_SUP
	PortTrapSup              PortCap = 1 << 3  // IBV_PORT_TRAP_SUP
	PortOptIPDSup            PortCap = 1 << 4  // IBV_PORT_OPT_IPD_SUP
	PortAutoMigrSup          PortCap = 1 << 5  // IBV_PORT_AUTO_MIGR_SUP
	PortSLMapSup             PortCap = 1 << 6  // IBV_PORT_SL_MAP_SUP
	PortMKeyNVRAM            PortCap = 1 << 7  // IBV_PORT_MKEY_NVRAM
	PortPKeyNVRAM            PortCap = 1 << 8  // IBV_PORT_PKEY_NVRAM
	PortLEDInfoSup           PortCap = 1 << 9  // IBV_PORT_LED_INFO_SUP
	PortSysImageGUIDSup      PortCap = 1 << 11 // IBV_PORT_SYS_IMAGE_GUID_SUP
	PortPKeySWExtPortTrapSup PortCap = 1 << 12 // IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP
	PortExtendedSpeedsSup    PortCap = 1 << 14 // IBV_PORT_EXTENDED_SPEEDS_SUP
	PortCapMask2Sup          PortCap = 1 << 15 // IBV_PORT_CAP_MASK2_SUP
	PortCMSup                PortCap = 1 << 16 // IBV_PORT_CM_SUP
	PortSNMPTunnelSup        PortCap = 1 << 17 // IBV_PORT_SNMP_TUNNEL_SUP
	PortReinitSup            PortCap = 1 << 18 // IBV_PORT_REINIT_SUP
	PortDeviceMgmtSup        PortCap = 1 << 19 // IBV_PORT_DEVICE_MGMT_SUP
	PortVendorClassSup       PortCap = 1 << 20 // IBV_PORT_VENDOR_CLASS_SUP
	PortDRNoticeSup          PortCap = 1 << 21 // IBV_PORT_DR_NOTICE_SUP
	PortCapMaskNoticeSup     PortCap = 1 << 22 // IBV_PORT_CAP_MASK_NOTICE_SUP
	PortBootMgmtSup          PortCap = 1 << 23 // IBV_PORT_BOOT_MGMT_SUP
	PortLinkLatencySup       PortCap = 1 << 24 // IBV_PORT_LINK_LATENCY_SUP
	PortClientRegSup         PortCap = 1 << 25 // IBV_PORT_CLIENT_REG_SUP
	PortIPBasedGIDs          PortCap = 1 << 26 // IBV_PORT_IP_BASED_GIDS
)

var portCapNames = []flagName{
	{uint64(PortSM), "SM"},
	{uint64(PortNoticeSup), "NOTICE_SUP"},
	{uint64(PortTrapSup), "TRAP_SUP"},
	{uint64(PortOptIPDSup), "OPT_IPD_SUP"},
	{uint64(PortAutoMigrSup), "AUTO_MIGR_SUP"},
	{uint64(PortSLMapSup), "SL_MAP_SUP"},
	{uint64(PortMKeyNVRAM), "MKEY_NVRAM"},
	{uint64(PortPKeyNVRAM), "PKEY_NVRAM"},
	{uint64(PortLEDInfoSup), "LED_INFO_SUP"},
	{uint64(PortSysImageGUIDSup), "SYS_IMAGE_GUID_SUP"},
	{uint64(PortPKeySWExtPortTrapSup), "PKEY_SW_EXT_PORT_TRAP_SUP"},
	{uint64(PortExtendedSpeedsSup), "EXTENDED_SPEEDS_SUP"},
	{uint64(PortCapMask2Sup), "CAP_MASK2_SUP"},
	{uint64(PortCMSup), "CM_SUP"},
	{uint64(PortSNMPTunnelSup), "SNMP_TUNNEL_SUP"},
	{uint64(PortReinitSup), "REINIT_SUP"},
	{uint64(PortDeviceMgmtSup), "DEVICE_MGMT_SUP"},
	{uint64(PortVendorClassSup), "VENDOR_CLASS_SUP"},
	{uint64(PortDRNoticeSup), "DR_NOTICE_SUP"},
	{uint64(PortCapMaskNoticeSup), "CAP_MASK_NOTICE_SUP"},
	{uint64(PortBootMgmtSup), "BOOT_MGMT_SUP"},
	{uint64(PortLinkLatencySup), "LINK_LATENCY_SUP"},
	{uint64(PortClientRegSup), "CLIENT_REG_SUP"},
	{uint64(PortIPBasedGIDs), "IP_BASED_GIDS"},
}

// Names lists the set bits by their libibverbs names without the
// IBV_PORT_ prefix ("CM_SUP", "IP_BASED_GIDS", …); other bits come last as
// one hexadecimal number.
func (f PortCap) Names() []string { return flagNames(uint64(f), portCapNames) }

// PortCap2 is enum ibv_port_cap_flags2.
type PortCap2 uint16

// Port capability bits, second word.
const (
	PortSetNodeDescSup          PortCap2 = 1 << 0  // IBV_PORT_SET_NODE_DESC_SUP
	PortInfoExtSup              PortCap2 = 1 << 1  // IBV_PORT_INFO_EXT_SUP
	PortVirtSup                 PortCap2 = 1 << 2  // IBV_PORT_VIRT_SUP
	PortSwitchPortStateTableSup PortCap2 = 1 << 3  // IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP
	PortLinkWidth2XSup          PortCap2 = 1 << 4  // IBV_PORT_LINK_WIDTH_2X_SUP
	PortLinkSpeedHDRSup         PortCap2 = 1 << 5  // IBV_PORT_LINK_SPEED_HDR_SUP
	PortLinkSpeedNDRSup         PortCap2 = 1 << 10 // IBV_PORT_LINK_SPEED_NDR_SUP
)

var portCap2Names = []flagName{
	{uint64(PortSetNodeDescSup), "SET_NODE_DESC_SUP"},
	{uint64(PortInfoExtSup), "INFO_EXT_SUP"},
	{uint64(PortVirtSup), "VIRT_SUP"},
	{uint64(PortSwitchPortStateTableSup), "SWITCH_PORT_STATE_TABLE_SUP"},
	{uint64(PortLinkWidth2XSup), "LINK_WIDTH_2X_SUP"},
	{uint64(PortLinkSpeedHDRSup), "LINK_SPEED_HDR_SUP"},
	{uint64(PortLinkSpeedNDRSup), "LINK_SPEED_NDR_SUP"},
}

// Names lists the set bits by their libibverbs names without the
// IBV_PORT_ prefix; other bits come last as one hexadecimal number.
func (f PortCap2) Names() []string { return flagNames(uint64(f), portCap2Names) }

// QueryPort asks for the state of port (numbered from 1): ioctl
// DEVICE/QUERY_PORT, which also returns port_cap_flags2, or the write
// command where the kernel has no ioctl. One syscall.
func (c *Context) QueryPort(port int) (_ PortAttr, err error) {
	sp := c.begin("QueryPort")
	defer func() { sp.end(err) }()
	if port < 1 || port > 255 {
		return PortAttr{}, argError("QueryPort", c.dev.Name, "port %d out of range 1..255", port)
	}
	var ex abi.IbUverbsQueryPortRespEx
	out := abi.Bytes(&ex)
	b := abi.NewIoctl(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT)
	b.Uint64In(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port)) // CONST_IN: always 8 bytes inline
	b.PtrOut(abi.UVERBS_ATTR_QUERY_PORT_RESP, out)
	tr, err := c.ioctl("QueryPort", b, func() error {
		req := abi.IbUverbsQueryPort{PortNum: uint8(port)}
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_QUERY_PORT, In: abi.Bytes(&req), Out: abi.Bytes(&ex.LegacyResp)}
		return c.fallback("QueryPort", &cmd)
	})
	if err != nil {
		return PortAttr{}, err
	}
	r := &ex.LegacyResp
	a := PortAttr{
		State: PortState(r.State), MaxMTU: MTU(r.MaxMtu), ActiveMTU: MTU(r.ActiveMtu),
		GIDTableLen: r.GidTblLen, CapFlags: PortCap(r.PortCapFlags), MaxMsgSize: r.MaxMsgSz,
		BadPKeyCntr: r.BadPkeyCntr, QKeyViolCntr: r.QkeyViolCntr, PKeyTableLen: r.PkeyTblLen,
		LID: r.Lid, SMLID: r.SmLid, LMC: r.Lmc, MaxVLNum: r.MaxVlNum, SMSL: r.SmSl,
		SubnetTimeout: r.SubnetTimeout, InitTypeReply: r.InitTypeReply,
		ActiveWidth: Width(r.ActiveWidth), ActiveSpeed: Speed(r.ActiveSpeed),
		PhysState: PhysState(r.PhysState), LinkLayer: LinkLayer(r.LinkLayer), Flags: PortFlag(r.Flags),
	}
	if tr == abi.TransportIoctl {
		a.CapFlags2 = PortCap2(ex.PortCapFlags2)
		// Linux 6.7+ put active_speed_ex (u32) in what 6.1's header calls
		// reserved[2:6]; older kernels zero it.
		a.ActiveSpeedEx = ne.Uint32(ex.Reserved[2:6])
	}
	return a, nil
}
