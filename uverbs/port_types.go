package uverbs

// Device and port queries: QUERY_DEVICE (extended, falling back to legacy)
// and QUERY_PORT (ioctl, falling back to write). rdma-core's counterparts are
// ibv_cmd_query_device_any and ibv_cmd_query_port in libibverbs/cmd_device.c;
// ibv_devinfo -v prints every field of both.

import (
	"strconv"
)

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
