package uverbs

// Device and port queries: QUERY_DEVICE (extended, falling back to legacy)
// and QUERY_PORT (ioctl, falling back to write). rdma-core's counterparts are
// ibv_cmd_query_device_any and ibv_cmd_query_port in libibverbs/cmd_device.c;
// ibv_devinfo -v prints every field of both.

import (
	"errors"
	"fmt"

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

// QueryDevice asks the device what it can do: the extended QUERY_DEVICE
// (one syscall), or the legacy command on kernels that lack the extended
// one (EOPNOTSUPP or ENOSYS, as rdma-core falls back). Every call asks the
// kernel. The context keeps the first answer for the capability checks of
// the verbs that have one (on-demand paging, XRC, completion timestamps,
// CQ moderation): a check queries the device only while the context has
// not, so those verbs make no more syscalls than libibverbs' do.
func (c *Context) QueryDevice() (_ DeviceAttr, err error) {
	if sp := c.begin("QueryDevice"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	var req abi.IbUverbsExQueryDevice
	var resp abi.IbUverbsExQueryDeviceResp
	cmd := abi.Command{
		Num: abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE | abi.IB_USER_VERBS_CMD_FLAG_EXTENDED,
		In:  abi.Bytes(&req), Out: abi.Bytes(&resp),
		Quick: c.cpuOnly,
	}
	err = c.invoke("QueryDevice", &cmd)
	if err == nil {
		return c.keepCaps(c.deviceAttr(&resp, int(resp.ResponseLength))), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return DeviceAttr{}, err
	}
	var lreq abi.IbUverbsQueryDevice
	lcmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_QUERY_DEVICE, In: abi.Bytes(&lreq), Out: abi.Bytes(&resp.Base), Quick: c.cpuOnly}
	if err := c.invoke("QueryDevice", &lcmd); err != nil {
		return DeviceAttr{}, err
	}
	return c.keepCaps(c.deviceAttr(&resp, 0)), nil
}

// keepCaps keeps a, the context's first device attributes, for the
// capability checks, and returns it.
func (c *Context) keepCaps(a DeviceAttr) DeviceAttr {
	if c.caps.Load() == nil {
		kept := a
		c.caps.CompareAndSwap(nil, &kept)
	}
	return a
}

// capabilities is the device's attributes for a capability check (ODP,
// XRC, completion timestamps, CQ moderation): those of the context's first
// QueryDevice, which a check makes only if none was made yet. The
// capabilities a check reads do not change while a context is open, and
// libibverbs' providers read them once, at open: a verb whose check has
// run before makes no more syscalls than ibv_*'s.
func (c *Context) capabilities() (*DeviceAttr, error) {
	if a := c.caps.Load(); a != nil {
		return a, nil
	}
	if _, err := c.QueryDevice(); err != nil {
		return nil, err
	}
	return c.caps.Load(), nil // kept by that QueryDevice (keepCaps)
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
	a.FWVersion = c.fwVersion(b.FwVer)
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

// fwVersion is formatFWVersion, remembered: the firmware word does not
// change while the context is open, and QueryDevice then allocates only
// what its answer holds.
func (c *Context) fwVersion(raw uint64) string {
	if v := c.fw.Load(); v != nil && v.raw == raw {
		return v.s
	}
	v := &fwString{raw, formatFWVersion(c.dev.Driver, raw, c.dev.FWVersion)}
	c.fw.Store(v)
	return v.s
}

type fwString struct {
	raw uint64
	s   string
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

// QueryPort asks for the state of port (numbered from 1): ioctl
// DEVICE/QUERY_PORT, which also returns port_cap_flags2, or the write
// command where the kernel has no ioctl. One syscall.
func (c *Context) QueryPort(port int) (_ PortAttr, err error) {
	if sp := c.begin("QueryPort"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	if port < 1 || port > 255 {
		return PortAttr{}, argError("QueryPort", c.dev.Name, "port %d out of range 1..255", port)
	}
	var ex abi.IbUverbsQueryPortRespEx
	// rxe and siw read the netdev's link speed under rtnl_lock, a mutex
	// held only by other CPU-bound network configuration: quick there.
	tr := abi.TransportIoctl
	attrs := [1]abi.FlatAttr{{ID: abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, Len: 8, Data: uint64(port)}} // CONST_IN: 8 bytes inline
	done, err := c.flatIoctl("QueryPort", abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT, c.cpuOnly, attrs[:],
		abi.UVERBS_ATTR_QUERY_PORT_RESP, abi.Bytes(&ex))
	if !done {
		tr, err = c.queryPortBuilt(port, &ex)
	}
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

// queryPortBuilt is QueryPort's command through the builder (and the
// write form where the kernel has no ioctl), into *ex.
func (c *Context) queryPortBuilt(port int, ex *abi.IbUverbsQueryPortRespEx) (abi.Transport, error) {
	p := c.prepared(&c.portQuery, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT, buildPortQuery)
	b := p.Take()
	defer p.Done(b)
	if c.cpuOnly {
		b.Quick()
	}
	b.SetUint64(portQueryNum, uint64(port))
	tr, err := c.ioctl("QueryPort", b, func() error {
		req := abi.IbUverbsQueryPort{PortNum: uint8(port)}
		cmd := abi.Command{Num: abi.IB_USER_VERBS_CMD_QUERY_PORT, In: abi.Bytes(&req), Out: abi.Bytes(&ex.LegacyResp), Quick: c.cpuOnly}
		return c.fallback("QueryPort", &cmd)
	})
	if err == nil && tr == abi.TransportIoctl {
		copy(abi.Bytes(ex), b.Output(portQueryResp))
	}
	return tr, err
}

// QUERY_PORT's attributes, in the order buildPortQuery adds them.
const (
	portQueryNum abi.Attr = iota
	portQueryResp
)

// buildPortQuery adds QUERY_PORT's attributes (the port is set per call).
func buildPortQuery(b *abi.Ioctl) {
	b.Uint64In(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 0) // CONST_IN: always 8 bytes inline
	b.PtrOutLen(abi.UVERBS_ATTR_QUERY_PORT_RESP, len(abi.Bytes(&abi.IbUverbsQueryPortRespEx{})))
}
