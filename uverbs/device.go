package uverbs

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrNoDevice is returned (wrapped) by DeviceByName when no RDMA device with a
// uverbs character device has the given name.
var ErrNoDevice = errors.New("uverbs: no such RDMA device")

// DriverID identifies the kernel driver behind a device (enum rdma_driver_id
// in rdma/ib_user_ioctl_verbs.h). Every ioctl command must carry the driver id
// of its device; the kernel reports it through netlink.
type DriverID uint32

// Driver ids, with their C names.
const (
	DriverUnknown   DriverID = 0  // RDMA_DRIVER_UNKNOWN
	DriverMLX5      DriverID = 1  // RDMA_DRIVER_MLX5
	DriverMLX4      DriverID = 2  // RDMA_DRIVER_MLX4
	DriverCXGB3     DriverID = 3  // RDMA_DRIVER_CXGB3 (driver removed from Linux)
	DriverCXGB4     DriverID = 4  // RDMA_DRIVER_CXGB4
	DriverMTHCA     DriverID = 5  // RDMA_DRIVER_MTHCA
	DriverBNXTRE    DriverID = 6  // RDMA_DRIVER_BNXT_RE
	DriverOCRDMA    DriverID = 7  // RDMA_DRIVER_OCRDMA
	DriverNES       DriverID = 8  // RDMA_DRIVER_NES (driver removed from Linux)
	DriverI40IW     DriverID = 9  // RDMA_DRIVER_I40IW
	DriverIRDMA     DriverID = 9  // RDMA_DRIVER_IRDMA (= RDMA_DRIVER_I40IW)
	DriverVMWPVRDMA DriverID = 10 // RDMA_DRIVER_VMW_PVRDMA
	DriverQEDR      DriverID = 11 // RDMA_DRIVER_QEDR
	DriverHNS       DriverID = 12 // RDMA_DRIVER_HNS
	DriverUSNIC     DriverID = 13 // RDMA_DRIVER_USNIC
	DriverRXE       DriverID = 14 // RDMA_DRIVER_RXE
	DriverHFI1      DriverID = 15 // RDMA_DRIVER_HFI1
	DriverQIB       DriverID = 16 // RDMA_DRIVER_QIB
	DriverEFA       DriverID = 17 // RDMA_DRIVER_EFA
	DriverSIW       DriverID = 18 // RDMA_DRIVER_SIW
	DriverERDMA     DriverID = 19 // RDMA_DRIVER_ERDMA
	DriverMANA      DriverID = 20 // RDMA_DRIVER_MANA (Linux 6.2+; not in 6.1's header)
	DriverIONIC     DriverID = 21 // RDMA_DRIVER_IONIC (newer kernels; not in 6.1's header)
)

// driverNames are rdma-core's provider names (verbs_device_ops.name) for
// each driver id; drivers without a current rdma-core provider keep their
// kernel name.
var driverNames = [...]string{
	DriverUnknown:   "unknown",
	DriverMLX5:      "mlx5",
	DriverMLX4:      "mlx4",
	DriverCXGB3:     "cxgb3",
	DriverCXGB4:     "cxgb4",
	DriverMTHCA:     "mthca",
	DriverBNXTRE:    "bnxt_re",
	DriverOCRDMA:    "ocrdma",
	DriverNES:       "nes",
	DriverIRDMA:     "irdma",
	DriverVMWPVRDMA: "pvrdma",
	DriverQEDR:      "qedr",
	DriverHNS:       "hns",
	DriverUSNIC:     "usnic",
	DriverRXE:       "rxe",
	DriverHFI1:      "hfi1verbs",
	DriverQIB:       "ipathverbs",
	DriverEFA:       "efa",
	DriverSIW:       "siw",
	DriverERDMA:     "erdma",
	DriverMANA:      "mana",
	DriverIONIC:     "ionic",
}

// String returns rdma-core's provider name for the driver ("mlx5", "rxe",
// "siw", ...), "unknown" for DriverUnknown and "driver(N)" for ids it does
// not know.
func (d DriverID) String() string {
	if int(d) < len(driverNames) {
		return driverNames[d]
	}
	return "driver(" + strconv.FormatUint(uint64(d), 10) + ")"
}

// NodeType is the IB node type of a device, as the kernel reports it in
// sysfs node_type and RDMA_NLDEV_ATTR_DEV_NODE_TYPE (enum rdma_node_type,
// libibverbs' enum ibv_node_type). 0 means unknown.
type NodeType uint8

// Node types, with their C names.
const (
	NodeUnknown     NodeType = 0 // IBV_NODE_UNKNOWN (-1 in libibverbs)
	NodeCA          NodeType = 1 // RDMA_NODE_IB_CA
	NodeSwitch      NodeType = 2 // RDMA_NODE_IB_SWITCH
	NodeRouter      NodeType = 3 // RDMA_NODE_IB_ROUTER
	NodeRNIC        NodeType = 4 // RDMA_NODE_RNIC
	NodeUSNIC       NodeType = 5 // RDMA_NODE_USNIC
	NodeUSNICUDP    NodeType = 6 // RDMA_NODE_USNIC_UDP
	NodeUnspecified NodeType = 7 // RDMA_NODE_UNSPECIFIED
)

var nodeTypeNames = [...]string{
	NodeCA:          "InfiniBand channel adapter",
	NodeSwitch:      "InfiniBand switch",
	NodeRouter:      "InfiniBand router",
	NodeRNIC:        "iWARP NIC",
	NodeUSNIC:       "usNIC",
	NodeUSNICUDP:    "usNIC UDP",
	NodeUnspecified: "unspecified",
}

// String returns what libibverbs' ibv_node_type_str returns: "InfiniBand
// channel adapter", "InfiniBand switch", "InfiniBand router", "iWARP NIC",
// "usNIC", "usNIC UDP", "unspecified", and "unknown" for anything else.
func (n NodeType) String() string {
	if n >= NodeCA && n <= NodeUnspecified {
		return nodeTypeNames[n]
	}
	return "unknown"
}

// Transport is the transport of a device, derived from its node type as
// libibverbs does (enum ibv_transport_type; the numbers are libibverbs').
type Transport uint8

// Transports, with their C names.
const (
	TransportIB          Transport = 0    // IBV_TRANSPORT_IB
	TransportIWARP       Transport = 1    // IBV_TRANSPORT_IWARP
	TransportUSNIC       Transport = 2    // IBV_TRANSPORT_USNIC
	TransportUSNICUDP    Transport = 3    // IBV_TRANSPORT_USNIC_UDP
	TransportUnspecified Transport = 4    // IBV_TRANSPORT_UNSPECIFIED
	TransportUnknown     Transport = 0xff // IBV_TRANSPORT_UNKNOWN (-1 in libibverbs)
)

// String returns the name ibv_devinfo prints for the transport
// ("InfiniBand", "iWARP", "usNIC", "usNIC UDP", "unspecified"), and "invalid
// transport" for anything else, as ibv_devinfo does. ibv_devinfo follows the
// name with the number in parentheses; that formatting is the caller's.
func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// transport maps a node type to its transport as libibverbs' init.c does:
// CA, switch and router are InfiniBand (RoCE devices such as rxe and mlx5
// Ethernet ports included), RNIC is iWARP.
func (n NodeType) transport() Transport {
	switch n {
	case NodeCA, NodeSwitch, NodeRouter:
		return TransportIB
	case NodeRNIC:
		return TransportIWARP
	case NodeUSNIC:
		return TransportUSNIC
	case NodeUSNICUDP:
		return TransportUSNICUDP
	case NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

// Port is one port of a device.
type Port struct {
	Number int // port number, 1-based
	// Netdev is the network device the port runs on (RoCE, iWARP): "" for
	// InfiniBand ports and for netdevs in another network namespace. On
	// the sysfs path it comes from GID 0's netdev (or rxe's `parent`);
	// Linux 6.1 gives iWARP GIDs no netdev, so siw's is "" there.
	Netdev      string
	NetdevIndex int // its interface index (0 if none or unknown)
}

// Device describes an RDMA device that has a uverbs character device.
type Device struct {
	Name  string // kernel device name, e.g. "rxe0"
	Index uint32 // kernel device index (RDMA_NLDEV_ATTR_DEV_INDEX); 0 when discovered through sysfs

	// NodeGUID and SysImageGUID are the GUIDs as numbers: the value that
	// sysfs prints as "0002:c903:0049:8f20" is 0x0002c90300498f20, and its
	// big-endian bytes are the GUID on the wire. This is be64toh() of what
	// libibverbs' ibv_get_device_guid returns, and fmt's %016x of it is the
	// GUID column of ibv_devices.
	NodeGUID     uint64
	SysImageGUID uint64

	NodeType  NodeType
	Transport Transport // derived from NodeType
	// Driver is the kernel's RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID. sysfs has
	// no such file, so on the sysfs path (and for the few drivers whose
	// char device reports none) it is inferred: the driver of the parent
	// device (mlx5_core → DriverMLX5), rxe's private `parent` attribute,
	// siw as the only software iWARP device; DriverUnknown otherwise.
	Driver DriverID

	FWVersion string // firmware version; "" for devices without firmware (rxe, siw)
	NodeDesc  string // node description (sysfs node_desc)

	CharDev    string // path of the uverbs char device, "/dev/infiniband/uverbsN"
	UverbsName string // "uverbsN"
	CoreABI    int    // core uverbs ABI (sysfs class/infiniband_verbs/abi_version; 6)
	DriverABI  int    // driver's uverbs ABI (netlink CHARDEV_ABI or uverbsN/abi_version): rxe 2, mlx5 1, siw 1

	Ports []Port // ascending by number

	// Source says how the device was discovered: "netlink" or "sysfs".
	Source string

	major, minor uint32 // the char device's number
}

// Values of Device.Source.
const (
	sourceNetlink = "netlink"
	sourceSysfs   = "sysfs"
)

// charDevDir is where udev/devtmpfs put the uverbs char devices.
const charDevDir = "/dev/infiniband"

func charDevPath(uverbsName string) string { return charDevDir + "/" + uverbsName }

// discovery holds what device discovery reads, so tests can point it at
// fixtures: the sysfs tree and the netlink transport.
type discovery struct {
	sys  sysfsReader
	dial func() (nlTransport, error) // nil: netlink unavailable
}

var defaultDiscovery = discovery{
	sys:  sysfsReader{fsys: os.DirFS("/sys")},
	dial: dialNetlink,
}

// Devices lists the RDMA devices that have a uverbs character device, in
// kernel device index order (the order of the kernel's netlink dump, which is
// the order rdma-core's ibv_get_device_list returns). It asks the kernel
// through RDMA netlink, as rdma-core does, and completes the answer from
// sysfs (node_desc, the core ABI). When netlink is unavailable or fails it
// falls back to sysfs alone; devices found that way have Index 0, are ordered
// by uverbs number, and have a Driver inferred from sysfs (see Device.Driver).
// No devices is not an error.
func Devices() ([]Device, error) {
	return defaultDiscovery.devices()
}

// DeviceByName returns the device named name (the kernel name, "rxe0",
// "mlx5_0"). The error wraps ErrNoDevice when there is none.
func DeviceByName(name string) (Device, error) {
	return defaultDiscovery.deviceByName(name)
}

func (d discovery) devices() ([]Device, error) {
	devs, nlErr := d.netlinkDevices()
	if nlErr == nil {
		return devs, nil
	}
	devs, sysErr := d.sys.devices()
	if sysErr != nil {
		return nil, fmt.Errorf("uverbs: devices: %w; sysfs fallback: %w", nlErr, sysErr)
	}
	return devs, nil
}

func (d discovery) deviceByName(name string) (Device, error) {
	devs, err := d.devices()
	if err != nil {
		return Device{}, fmt.Errorf("%w (looking up %q)", err, name)
	}
	for _, dev := range devs {
		if dev.Name == name {
			return dev, nil
		}
	}
	return Device{}, fmt.Errorf("%w: %q", ErrNoDevice, name)
}

// maxPorts bounds the port count taken from netlink: one request per port.
const maxPorts = 1024

// netlinkDevices discovers devices through RDMA netlink, as rdma-core's
// ibdev_nl.c does: a dump of RDMA_NLDEV_CMD_GET, then for each device its
// uverbs char device (GET_CHARDEV, falling back to sysfs when the kernel has
// no answer for it) and each port's netdev (PORT_GET). Devices without a
// uverbs char device are left out.
func (d discovery) netlinkDevices() ([]Device, error) {
	if d.dial == nil {
		return nil, fmt.Errorf("netlink: %w", unix.EPROTONOSUPPORT)
	}
	t, err := d.dial()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer t.close()
	c := newNLClient(t)
	nds, err := c.getDevices()
	if err != nil {
		return nil, fmt.Errorf("netlink dump: %w", err)
	}
	core, err := d.sys.coreABI()
	if err != nil {
		// rdma-core assumes 6 when netlink answers for "uverbs".
		core = 6
	}
	var sysUverbs map[string]sysfsUverbs // by IB device name, read on first need
	devs := make([]Device, 0, len(nds))
	for _, nd := range nds {
		if !validName(nd.Name) {
			return nil, fmt.Errorf("netlink dump: bad device name %q", nd.Name)
		}
		if nd.Ports > maxPorts {
			return nil, fmt.Errorf("netlink dump: %s: %d ports", nd.Name, nd.Ports)
		}
		dev := Device{
			Name:         nd.Name,
			Index:        nd.Index,
			NodeGUID:     nd.NodeGUID,
			SysImageGUID: nd.SysImageGUID,
			NodeType:     NodeType(nd.NodeType),
			Transport:    NodeType(nd.NodeType).transport(),
			FWVersion:    nd.FWVersion,
			CoreABI:      core,
			Source:       sourceNetlink,
		}
		cd, err := c.getChardev(nd.Index)
		switch {
		case err == nil:
			dev.UverbsName = cd.Name
			dev.DriverABI = int(min(cd.ABI, 1<<31-1))
			dev.major, dev.minor = hugeDecodeDev(cd.Dev)
			if cd.HasDriverID {
				dev.Driver = DriverID(cd.DriverID)
			} else {
				dev.Driver = d.sys.inferDriver(nd.Name, dev.NodeType)
			}
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENODEV):
			// No uverbs client for this device (or it went away): look in
			// sysfs, as rdma-core does.
			if sysUverbs == nil {
				sysUverbs = make(map[string]sysfsUverbs)
				us, _ := d.sys.uverbsDevices()
				for _, u := range us {
					sysUverbs[u.IBDev] = u
				}
			}
			u, ok := sysUverbs[nd.Name]
			if !ok {
				continue
			}
			dev.UverbsName, dev.DriverABI = u.Name, u.ABI
			dev.major, dev.minor = u.Major, u.Minor
			dev.Driver = d.sys.inferDriver(nd.Name, dev.NodeType)
		default:
			return nil, fmt.Errorf("netlink chardev of %s: %w", nd.Name, err)
		}
		dev.CharDev = charDevPath(dev.UverbsName)
		if v, err := d.sys.read("class/infiniband/" + nd.Name + "/node_desc"); err == nil {
			dev.NodeDesc = v
		}
		dev.Ports = make([]Port, 0, nd.Ports)
		for p := uint32(1); p <= nd.Ports; p++ {
			np, err := c.getPort(nd.Index, p)
			switch {
			case err == nil:
				dev.Ports = append(dev.Ports, Port{Number: int(p), Netdev: np.Netdev, NetdevIndex: int(np.NetdevIndex)})
			case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENODEV), errors.Is(err, unix.EOPNOTSUPP):
				// The port query failed in the kernel: take the netdev from sysfs.
				nd, idx := d.sys.portNetdev(nd.Name, int(p))
				dev.Ports = append(dev.Ports, Port{Number: int(p), Netdev: nd, NetdevIndex: idx})
			default:
				return nil, fmt.Errorf("netlink port %d of %s: %w", p, nd.Name, err)
			}
		}
		devs = append(devs, dev)
	}
	sort.SliceStable(devs, func(i, j int) bool { return devs[i].Index < devs[j].Index })
	return devs, nil
}
