package main

// The -json schema. Field names follow ibv_devinfo's labels (snake_case);
// numbers are JSON numbers, flag words are lists of the names ibv_devinfo
// prints (bits without a name appear as one "0x…" string at the end),
// enumerations are {"name", "value"} pairs. GUIDs and GIDs are strings:
// they are identifiers, and a 64-bit GUID does not survive a JavaScript
// number. The schema only grows: fields are added, never renamed.

import (
	"sort"
	"strconv"

	"github.com/goverbs/goverbs/uverbs"
)

// Report is what ibvinfo -json prints.
type Report struct {
	// Devices are the devices ibv_devinfo would print, in its order.
	Devices []*Device `json:"devices"`
}

// List is what ibvinfo -json -l prints.
type List struct {
	// HCAs are the device names, as ibv_devinfo -l lists them.
	HCAs []string `json:"hcas"`
}

// Enum is an enumerated value: the name ibv_devinfo prints and the
// number beside it ("PORT_ACTIVE (4)" is {"name": "PORT_ACTIVE", "value": 4}).
type Enum struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Device is one device: everything ibv_devinfo -v prints for it, then
// what it does not (driver, char device, ABI versions, transports).
type Device struct {
	HCAID          string `json:"hca_id"`           // kernel device name
	Transport      Enum   `json:"transport"`        // "InfiniBand" (0), "iWARP" (1), …
	FWVer          string `json:"fw_ver"`           // "" when the device has none (ibv_devinfo omits the line)
	NodeGUID       string `json:"node_guid"`        // "5054:00ff:fe12:3456"
	SysImageGUID   string `json:"sys_image_guid"`   // same format
	VendorID       uint32 `json:"vendor_id"`        // IEEE OUI
	VendorPartID   uint32 `json:"vendor_part_id"`   //
	HWVer          uint32 `json:"hw_ver"`           //
	BoardID        string `json:"board_id"`         // sysfs board_id; "" when absent
	PhysPortCnt    int    `json:"phys_port_cnt"`    //
	MaxMRSize      uint64 `json:"max_mr_size"`      // bytes
	PageSizeCap    uint64 `json:"page_size_cap"`    // a bit per supported page size
	MaxQP          uint32 `json:"max_qp"`           //
	MaxQPWR        uint32 `json:"max_qp_wr"`        //
	DeviceCapFlags Flags  `json:"device_cap_flags"` // "BAD_PKEY_CNTR", …
	// DeviceCapFlagsValue is device_cap_flags as a number.
	DeviceCapFlagsValue   uint32 `json:"device_cap_flags_value"`
	MaxSGE                uint32 `json:"max_sge"`
	MaxSGERd              uint32 `json:"max_sge_rd"`
	MaxCQ                 uint32 `json:"max_cq"`
	MaxCQE                uint32 `json:"max_cqe"`
	MaxMR                 uint32 `json:"max_mr"`
	MaxPD                 uint32 `json:"max_pd"`
	MaxQPRdAtom           uint32 `json:"max_qp_rd_atom"`
	MaxEERdAtom           uint32 `json:"max_ee_rd_atom"`
	MaxResRdAtom          uint32 `json:"max_res_rd_atom"`
	MaxQPInitRdAtom       uint32 `json:"max_qp_init_rd_atom"`
	MaxEEInitRdAtom       uint32 `json:"max_ee_init_rd_atom"`
	AtomicCap             Enum   `json:"atomic_cap"` // "ATOMIC_NONE" (0), "ATOMIC_HCA" (1), "ATOMIC_GLOB" (2)
	MaxEE                 uint32 `json:"max_ee"`
	MaxRDD                uint32 `json:"max_rdd"`
	MaxMW                 uint32 `json:"max_mw"`
	MaxRawIPv6QP          uint32 `json:"max_raw_ipv6_qp"`
	MaxRawEthyQP          uint32 `json:"max_raw_ethy_qp"`
	MaxMcastGrp           uint32 `json:"max_mcast_grp"`
	MaxMcastQPAttach      uint32 `json:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach uint32 `json:"max_total_mcast_qp_attach"`
	MaxAH                 uint32 `json:"max_ah"`
	MaxFMR                uint32 `json:"max_fmr"`
	MaxMapPerFMR          uint32 `json:"max_map_per_fmr"`
	MaxSRQ                uint32 `json:"max_srq"`
	MaxSRQWR              uint32 `json:"max_srq_wr"`
	MaxSRQSGE             uint32 `json:"max_srq_sge"`
	MaxPKeys              uint16 `json:"max_pkeys"`
	LocalCAAckDelay       uint8  `json:"local_ca_ack_delay"`
	// GeneralODPCaps, RCODPCaps … XRCODPCaps: on-demand paging; an empty
	// list is ibv_devinfo's "NO SUPPORT".
	GeneralODPCaps Flags `json:"general_odp_caps"`
	RCODPCaps      Flags `json:"rc_odp_caps"`
	UCODPCaps      Flags `json:"uc_odp_caps"`
	UDODPCaps      Flags `json:"ud_odp_caps"`
	XRCODPCaps     Flags `json:"xrc_odp_caps"`
	// CompletionTimestampMask is 0 when not supported.
	CompletionTimestampMask uint64 `json:"completion_timestamp_mask"`
	// HCACoreClockKHz is 0 when not supported.
	HCACoreClockKHz uint64 `json:"hca_core_clock_khz"`
	RawPacketCaps   Flags  `json:"raw_packet_caps"` // "C-VLAN stripping offload", …
	// DeviceCapFlagsEx names all 64 capability bits (ibv_devinfo names only
	// the bits above 31 under device_cap_flags_ex).
	DeviceCapFlagsEx      Flags            `json:"device_cap_flags_ex"`
	DeviceCapFlagsExValue uint64           `json:"device_cap_flags_ex_value"`
	TSOCaps               TSOCaps          `json:"tso_caps"`
	RSSCaps               RSSCaps          `json:"rss_caps"`
	MaxWQTypeRQ           uint32           `json:"max_wq_type_rq"`
	PacketPacingCaps      PacketPacingCaps `json:"packet_pacing_caps"`
	TMCaps                TMCaps           `json:"tm_caps"`
	CQModerationCaps      CQModerationCaps `json:"cq_moderation_caps"`
	MaxDMSize             uint64           `json:"max_dm_size"` // bytes of device memory
	NumCompVectors        int              `json:"num_comp_vectors"`

	// What ibv_devinfo does not show.
	Driver     Enum              `json:"driver"`     // rdma-core provider name and RDMA_DRIVER_* id: "rxe" (14)
	UverbsDev  string            `json:"uverbs_dev"` // "/dev/infiniband/uverbs0"
	CoreABI    int               `json:"core_abi"`   // uverbs core ABI (6)
	DriverABI  int               `json:"driver_abi"` // driver's uverbs ABI
	NodeType   Enum              `json:"node_type"`  // "InfiniBand channel adapter" (1), …
	NodeDesc   string            `json:"node_desc"`  // sysfs node_desc
	Discovery  string            `json:"discovery"`  // "netlink" or "sysfs"
	Transports map[string]string `json:"transports"` // verb → "ioctl", "write" or "none" (sysfs), for this run

	Ports []Port `json:"ports"` // the ports printed (all, or the one -i asked for)
}

// Port is one port: everything ibv_devinfo -v prints for it, and more.
type Port struct {
	Port         int    `json:"port"`
	State        Enum   `json:"state"`      // "PORT_ACTIVE" (4)
	MaxMTU       Enum   `json:"max_mtu"`    // "4096" (5)
	ActiveMTU    Enum   `json:"active_mtu"` // "1024" (3)
	SMLID        uint16 `json:"sm_lid"`
	PortLID      uint16 `json:"port_lid"`
	PortLMC      uint8  `json:"port_lmc"`
	LinkLayer    string `json:"link_layer"` // "InfiniBand", "Ethernet", "Unspecified"
	MaxMsgSz     uint32 `json:"max_msg_sz"`
	PortCapFlags Flags  `json:"port_cap_flags"` // "CM_SUP", "IP_BASED_GIDS", … (IBV_PORT_ without the prefix)
	// PortCapFlagsValue is port_cap_flags as a number.
	PortCapFlagsValue  uint32 `json:"port_cap_flags_value"`
	PortCapFlags2      Flags  `json:"port_cap_flags2"`
	PortCapFlags2Value uint16 `json:"port_cap_flags2_value"`
	MaxVLNum           Enum   `json:"max_vl_num"` // "1" (1), …, "15" (5)
	BadPKeyCntr        uint32 `json:"bad_pkey_cntr"`
	QKeyViolCntr       uint32 `json:"qkey_viol_cntr"`
	SMSL               uint8  `json:"sm_sl"`
	PKeyTblLen         uint16 `json:"pkey_tbl_len"`
	GIDTblLen          uint32 `json:"gid_tbl_len"`
	SubnetTimeout      uint8  `json:"subnet_timeout"`
	InitTypeReply      uint8  `json:"init_type_reply"`
	ActiveWidth        Enum   `json:"active_width"`    // "1X" (1), "4X" (2), …
	ActiveSpeed        Enum   `json:"active_speed"`    // "2.5 Gbps" (1), …
	ActiveSpeedEx      uint32 `json:"active_speed_ex"` // newer kernels' extended speed; 0 if not reported
	PhysState          Enum   `json:"phys_state"`      // "LINK_UP" (5), …
	// GIDs is the port's whole GID table (valid entries), including the
	// ones ibv_devinfo hides (a zero interface ID, as siw's).
	GIDs []GID `json:"gids"`
	// Netdev is the network device behind the port ("" for InfiniBand).
	Netdev      string `json:"netdev"`
	NetdevIndex int    `json:"netdev_index"`
}

// GID is one valid GID table entry.
type GID struct {
	Index       int    `json:"index"`
	GID         string `json:"gid"`  // as ibv_devinfo prints it, without the type
	Type        string `json:"type"` // "IB", "RoCE v1", "RoCE v2"
	Netdev      string `json:"netdev"`
	NetdevIndex int    `json:"netdev_index"`
}

// Flags is a list of flag names; bits without a name come last as one
// hexadecimal string.
type Flags []string

// TSOCaps is tso_caps.
type TSOCaps struct {
	MaxTSO      uint32 `json:"max_tso"`
	SupportedQP Flags  `json:"supported_qp"` // "RAW_PACKET", "UD"
}

// RSSCaps is rss_caps.
type RSSCaps struct {
	MaxRWQIndirectionTables    uint32 `json:"max_rwq_indirection_tables"`
	MaxRWQIndirectionTableSize uint32 `json:"max_rwq_indirection_table_size"`
	RxHashFunction             uint8  `json:"rx_hash_function"`
	RxHashFieldsMask           uint64 `json:"rx_hash_fields_mask"`
	SupportedQP                Flags  `json:"supported_qp"`
}

// PacketPacingCaps is packet_pacing_caps (kbit/s).
type PacketPacingCaps struct {
	QPRateLimitMinKbps uint32 `json:"qp_rate_limit_min_kbps"`
	QPRateLimitMaxKbps uint32 `json:"qp_rate_limit_max_kbps"`
	SupportedQP        Flags  `json:"supported_qp"`
}

// TMCaps are the tag-matching capabilities (max_num_tags 0: not supported).
type TMCaps struct {
	MaxRndvHdrSize uint32 `json:"max_rndv_hdr_size"`
	MaxNumTags     uint32 `json:"max_num_tags"`
	MaxOps         uint32 `json:"max_ops"`
	MaxSGE         uint32 `json:"max_sge"`
	Flags          Flags  `json:"flags"` // "IBV_TM_CAP_RC"
}

// CQModerationCaps are the CQ moderation bounds.
type CQModerationCaps struct {
	MaxCQCount    uint16 `json:"max_cq_count"`
	MaxCQPeriodUs uint16 `json:"max_cq_period_us"`
}

func flags(names []string) Flags {
	if names == nil {
		return Flags{}
	}
	return Flags(names)
}

// qpts names a supported_qpts word as ibv_devinfo does (RAW_PACKET, UD,
// then unknown bits).
func qpts(m uverbs.QPTypeMask) Flags {
	f := Flags{}
	if m&uverbs.QPTypeMaskRawPacket != 0 {
		f = append(f, "RAW_PACKET")
	}
	if m&uverbs.QPTypeMaskUD != 0 {
		f = append(f, "UD")
	}
	if u := m &^ (uverbs.QPTypeMaskRawPacket | uverbs.QPTypeMaskUD); u != 0 {
		f = append(f, "0x"+strconv.FormatUint(uint64(u), 16))
	}
	return f
}

func newJSONDevice(dev uverbs.Device, a uverbs.DeviceAttr, numCompVectors int, boardID string) *Device {
	return &Device{
		HCAID:          dev.Name,
		Transport:      Enum{transportStr(dev.Transport), int64(transportNum(dev.Transport))},
		FWVer:          a.FWVersion,
		NodeGUID:       guidStr(a.NodeGUID),
		SysImageGUID:   guidStr(a.SysImageGUID),
		VendorID:       a.VendorID,
		VendorPartID:   a.VendorPartID,
		HWVer:          a.HWVersion,
		BoardID:        boardID,
		PhysPortCnt:    int(a.PhysPortCnt),
		MaxMRSize:      a.MaxMRSize,
		PageSizeCap:    a.PageSizeCap,
		MaxQP:          a.MaxQP,
		MaxQPWR:        a.MaxQPWR,
		DeviceCapFlags: flags(uverbs.DeviceCap(uint32(a.CapFlags)).Names()),

		DeviceCapFlagsValue: uint32(a.CapFlags),
		MaxSGE:              a.MaxSGE, MaxSGERd: a.MaxSGERd, MaxCQ: a.MaxCQ, MaxCQE: a.MaxCQE,
		MaxMR: a.MaxMR, MaxPD: a.MaxPD,
		MaxQPRdAtom: a.MaxQPRdAtom, MaxEERdAtom: a.MaxEERdAtom, MaxResRdAtom: a.MaxResRdAtom,
		MaxQPInitRdAtom: a.MaxQPInitRdAtom, MaxEEInitRdAtom: a.MaxEEInitRdAtom,
		AtomicCap: Enum{a.AtomicCap.String(), int64(a.AtomicCap)},
		MaxEE:     a.MaxEE, MaxRDD: a.MaxRDD, MaxMW: a.MaxMW,
		MaxRawIPv6QP: a.MaxRawIPv6QP, MaxRawEthyQP: a.MaxRawEthyQP,
		MaxMcastGrp: a.MaxMcastGrp, MaxMcastQPAttach: a.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: a.MaxTotalMcastQPAttach,
		MaxAH:                 a.MaxAH, MaxFMR: a.MaxFMR, MaxMapPerFMR: a.MaxMapPerFMR,
		MaxSRQ: a.MaxSRQ, MaxSRQWR: a.MaxSRQWR, MaxSRQSGE: a.MaxSRQSGE,
		MaxPKeys: a.MaxPKeys, LocalCAAckDelay: a.LocalCAAckDelay,

		GeneralODPCaps: flags(a.ODPCaps.General.Names()),
		RCODPCaps:      flags(a.ODPCaps.RC.Names()),
		UCODPCaps:      flags(a.ODPCaps.UC.Names()),
		UDODPCaps:      flags(a.ODPCaps.UD.Names()),
		XRCODPCaps:     flags(a.XRCODPCaps.Names()),

		CompletionTimestampMask: a.CompletionTimestampMask,
		HCACoreClockKHz:         a.HCACoreClock,
		RawPacketCaps:           flags(a.RawPacketCaps.Names()),
		DeviceCapFlagsEx:        flags(a.CapFlagsEx.Names()),
		DeviceCapFlagsExValue:   uint64(a.CapFlagsEx),
		TSOCaps:                 TSOCaps{MaxTSO: a.TSOCaps.MaxTSO, SupportedQP: qpts(a.TSOCaps.SupportedQPTs)},
		RSSCaps: RSSCaps{
			MaxRWQIndirectionTables:    a.RSSCaps.MaxRWQIndirectionTables,
			MaxRWQIndirectionTableSize: a.RSSCaps.MaxRWQIndirectionTableSize,
			RxHashFunction:             a.RSSCaps.RxHashFunction,
			RxHashFieldsMask:           a.RSSCaps.RxHashFieldsMask,
			SupportedQP:                qpts(a.RSSCaps.SupportedQPTs),
		},
		MaxWQTypeRQ: a.MaxWQTypeRQ,
		PacketPacingCaps: PacketPacingCaps{
			QPRateLimitMinKbps: a.PacketPacingCaps.QPRateLimitMin,
			QPRateLimitMaxKbps: a.PacketPacingCaps.QPRateLimitMax,
			SupportedQP:        qpts(a.PacketPacingCaps.SupportedQPTs),
		},
		TMCaps: TMCaps{
			MaxRndvHdrSize: a.TMCaps.MaxRndvHdrSize, MaxNumTags: a.TMCaps.MaxNumTags,
			MaxOps: a.TMCaps.MaxOps, MaxSGE: a.TMCaps.MaxSGE, Flags: flags(a.TMCaps.Flags.Names()),
		},
		CQModerationCaps: CQModerationCaps{MaxCQCount: a.CQModerationCaps.MaxCount, MaxCQPeriodUs: a.CQModerationCaps.MaxPeriod},
		MaxDMSize:        a.MaxDMSize,
		NumCompVectors:   numCompVectors,

		Driver:    Enum{dev.Driver.String(), int64(dev.Driver)},
		UverbsDev: dev.CharDev,
		CoreABI:   dev.CoreABI,
		DriverABI: dev.DriverABI,
		NodeType:  Enum{dev.NodeType.String(), int64(dev.NodeType)},
		NodeDesc:  dev.NodeDesc,
		Discovery: dev.Source,
		Ports:     []Port{},
	}
}

func newJSONPort(port int, pa uverbs.PortAttr, dev uverbs.Device, gids []uverbs.GIDEntry) Port {
	p := Port{
		Port:               port,
		State:              Enum{portStateStr(pa.State), int64(pa.State)},
		MaxMTU:             Enum{mtuStr(pa.MaxMTU), int64(pa.MaxMTU)},
		ActiveMTU:          Enum{mtuStr(pa.ActiveMTU), int64(pa.ActiveMTU)},
		SMLID:              pa.SMLID,
		PortLID:            pa.LID,
		PortLMC:            pa.LMC,
		LinkLayer:          pa.LinkLayer.String(),
		MaxMsgSz:           pa.MaxMsgSize,
		PortCapFlags:       flags(pa.CapFlags.Names()),
		PortCapFlagsValue:  uint32(pa.CapFlags),
		PortCapFlags2:      flags(pa.CapFlags2.Names()),
		PortCapFlags2Value: uint16(pa.CapFlags2),
		MaxVLNum:           Enum{vlStr(pa.MaxVLNum), int64(pa.MaxVLNum)},
		BadPKeyCntr:        pa.BadPKeyCntr,
		QKeyViolCntr:       pa.QKeyViolCntr,
		SMSL:               pa.SMSL,
		PKeyTblLen:         pa.PKeyTableLen,
		GIDTblLen:          pa.GIDTableLen,
		SubnetTimeout:      pa.SubnetTimeout,
		InitTypeReply:      pa.InitTypeReply,
		ActiveWidth:        Enum{widthStr(pa.ActiveWidth) + "X", int64(pa.ActiveWidth)},
		ActiveSpeed:        Enum{pa.ActiveSpeed.String(), int64(pa.ActiveSpeed)},
		ActiveSpeedEx:      pa.ActiveSpeedEx,
		PhysState:          Enum{pa.PhysState.String(), int64(pa.PhysState)},
		GIDs:               []GID{},
	}
	for _, e := range gids {
		if e.Port != port {
			continue
		}
		g := gidText(e, uverbs.LinkLayerUnspecified) // without the type suffix
		p.GIDs = append(p.GIDs, GID{Index: e.Index, GID: g, Type: e.Type.String(), Netdev: e.Netdev, NetdevIndex: e.NetdevIndex})
	}
	for _, dp := range dev.Ports {
		if dp.Number == port {
			p.Netdev, p.NetdevIndex = dp.Netdev, dp.NetdevIndex
		}
	}
	return p
}

// transports reports how each verb of this run reached the kernel.
func transports(ctx *uverbs.Context) map[string]string {
	m := map[string]string{}
	for verb, tr := range ctx.Transports() {
		m[verb] = transportName(tr)
	}
	return m
}

// transportName is "ioctl", "write", or "none" (no command: sysfs).
func transportName(tr uverbs.CommandTransport) string { return tr.String() }

// sortedVerbs lists the verbs of a transports map in order.
func sortedVerbs(m map[string]uverbs.CommandTransport) []string {
	vs := make([]string, 0, len(m))
	for v := range m {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	return vs
}
