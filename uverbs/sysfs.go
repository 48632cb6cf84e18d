package uverbs

// Device discovery through sysfs: the fallback when RDMA netlink is missing
// or fails, and the source of what netlink does not carry (node_desc, the core
// uverbs ABI, the driver of devices whose char device reports none).
//
// Files read (Linux 6.1 drivers/infiniband/core/{sysfs,uverbs_main}.c), all
// relative to the sysfs root:
//
//	class/infiniband_verbs/abi_version            core uverbs ABI ("6")
//	class/infiniband_verbs/uverbsN/ibdev          the IB device's name
//	class/infiniband_verbs/uverbsN/abi_version    the driver's uverbs ABI
//	class/infiniband_verbs/uverbsN/dev            "major:minor"
//	class/infiniband/<dev>/node_type              "1: CA"
//	class/infiniband/<dev>/node_guid              "0002:c903:0049:8f20"
//	class/infiniband/<dev>/sys_image_guid         same format
//	class/infiniband/<dev>/fw_ver                 may be empty
//	class/infiniband/<dev>/node_desc
//	class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs/0   netdev of GID 0 (RoCE only; EINVAL otherwise)
//	class/infiniband/<dev>/device/driver          link to the parent device's driver (hardware only)
//	class/infiniband/<dev>/parent                 rxe only: the netdev it runs on
//	class/net/<netdev>/ifindex

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// sysfsReader reads the sysfs tree through an fs.FS rooted at the sysfs
// mount point (os.DirFS("/sys") normally, a fixture tree in tests).
type sysfsReader struct {
	fsys fs.FS
}

// read returns a sysfs attribute without its trailing newline.
func (s sysfsReader) read(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	b, err := fs.ReadFile(s.fsys, name)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

func (s sysfsReader) readDir(name string) ([]string, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	ents, err := fs.ReadDir(s.fsys, name)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func (s sysfsReader) readLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return fs.ReadLink(s.fsys, name)
}

func (s sysfsReader) exists(name string) bool {
	if !fs.ValidPath(name) {
		return false
	}
	_, err := fs.Stat(s.fsys, name)
	return err == nil
}

const (
	sysVerbsClass = "class/infiniband_verbs"
	sysIBClass    = "class/infiniband"
	sysNetClass   = "class/net"
)

// validName reports whether name can be one path element under a sysfs
// class directory.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// parseGUID parses a GUID as sysfs prints it: four groups of one to four hex
// digits separated by colons ("0002:c903:0049:8f20"). The result is the
// GUID's value as a number: its big-endian bytes are the GUID on the wire.
func parseGUID(s string) (uint64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return 0, fmt.Errorf("GUID %q: want 4 colon-separated groups", s)
	}
	var g uint64
	for _, p := range parts {
		if len(p) < 1 || len(p) > 4 {
			return 0, fmt.Errorf("GUID %q: group %q", s, p)
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("GUID %q: group %q", s, p)
		}
		g = g<<16 | v
	}
	return g, nil
}

// formatGUID prints a GUID as sysfs and ibv_devinfo do.
func formatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, (g>>32)&0xffff, (g>>16)&0xffff, g&0xffff)
}

// parseNodeType parses node_type ("1: CA", "4: RNIC"): the number before the
// colon.
func parseNodeType(s string) (NodeType, error) {
	num, _, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("node type %q: no colon", s)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(num), 10, 8)
	if err != nil {
		return 0, fmt.Errorf("node type %q: %w", s, errors.Unwrap(err))
	}
	return NodeType(v), nil
}

// parseSysfsInt parses a non-negative decimal attribute such as abi_version.
func parseSysfsInt(s string) (int, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, errors.Unwrap(err))
	}
	return int(v), nil
}

// parseDevNumber parses a dev attribute ("231:192").
func parseDevNumber(s string) (major, minor uint32, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("device number %q: no colon", s)
	}
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("device number %q: not major:minor", s)
	}
	return uint32(ma), uint32(mi), nil
}

// parseIndexedName parses names such as "uverbs3" (prefix "uverbs") or a port
// directory "1" (prefix "") into their number.
func parseIndexedName(name, prefix string) (int, bool) {
	num, ok := strings.CutPrefix(name, prefix)
	if !ok || num == "" || len(num) > 9 {
		return 0, false
	}
	if len(num) > 1 && num[0] == '0' {
		return 0, false
	}
	v := 0
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// kernelDriverIDs maps the driver bound to an RDMA device's parent device
// (the `device/driver` link) to its driver id. Only mlx5_core was seen on a
// real system (ABI-NOTES §2); the others come from reading 6.1's drivers
// and are unverified.
var kernelDriverIDs = map[string]DriverID{
	"mlx5_core":  DriverMLX5,
	"mlx4_core":  DriverMLX4,
	"cxgb4":      DriverCXGB4,
	"ib_mthca":   DriverMTHCA,
	"bnxt_en":    DriverBNXTRE,
	"be2net":     DriverOCRDMA,
	"i40e":       DriverIRDMA,
	"ice":        DriverIRDMA,
	"vmw_pvrdma": DriverVMWPVRDMA,
	"qede":       DriverQEDR,
	"hns3":       DriverHNS,
	"enic":       DriverUSNIC,
	"hfi1":       DriverHFI1,
	"ib_qib":     DriverQIB,
	"efa":        DriverEFA,
	"erdma":      DriverERDMA,
	"mana":       DriverMANA,
}

// inferDriver guesses the driver of IB device name from sysfs, which has no
// file naming it: the parent device's driver for hardware; for software
// devices (no parent device) rxe's private `parent` attribute, and siw as the
// only software iWARP (RNIC) driver. DriverUnknown when nothing fits.
func (s sysfsReader) inferDriver(name string, nt NodeType) DriverID {
	if !validName(name) {
		return DriverUnknown
	}
	dir := path.Join(sysIBClass, name)
	if target, err := s.readLink(path.Join(dir, "device", "driver")); err == nil {
		return kernelDriverIDs[path.Base(target)]
	}
	if s.exists(path.Join(dir, "device")) {
		return DriverUnknown // a parent device without a driver link
	}
	if s.exists(path.Join(dir, "parent")) {
		return DriverRXE
	}
	if nt == NodeRNIC {
		return DriverSIW
	}
	return DriverUnknown
}

// coreABI reads the core uverbs ABI version.
func (s sysfsReader) coreABI() (int, error) {
	v, err := s.read(path.Join(sysVerbsClass, "abi_version"))
	if err != nil {
		return 0, err
	}
	return parseSysfsInt(v)
}

// portNetdev finds the netdev behind port p of IB device name: the netdev of
// GID 0 (RoCE), else rxe's `parent` attribute. "" when sysfs does not say
// (InfiniBand ports; iWARP ports on 6.1, whose GIDs carry no netdev:
// reading ndevs/0 fails with EINVAL. 6.12 fills it for siw).
func (s sysfsReader) portNetdev(name string, p int) (string, int) {
	dir := path.Join(sysIBClass, name)
	nd, err := s.read(path.Join(dir, "ports", strconv.Itoa(p), "gid_attrs", "ndevs", "0"))
	if err != nil || !validName(nd) {
		nd, err = s.read(path.Join(dir, "parent"))
		if err != nil || !validName(nd) {
			return "", 0
		}
	}
	idx := 0
	if v, err := s.read(path.Join(sysNetClass, nd, "ifindex")); err == nil {
		if n, err := parseSysfsInt(v); err == nil {
			idx = n
		}
	}
	return nd, idx
}

// ports lists the port numbers of IB device name, ascending.
func (s sysfsReader) ports(name string) ([]int, error) {
	ents, err := s.readDir(path.Join(sysIBClass, name, "ports"))
	if err != nil {
		return nil, err
	}
	var ps []int
	for _, e := range ents {
		if n, ok := parseIndexedName(e, ""); ok && n > 0 {
			ps = append(ps, n)
		}
	}
	sort.Ints(ps)
	return ps, nil
}

// sysfsUverbs is one class/infiniband_verbs/uverbsN entry.
type sysfsUverbs struct {
	Name         string // "uverbsN"
	Num          int    // N
	IBDev        string
	ABI          int
	Major, Minor uint32
}

// uverbsDevices lists the uverbs char devices, by N. A missing class
// directory means no uverbs devices (ib_uverbs not loaded): no error.
func (s sysfsReader) uverbsDevices() ([]sysfsUverbs, error) {
	ents, err := s.readDir(sysVerbsClass)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []sysfsUverbs
	for _, e := range ents {
		n, ok := parseIndexedName(e, "uverbs")
		if !ok {
			continue // abi_version
		}
		dir := path.Join(sysVerbsClass, e)
		u := sysfsUverbs{Name: e, Num: n}
		ibdev, err := s.read(path.Join(dir, "ibdev"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we looked
		}
		if err != nil {
			return nil, err
		}
		if !validName(ibdev) {
			return nil, fmt.Errorf("%s/ibdev: bad device name %q", dir, ibdev)
		}
		u.IBDev = ibdev
		v, err := s.read(path.Join(dir, "abi_version"))
		if err != nil {
			return nil, err
		}
		if u.ABI, err = parseSysfsInt(v); err != nil {
			return nil, fmt.Errorf("%s/abi_version: %w", dir, err)
		}
		v, err = s.read(path.Join(dir, "dev"))
		if err != nil {
			return nil, err
		}
		if u.Major, u.Minor, err = parseDevNumber(v); err != nil {
			return nil, fmt.Errorf("%s/dev: %w", dir, err)
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Num < out[j].Num })
	return out, nil
}

// ibDevice reads the attributes of IB device name into d (everything but
// the uverbs fields). node_type and node_guid are required.
func (s sysfsReader) ibDevice(name string, d *Device) error {
	if !validName(name) {
		return fmt.Errorf("bad device name %q", name)
	}
	dir := path.Join(sysIBClass, name)
	v, err := s.read(path.Join(dir, "node_type"))
	if err != nil {
		return err
	}
	if d.NodeType, err = parseNodeType(v); err != nil {
		return fmt.Errorf("%s/node_type: %w", dir, err)
	}
	d.Transport = d.NodeType.transport()
	v, err = s.read(path.Join(dir, "node_guid"))
	if err != nil {
		return err
	}
	if d.NodeGUID, err = parseGUID(v); err != nil {
		return fmt.Errorf("%s/node_guid: %w", dir, err)
	}
	if v, err := s.read(path.Join(dir, "sys_image_guid")); err == nil {
		if d.SysImageGUID, err = parseGUID(v); err != nil {
			return fmt.Errorf("%s/sys_image_guid: %w", dir, err)
		}
	}
	if v, err := s.read(path.Join(dir, "fw_ver")); err == nil {
		d.FWVersion = v
	}
	if v, err := s.read(path.Join(dir, "node_desc")); err == nil {
		d.NodeDesc = v
	}
	d.Driver = s.inferDriver(name, d.NodeType)
	ps, err := s.ports(name)
	if err != nil {
		return err
	}
	d.Ports = make([]Port, 0, len(ps))
	for _, p := range ps {
		nd, idx := s.portNetdev(name, p)
		d.Ports = append(d.Ports, Port{Number: p, Netdev: nd, NetdevIndex: idx})
	}
	return nil
}

// devices discovers every device with a uverbs char device from sysfs alone,
// ordered by uverbs number (sysfs does not show the kernel's device index).
func (s sysfsReader) devices() ([]Device, error) {
	us, err := s.uverbsDevices()
	if err != nil {
		return nil, err
	}
	core := 0
	if len(us) > 0 {
		if core, err = s.coreABI(); err != nil {
			return nil, fmt.Errorf("core ABI version: %w", err)
		}
	}
	devs := make([]Device, 0, len(us))
	for _, u := range us {
		d := Device{
			Name:       u.IBDev,
			UverbsName: u.Name,
			CharDev:    charDevPath(u.Name),
			CoreABI:    core,
			DriverABI:  u.ABI,
			Source:     sourceSysfs,
			major:      u.Major,
			minor:      u.Minor,
		}
		err := s.ibDevice(u.IBDev, &d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we looked
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u.IBDev, err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}
