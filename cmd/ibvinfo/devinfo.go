package main

// The text output: rdma-core v44's libibverbs/examples/devinfo.c, field by
// field (its print_hca_cap and helpers), from goverbs' queries.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/goverbs/goverbs/internal/inet"
	"github.com/goverbs/goverbs/uverbs"
)

// printHCA is print_hca_cap: one device, all ports or port ibPort (0: all).
func (p *prog) printHCA(dev uverbs.Device, ibPort uint8) (rc int) {
	ctx, err := uverbs.Open(dev)
	if err != nil {
		printf(p.errw, "Failed to open device\n")
		return 1
	}
	defer func() {
		if err := ctx.Close(); err != nil {
			printf(p.errw, "Failed to close device")
			rc = 3
		}
	}()
	a, err := ctx.QueryDevice()
	if err != nil {
		printf(p.errw, "Failed to query device props\n")
		return 2
	}
	if ibPort != 0 && ibPort > a.PhysPortCnt {
		printf(p.errw, "Invalid port requested for device\n")
		return 4
	}
	var j *Device
	if p.jsonOut {
		j = newJSONDevice(dev, a, ctx.NumCompVectors(), p.boardID(dev.Name))
		p.report.Devices = append(p.report.Devices, j)
		defer func() { j.Transports = transports(ctx) }()
	} else {
		p.printDevice(dev, a, ctx.NumCompVectors())
	}

	var gids []uverbs.GIDEntry
	gidsDone := false
	for port := 1; port <= int(a.PhysPortCnt); port++ {
		if ibPort != 0 && port != int(ibPort) {
			continue
		}
		pa, err := ctx.QueryPort(port)
		if err != nil {
			printf(p.errw, "Failed to query port %d props\n", port)
			return errnoOf(err)
		}
		if (p.verbose || p.jsonOut || p.extra) && !gidsDone {
			gids, err = ctx.QueryGIDTable()
			if err != nil {
				// ibv_devinfo fails on its first GID query, index 0.
				printf(p.errw, "Failed to query gid to port %d, index %d\n", port, 0)
				return 255
			}
			gidsDone = true
		}
		if p.jsonOut {
			j.Ports = append(j.Ports, newJSONPort(port, pa, dev, gids))
			continue
		}
		p.printPort(dev, port, pa, gids)
		printf(p.out, "\n")
	}
	if p.extra && !p.jsonOut {
		p.printExtra(dev, ctx, gids)
	}
	return 0
}

// errnoOf is the errno inside err (ibv_query_port returns it), EIO if none.
func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return int(syscall.EIO)
}

// boardID is sysfs board_id as ibv_read_sysfs_file returns it: up to 255
// bytes, one trailing newline removed; "" when absent (rxe, siw).
func (p *prog) boardID(dev string) string {
	if strings.ContainsAny(dev, "/") {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(p.sysfs, "class/infiniband", dev, "board_id"))
	if err != nil {
		return ""
	}
	if len(b) > 255 {
		b = b[:255]
	}
	s := string(b)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, "\n")
}

// d is C's %d of an int field filled from a u32.
func d(v uint32) int32 { return int32(v) }

func (p *prog) printDevice(dev uverbs.Device, a uverbs.DeviceAttr, numCompVectors int) {
	w := p.out
	printf(w, "hca_id:\t%s\n", dev.Name)
	printf(w, "\ttransport:\t\t\t%s (%d)\n", transportStr(dev.Transport), transportNum(dev.Transport))
	if a.FWVersion != "" {
		printf(w, "\tfw_ver:\t\t\t\t%s\n", a.FWVersion)
	}
	printf(w, "\tnode_guid:\t\t\t%s\n", guidStr(a.NodeGUID))
	printf(w, "\tsys_image_guid:\t\t\t%s\n", guidStr(a.SysImageGUID))
	printf(w, "\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	printf(w, "\tvendor_part_id:\t\t\t%d\n", d(a.VendorPartID))
	printf(w, "\thw_ver:\t\t\t\t0x%X\n", a.HWVersion)
	if b := p.boardID(dev.Name); b != "" {
		printf(w, "\tboard_id:\t\t\t%s\n", b)
	}
	printf(w, "\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if !p.verbose {
		return
	}
	printf(w, "\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	printf(w, "\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	printf(w, "\tmax_qp:\t\t\t\t%d\n", d(a.MaxQP))
	printf(w, "\tmax_qp_wr:\t\t\t%d\n", d(a.MaxQPWR))
	printf(w, "\tdevice_cap_flags:\t\t0x%08x\n", uint32(a.CapFlags))
	printCapFlags(w, uint32(a.CapFlags))
	printf(w, "\tmax_sge:\t\t\t%d\n", d(a.MaxSGE))
	printf(w, "\tmax_sge_rd:\t\t\t%d\n", d(a.MaxSGERd))
	printf(w, "\tmax_cq:\t\t\t\t%d\n", d(a.MaxCQ))
	printf(w, "\tmax_cqe:\t\t\t%d\n", d(a.MaxCQE))
	printf(w, "\tmax_mr:\t\t\t\t%d\n", d(a.MaxMR))
	printf(w, "\tmax_pd:\t\t\t\t%d\n", d(a.MaxPD))
	printf(w, "\tmax_qp_rd_atom:\t\t\t%d\n", d(a.MaxQPRdAtom))
	printf(w, "\tmax_ee_rd_atom:\t\t\t%d\n", d(a.MaxEERdAtom))
	printf(w, "\tmax_res_rd_atom:\t\t%d\n", d(a.MaxResRdAtom))
	printf(w, "\tmax_qp_init_rd_atom:\t\t%d\n", d(a.MaxQPInitRdAtom))
	printf(w, "\tmax_ee_init_rd_atom:\t\t%d\n", d(a.MaxEEInitRdAtom))
	printf(w, "\tatomic_cap:\t\t\t%s (%d)\n", a.AtomicCap, d(uint32(a.AtomicCap)))
	printf(w, "\tmax_ee:\t\t\t\t%d\n", d(a.MaxEE))
	printf(w, "\tmax_rdd:\t\t\t%d\n", d(a.MaxRDD))
	printf(w, "\tmax_mw:\t\t\t\t%d\n", d(a.MaxMW))
	printf(w, "\tmax_raw_ipv6_qp:\t\t%d\n", d(a.MaxRawIPv6QP))
	printf(w, "\tmax_raw_ethy_qp:\t\t%d\n", d(a.MaxRawEthyQP))
	printf(w, "\tmax_mcast_grp:\t\t\t%d\n", d(a.MaxMcastGrp))
	printf(w, "\tmax_mcast_qp_attach:\t\t%d\n", d(a.MaxMcastQPAttach))
	printf(w, "\tmax_total_mcast_qp_attach:\t%d\n", d(a.MaxTotalMcastQPAttach))
	printf(w, "\tmax_ah:\t\t\t\t%d\n", d(a.MaxAH))
	printf(w, "\tmax_fmr:\t\t\t%d\n", d(a.MaxFMR))
	if a.MaxFMR != 0 {
		printf(w, "\tmax_map_per_fmr:\t\t%d\n", d(a.MaxMapPerFMR))
	}
	printf(w, "\tmax_srq:\t\t\t%d\n", d(a.MaxSRQ))
	if a.MaxSRQ != 0 {
		printf(w, "\tmax_srq_wr:\t\t\t%d\n", d(a.MaxSRQWR))
		printf(w, "\tmax_srq_sge:\t\t\t%d\n", d(a.MaxSRQSGE))
	}
	printf(w, "\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
	printf(w, "\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	printf(w, "\tgeneral_odp_caps:\n")
	printNamed(w, uint64(a.ODPCaps.General), odpGeneralNames)
	printf(w, "\trc_odp_caps:\n")
	printODPTransport(w, uint32(a.ODPCaps.RC))
	printf(w, "\tuc_odp_caps:\n")
	printODPTransport(w, uint32(a.ODPCaps.UC))
	printf(w, "\tud_odp_caps:\n")
	printODPTransport(w, uint32(a.ODPCaps.UD))
	printf(w, "\txrc_odp_caps:\n")
	printODPTransport(w, uint32(a.XRCODPCaps))
	if a.CompletionTimestampMask != 0 {
		printf(w, "\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.CompletionTimestampMask)
	} else {
		printf(w, "\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		printf(w, "\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		printf(w, "\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		printf(w, "\traw packet caps:\n")
		for _, n := range rawPacketNames {
			if uint64(a.RawPacketCaps)&n.bit != 0 {
				printf(w, "\t\t\t\t\t%s\n", n.name)
			}
		}
	}
	printf(w, "\tdevice_cap_flags_ex:\t\t0x%X\n", uint64(a.CapFlagsEx))
	ex := uint64(a.CapFlagsEx) & 0xffffffff00000000
	printNamed(w, ex, capExNames)

	printf(w, "\ttso_caps:\n")
	printf(w, "\t\tmax_tso:\t\t\t%d\n", d(a.TSOCaps.MaxTSO))
	if a.TSOCaps.MaxTSO != 0 {
		printf(w, "\t\tsupported_qp:\n")
		printQPTs(w, uint32(a.TSOCaps.SupportedQPTs))
	}
	printf(w, "\trss_caps:\n")
	printf(w, "\t\tmax_rwq_indirection_tables:\t\t\t%d\n", a.RSSCaps.MaxRWQIndirectionTables)
	printf(w, "\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", a.RSSCaps.MaxRWQIndirectionTableSize)
	printf(w, "\t\trx_hash_function:\t\t\t\t0x%x\n", a.RSSCaps.RxHashFunction)
	printf(w, "\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", a.RSSCaps.RxHashFieldsMask)
	if a.RSSCaps.SupportedQPTs != 0 {
		printf(w, "\t\tsupported_qp:\n")
		printQPTs(w, uint32(a.RSSCaps.SupportedQPTs))
	}
	printf(w, "\tmax_wq_type_rq:\t\t\t%d\n", a.MaxWQTypeRQ)
	printf(w, "\tpacket_pacing_caps:\n")
	printf(w, "\t\tqp_rate_limit_min:\t%dkbps\n", a.PacketPacingCaps.QPRateLimitMin)
	printf(w, "\t\tqp_rate_limit_max:\t%dkbps\n", a.PacketPacingCaps.QPRateLimitMax)
	if a.PacketPacingCaps.QPRateLimitMax != 0 {
		printf(w, "\t\tsupported_qp:\n")
		printQPTs(w, uint32(a.PacketPacingCaps.SupportedQPTs))
	}
	if t := a.TMCaps; t.MaxNumTags != 0 {
		printf(w, "\tmax_rndv_hdr_size:\t\t%d\n", t.MaxRndvHdrSize)
		printf(w, "\tmax_num_tags:\t\t\t%d\n", t.MaxNumTags)
		printf(w, "\tmax_ops:\t\t\t%d\n", t.MaxOps)
		printf(w, "\tmax_sge:\t\t\t%d\n", t.MaxSGE)
		printf(w, "\tflags:\n")
		if t.Flags&uverbs.TMCapRC != 0 {
			printf(w, "\t\t\t\t\tIBV_TM_CAP_RC\n")
		}
	} else {
		printf(w, "\ttag matching not supported\n")
	}
	if m := a.CQModerationCaps; m.MaxCount != 0 && m.MaxPeriod != 0 {
		printf(w, "\n\tcq moderation caps:\n")
		printf(w, "\t\tmax_cq_count:\t%d\n", m.MaxCount)
		printf(w, "\t\tmax_cq_period:\t%d us\n\n", m.MaxPeriod)
	}
	if a.MaxDMSize != 0 {
		printf(w, "\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	printf(w, "\tnum_comp_vectors:\t\t%d\n", numCompVectors)
}

func (p *prog) printPort(dev uverbs.Device, port int, pa uverbs.PortAttr, gids []uverbs.GIDEntry) {
	w := p.out
	printf(w, "\t\tport:\t%d\n", port)
	printf(w, "\t\t\tstate:\t\t\t%s (%d)\n", portStateStr(pa.State), pa.State)
	printf(w, "\t\t\tmax_mtu:\t\t%s (%d)\n", mtuStr(pa.MaxMTU), pa.MaxMTU)
	printf(w, "\t\t\tactive_mtu:\t\t%s (%d)\n", mtuStr(pa.ActiveMTU), pa.ActiveMTU)
	printf(w, "\t\t\tsm_lid:\t\t\t%d\n", pa.SMLID)
	printf(w, "\t\t\tport_lid:\t\t%d\n", pa.LID)
	printf(w, "\t\t\tport_lmc:\t\t0x%02x\n", pa.LMC)
	printf(w, "\t\t\tlink_layer:\t\t%s\n", pa.LinkLayer)
	if !p.verbose {
		return
	}
	printf(w, "\t\t\tmax_msg_sz:\t\t0x%x\n", pa.MaxMsgSize)
	printf(w, "\t\t\tport_cap_flags:\t\t0x%08x\n", uint32(pa.CapFlags))
	printf(w, "\t\t\tport_cap_flags2:\t0x%04x\n", uint16(pa.CapFlags2))
	printf(w, "\t\t\tmax_vl_num:\t\t%s (%d)\n", vlStr(pa.MaxVLNum), pa.MaxVLNum)
	printf(w, "\t\t\tbad_pkey_cntr:\t\t0x%x\n", pa.BadPKeyCntr)
	printf(w, "\t\t\tqkey_viol_cntr:\t\t0x%x\n", pa.QKeyViolCntr)
	printf(w, "\t\t\tsm_sl:\t\t\t%d\n", pa.SMSL)
	printf(w, "\t\t\tpkey_tbl_len:\t\t%d\n", pa.PKeyTableLen)
	printf(w, "\t\t\tgid_tbl_len:\t\t%d\n", d(pa.GIDTableLen))
	printf(w, "\t\t\tsubnet_timeout:\t\t%d\n", pa.SubnetTimeout)
	printf(w, "\t\t\tinit_type_reply:\t%d\n", pa.InitTypeReply)
	printf(w, "\t\t\tactive_width:\t\t%sX (%d)\n", widthStr(pa.ActiveWidth), pa.ActiveWidth)
	printf(w, "\t\t\tactive_speed:\t\t%s (%d)\n", pa.ActiveSpeed, pa.ActiveSpeed)
	if dev.Transport == uverbs.TransportIB {
		printf(w, "\t\t\tphys_state:\t\t%s (%d)\n", pa.PhysState, pa.PhysState)
	}
	for _, e := range devinfoGIDs(gids, port, pa) {
		printf(w, "\t\t\tGID[%3d]:\t\t%s\n", e.Index, gidText(e, pa.LinkLayer))
	}
}

// devinfoGIDs are the port's GIDs ibv_devinfo prints: those below
// gid_tbl_len whose interface ID (bytes 8..15) is not zero, by index.
func devinfoGIDs(gids []uverbs.GIDEntry, port int, pa uverbs.PortAttr) []uverbs.GIDEntry {
	var out []uverbs.GIDEntry
	for _, e := range gids {
		if e.Port == port && e.Index < int(int32(pa.GIDTableLen)) && [8]byte(e.GID[8:]) != [8]byte{} {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// gidText is print_formated_gid: RoCE v2 GIDs as inet_ntop prints them,
// the others (IB, RoCE v1: libibverbs' "IB/RoCE v1" type) as eight groups
// of four hex digits; the type follows on Ethernet ports.
func gidText(e uverbs.GIDEntry, ll uverbs.LinkLayer) string {
	v1 := e.Type == uverbs.GIDTypeIB || e.Type == uverbs.GIDTypeRoCEv1
	var s string
	if v1 {
		g := e.GID
		s = fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
			g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
	} else {
		s = inet.Ntop6(e.GID)
	}
	if ll == uverbs.LinkLayerEthernet {
		if v1 {
			s += ", RoCE v1"
		} else {
			s += ", RoCE v2"
		}
	}
	return s
}

// printCapFlags is print_device_cap_flags: the known bits of the 32-bit
// word by name, then the rest as one number.
func printCapFlags(w interface{ Write([]byte) (int, error) }, f uint32) {
	printNamed(w, uint64(f), capNames)
}

// printNamed prints one line per known set bit, then "Unknown flags: 0x…"
// (upper-case hex) for the rest, as devinfo.c's flag printers do.
func printNamed(w interface{ Write([]byte) (int, error) }, v uint64, names []namedBit) {
	known := uint64(0)
	for _, n := range names {
		known |= n.bit
		if v&n.bit != 0 {
			printf(w, "\t\t\t\t\t%s\n", n.name)
		}
	}
	if u := v &^ known; u != 0 {
		printf(w, "\t\t\t\t\tUnknown flags: 0x%X\n", u)
	}
}

// printODPTransport is print_odp_trans_caps.
func printODPTransport(w interface{ Write([]byte) (int, error) }, v uint32) {
	if v == 0 {
		printf(w, "\t\t\t\t\tNO SUPPORT\n")
		return
	}
	printNamed(w, uint64(v), odpTransportNames)
}

// printQPTs prints a supported_qpts word as the tso, rss and packet
// pacing printers do.
func printQPTs(w interface{ Write([]byte) (int, error) }, v uint32) {
	if v&uint32(uverbs.QPTypeMaskRawPacket) != 0 {
		printf(w, "\t\t\t\t\tSUPPORT_RAW_PACKET\n")
	}
	if v&uint32(uverbs.QPTypeMaskUD) != 0 {
		printf(w, "\t\t\t\t\tSUPPORT_UD\n")
	}
	if u := v &^ uint32(uverbs.QPTypeMaskRawPacket|uverbs.QPTypeMaskUD); u != 0 {
		printf(w, "\t\t\t\t\tUnknown flags: 0x%X\n", u)
	}
}

type namedBit struct {
	bit  uint64
	name string
}

// capNames are the bits print_device_cap_flags knows, in its order.
var capNames = []namedBit{
	{uint64(uverbs.DeviceResizeMaxWR), "RESIZE_MAX_WR"},
	{uint64(uverbs.DeviceBadPKeyCntr), "BAD_PKEY_CNTR"},
	{uint64(uverbs.DeviceBadQKeyCntr), "BAD_QKEY_CNTR"},
	{uint64(uverbs.DeviceRawMulti), "RAW_MULTI"},
	{uint64(uverbs.DeviceAutoPathMig), "AUTO_PATH_MIG"},
	{uint64(uverbs.DeviceChangePhyPort), "CHANGE_PHY_PORT"},
	{uint64(uverbs.DeviceUDAVPortEnforce), "UD_AV_PORT_ENFORCE"},
	{uint64(uverbs.DeviceCurrQPStateMod), "CURR_QP_STATE_MOD"},
	{uint64(uverbs.DeviceShutdownPort), "SHUTDOWN_PORT"},
	{uint64(uverbs.DeviceInitType), "INIT_TYPE"},
	{uint64(uverbs.DevicePortActiveEvent), "PORT_ACTIVE_EVENT"},
	{uint64(uverbs.DeviceSysImageGUID), "SYS_IMAGE_GUID"},
	{uint64(uverbs.DeviceRCRNRNakGen), "RC_RNR_NAK_GEN"},
	{uint64(uverbs.DeviceSRQResize), "SRQ_RESIZE"},
	{uint64(uverbs.DeviceNNotifyCQ), "N_NOTIFY_CQ"},
	{uint64(uverbs.DeviceMemWindow), "MEM_WINDOW"},
	{uint64(uverbs.DeviceUDIPCsum), "UD_IP_CSUM"},
	{uint64(uverbs.DeviceXRC), "XRC"},
	{uint64(uverbs.DeviceMemMgtExtensions), "MEM_MGT_EXTENSIONS"},
	{uint64(uverbs.DeviceMemWindowType2A), "MEM_WINDOW_TYPE_2A"},
	{uint64(uverbs.DeviceMemWindowType2B), "MEM_WINDOW_TYPE_2B"},
	{uint64(uverbs.DeviceRCIPCsum), "RC_IP_CSUM"},
	{uint64(uverbs.DeviceRawIPCsum), "RAW_IP_CSUM"},
	{uint64(uverbs.DeviceManagedFlowSteering), "MANAGED_FLOW_STEERING"},
}

// capExNames are the bits above 31 print_device_cap_flags_ex knows.
var capExNames = []namedBit{
	{uint64(uverbs.DeviceRawScatterFCS), "RAW_SCATTER_FCS"},
	{uint64(uverbs.DevicePCIWriteEndPadding), "PCI_WRITE_END_PADDING"},
}

var odpGeneralNames = []namedBit{
	{uint64(uverbs.ODPSupport), "ODP_SUPPORT"},
	{uint64(uverbs.ODPSupportImplicit), "ODP_SUPPORT_IMPLICIT"},
}

var odpTransportNames = []namedBit{
	{uint64(uverbs.ODPSupportSend), "SUPPORT_SEND"},
	{uint64(uverbs.ODPSupportRecv), "SUPPORT_RECV"},
	{uint64(uverbs.ODPSupportWrite), "SUPPORT_WRITE"},
	{uint64(uverbs.ODPSupportRead), "SUPPORT_READ"},
	{uint64(uverbs.ODPSupportAtomic), "SUPPORT_ATOMIC"},
	{uint64(uverbs.ODPSupportSRQRecv), "SUPPORT_SRQ"},
}

var rawPacketNames = []namedBit{
	{uint64(uverbs.RawPacketCVLANStripping), "C-VLAN stripping offload"},
	{uint64(uverbs.RawPacketScatterFCS), "Scatter FCS offload"},
	{uint64(uverbs.RawPacketIPCsum), "IP csum offload"},
	{uint64(uverbs.RawPacketDelayDrop), "Delay drop"},
}

func guidStr(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48&0xffff, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// transportStr and transportNum print ibv_transport_type as devinfo.c does
// (IBV_TRANSPORT_UNKNOWN is -1).
func transportStr(t uverbs.Transport) string { return t.String() }

func transportNum(t uverbs.Transport) int {
	if t == uverbs.TransportUnknown {
		return -1
	}
	return int(t)
}

// portStateStr is devinfo.c's own port_state_str (no NOP, no ACTIVE_DEFER).
func portStateStr(s uverbs.PortState) string {
	if s >= uverbs.PortDown && s <= uverbs.PortActive {
		return s.String()
	}
	return "invalid state"
}

func mtuStr(m uverbs.MTU) string {
	if n := m.Bytes(); n != 0 {
		return strconv.Itoa(n)
	}
	return "invalid MTU"
}

func widthStr(w uverbs.Width) string {
	if n := w.Lanes(); n != 0 {
		return strconv.Itoa(n)
	}
	return "invalid width"
}

func vlStr(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}
