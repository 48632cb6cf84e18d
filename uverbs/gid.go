package uverbs

// GID and P_Key queries: the ioctl methods DEVICE/QUERY_GID_TABLE and
// DEVICE/QUERY_GID_ENTRY, with the sysfs fallback rdma-core uses on kernels
// without them (libibverbs/cmd_device.c query_gid_table_fb and
// query_sysfs_gid_entry). P_Keys have no command at all: rdma-core reads
// them from sysfs too.
//
// Files read (Linux 6.1 drivers/infiniband/core/sysfs.c), relative to the
// sysfs root:
//
//	class/infiniband/<dev>/ports/<p>/gids/<i>              "fe80:0000:0000:0000:5054:00ff:fe12:3456"; unused slots read as zeros
//	class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i>   "IB/RoCE v1" or "RoCE v2"; unused slots fail with EINVAL
//	class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs/<i>   netdev name; EINVAL when the GID has none
//	class/infiniband/<dev>/ports/<p>/link_layer            "InfiniBand", "Ethernet"
//	class/infiniband/<dev>/ports/<p>/pkeys/<i>             "0xffff"
//	class/net/<netdev>/ifindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/abi"
	"golang.org/x/sys/unix"
)

// GIDType is the type of a GID table entry (enum ib_uverbs_gid_type).
type GIDType uint8

// GID types.
const (
	GIDTypeIB     GIDType = 0 // IB_UVERBS_GID_TYPE_IB: InfiniBand (and iWARP)
	GIDTypeRoCEv1 GIDType = 1 // IB_UVERBS_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = 2 // IB_UVERBS_GID_TYPE_ROCE_V2
)

// String is "IB", "RoCE v1", "RoCE v2", or "GIDType(N)".
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "GIDType(" + strconv.Itoa(int(t)) + ")"
}

// GIDEntry is one valid entry of a port's GID table (struct ibv_gid_entry).
type GIDEntry struct {
	GID         [16]byte // network byte order, as on the wire
	Index       int      // index in the port's table (the sgid_index of an address)
	Port        int
	Type        GIDType
	NetdevIndex int    // interface index of the GID's netdev; 0 if none (InfiniBand, iWARP)
	Netdev      string // its name; "" if none or not visible in this network namespace
}

// maxGIDEntries is what one QUERY_GID_TABLE call can return: an ioctl
// attribute is at most 65535 bytes, so 2047 entries of 32 bytes. rdma-core
// callers are bound by the same limit.
const maxGIDEntries = 0xffff / gidEntrySize

const gidEntrySize = 32 // sizeof(struct ib_uverbs_gid_entry); pinned by package abi's layout test

// QueryGIDTable returns every valid GID of every port, ordered by port and
// index: one ioctl (DEVICE/QUERY_GID_TABLE), or, on kernels without it,
// sysfs (no syscall on the command file; Transports reports "none").
func (c *Context) QueryGIDTable() (_ []GIDEntry, err error) {
	if sp := c.begin("QueryGIDTable"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	const verb = "QueryGIDTable"
	buf := make([]byte, maxGIDEntries*gidEntrySize)
	var num [8]byte
	b := abi.NewIoctl(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_TABLE)
	b.Quick() // the core's GID table, as QUERY_GID_ENTRY
	defer b.Release()
	b.Uint64In(abi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, gidEntrySize)
	b.Uint32In(abi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0)
	b.PtrOut(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, buf)
	b.PtrOut(abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, num[:])
	var es []GIDEntry
	tr, err := c.ioctlOr(verb, b, abi.TransportNone, func() (err error) {
		es, err = gidTableSysfs(defaultDiscovery.sys, c.dev.Name, c.dev.Transport)
		return err
	})
	if err != nil || tr != abi.TransportIoctl {
		return es, err
	}
	n := ne.Uint64(num[:])
	if n > maxGIDEntries {
		return nil, opError(verb, c.dev.Name, abi.TransportIoctl, fmt.Errorf("kernel returned %d entries for a table of %d", n, maxGIDEntries))
	}
	es = make([]GIDEntry, 0, n)
	for i := 0; i < int(n); i++ {
		var e GIDEntry
		decodeGIDEntry(&e, buf[i*gidEntrySize:(i+1)*gidEntrySize])
		e.Netdev = c.netdevName(e.NetdevIndex)
		es = append(es, e)
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Port != es[j].Port {
			return es[i].Port < es[j].Port
		}
		return es[i].Index < es[j].Index
	})
	return es, nil
}

// QueryGID returns entry index of port's GID table: one ioctl
// (DEVICE/QUERY_GID_ENTRY), or sysfs on kernels without it. An unused
// entry fails with ENODATA (errors.Is(err, unix.ENODATA)); an index past
// the table, or a bad port, with EINVAL.
func (c *Context) QueryGID(port, index int) (e GIDEntry, err error) {
	if sp := c.begin("QueryGID"); sp.rec != nil {
		defer func() { sp.end(err) }()
	}
	err = c.queryGID(&e, port, index)
	return
}

// queryGID is QueryGID without its cost span, into *e (the entry is not
// copied on its way out): a provider's query inside another verb (rxe's
// CreateAH) counts as that verb's.
func (c *Context) queryGID(e *GIDEntry, port, index int) error {
	const verb = "QueryGID"
	if port < 1 || port > 255 || index < 0 || index > 1<<31-1 {
		return argError(verb, c.dev.Name, "port %d, index %d out of range", port, index)
	}
	// The flat path: the attributes on the stack, one syscall. A kernel
	// without the method sends us on to the builder's, which falls back
	// to sysfs.
	var out [gidEntrySize]byte
	attrs := [...]abi.FlatAttr{
		{ID: abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, Len: 8, Data: uint64(port)},
		{ID: abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, Len: 8, Data: uint64(index)},
		{ID: abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, Len: 4},
	}
	if done, err := c.flatIoctl(verb, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY, true, attrs[:],
		abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, out[:]); done {
		if err != nil {
			return err
		}
		decodeGIDEntry(e, out[:])
		e.Netdev = c.netdevName(e.NetdevIndex)
		return nil
	}
	p := c.prepared(&c.gidQuery, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY, buildGIDQuery)
	b := p.Take()
	b.SetUint64(gidQueryPort, uint64(port))
	b.SetUint64(gidQueryIndex, uint64(index))
	tr, err := c.ioctlOr(verb, b, abi.TransportNone, func() (err error) {
		*e, err = gidEntrySysfs(defaultDiscovery.sys, c.dev.Name, c.dev.Transport, port, index)
		return err
	})
	if err == nil && tr == abi.TransportIoctl {
		if entry := b.Output(gidQueryEntry); len(entry) == gidEntrySize {
			decodeGIDEntry(e, entry)
		} else {
			err = opError(verb, c.dev.Name, abi.TransportIoctl, errors.New("kernel did not write the GID entry"))
		}
	}
	// Given back here rather than deferred: this is the cheapest command,
	// where a deferred call is a visible part of the cost; nothing above
	// panics short of a runtime fault.
	p.Done(b)
	if err != nil {
		return err
	}
	if tr == abi.TransportIoctl {
		e.Netdev = c.netdevName(e.NetdevIndex)
	}
	return nil
}

// QUERY_GID_ENTRY's attributes, in the order buildGIDQuery adds them.
const (
	gidQueryPort abi.Attr = iota
	gidQueryIndex
	gidQueryFlags
	gidQueryEntry
)

// buildGIDQuery adds QUERY_GID_ENTRY's attributes (port and index are set
// per call).
func buildGIDQuery(b *abi.Ioctl) {
	b.Quick() // the core's GID table, read under its lock: no driver call, on every device
	b.Uint64In(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, 0)
	b.Uint64In(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, 0)
	b.Uint32In(abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
	b.PtrOutLen(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, gidEntrySize)
}

// netdevName names interface idx from the context's cache, seeded with
// the ports' netdevs that discovery found (RoCE GIDs live on them), so a
// GID query costs its one command; other interfaces (VLANs, macvlans) are
// resolved once each.
func (c *Context) netdevName(idx int) string {
	// The ports' own netdevs, which hold RoCE's GIDs, from the Device
	// (never written after discovery): no lock.
	for i := range c.dev.Ports {
		if p := &c.dev.Ports[i]; p.NetdevIndex == idx && idx > 0 && p.Netdev != "" {
			return p.Netdev
		}
	}
	c.netdevMu.Lock()
	defer c.netdevMu.Unlock()
	if c.netdevs == nil {
		c.netdevs = netdevNames{}
		for _, p := range c.dev.Ports {
			if p.NetdevIndex > 0 && p.Netdev != "" {
				c.netdevs[p.NetdevIndex] = p.Netdev
			}
		}
	}
	return c.netdevs.name(idx)
}

// QueryPKey returns entry index of port's P_Key table, from sysfs (the
// kernel has no command for it; rdma-core's ibv_query_pkey reads the same
// file).
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	const verb = "QueryPKey"
	if port < 1 || port > 255 || index < 0 {
		return 0, argError(verb, c.dev.Name, "port %d, index %d out of range", port, index)
	}
	p, err := pkeySysfs(defaultDiscovery.sys, c.dev.Name, port, index)
	return p, opError(verb, c.dev.Name, abi.TransportNone, err)
}

// decodeGIDEntry decodes one struct ib_uverbs_gid_entry into *e, Netdev
// left empty: the caller names the netdev (Context.netdevName).
func decodeGIDEntry(e *GIDEntry, b []byte) {
	_ = b[31]
	*e = GIDEntry{Index: int(ne.Uint32(b[16:])), Port: int(ne.Uint32(b[20:])), Type: GIDType(ne.Uint32(b[24:])),
		NetdevIndex: int(ne.Uint32(b[28:]))}
	copy(e.GID[:], b[0:16])
}

// netdevNames resolves interface indexes to names, once each, as glibc's
// if_indextoname does: SIOCGIFNAME on a socket (three syscalls, none on the
// command file). Names are cached for the context's life: an interface
// renamed meanwhile keeps its old name here.
type netdevNames map[int]string

func (m netdevNames) name(idx int) string {
	if idx <= 0 {
		return ""
	}
	if n, ok := m[idx]; ok {
		return n
	}
	m[idx] = ifName(idx)
	return m[idx]
}

// ifName is the name of interface idx in this network namespace, "" if
// there is none.
func ifName(idx int) string {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return ""
	}
	ifr.SetUint32(uint32(idx))
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr); err != nil {
		return ""
	}
	return ifr.Name()
}

// Values of gid_attrs/types/<i> (rdma-core's V1_TYPE and V2_TYPE).
const (
	sysfsGIDTypeV1 = "IB/RoCE v1"
	sysfsGIDTypeV2 = "RoCE v2"
)

// parseSysfsGID parses a GID as sysfs prints it: eight groups of four hex
// digits separated by colons.
func parseSysfsGID(s string) ([16]byte, error) {
	var g [16]byte
	if len(s) != 39 {
		return g, fmt.Errorf("GID %q: want 8 groups of 4 hex digits", s)
	}
	for i := 0; i < 8; i++ {
		grp := s[i*5 : i*5+4]
		if i < 7 && s[i*5+4] != ':' {
			return g, fmt.Errorf("GID %q: want 8 groups of 4 hex digits", s)
		}
		v, err := strconv.ParseUint(grp, 16, 16)
		if err != nil || strings.ContainsAny(grp, "+-_") {
			return g, fmt.Errorf("GID %q: group %q", s, grp)
		}
		binary.BigEndian.PutUint16(g[i*2:], uint16(v))
	}
	return g, nil
}

// formatSysfsGID prints a GID as sysfs does.
func formatSysfsGID(g [16]byte) string {
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%04x", binary.BigEndian.Uint16(g[i*2:]))
	}
	return b.String()
}

// parseSysfsGIDType maps a gid_attrs/types value to a GID type. The sysfs
// name "IB/RoCE v1" covers two kernel types: it is RoCE v1 on an Ethernet
// port and IB elsewhere. rdma-core's fallback calls every Ethernet
// "IB/RoCE v1" GID RoCE v1; iWARP ports (siw) have Ethernet link layers
// but their GIDs are IB to the kernel, so goverbs says IB for them, which
// is what the ioctl answers.
func parseSysfsGIDType(s string, ll LinkLayer, tr Transport) (GIDType, error) {
	switch s {
	case sysfsGIDTypeV1:
		if ll == LinkLayerEthernet && tr != TransportIWARP {
			return GIDTypeRoCEv1, nil
		}
		return GIDTypeIB, nil
	case sysfsGIDTypeV2:
		return GIDTypeRoCEv2, nil
	}
	return 0, fmt.Errorf("GID type %q: %w", s, unix.EOPNOTSUPP)
}

// parseSysfsLinkLayer maps ports/<p>/link_layer.
func parseSysfsLinkLayer(s string) LinkLayer {
	switch s {
	case "InfiniBand":
		return LinkLayerInfiniBand
	case "Ethernet":
		return LinkLayerEthernet
	}
	return LinkLayerUnspecified
}

// parseSysfsPKey parses a P_Key ("0xffff").
func parseSysfsPKey(s string) (uint16, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || h == "" || len(h) > 4 || strings.ContainsAny(h, "+-_") {
		return 0, fmt.Errorf("P_Key %q", s)
	}
	v, err := strconv.ParseUint(h, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("P_Key %q", s)
	}
	return uint16(v), nil
}

func portDir(dev string, port int) string {
	return path.Join(sysIBClass, dev, "ports", strconv.Itoa(port))
}

// gidTableSysfs is QueryGIDTable read from sysfs: every port, every
// non-zero GID, as rdma-core's query_gid_table_fb.
func gidTableSysfs(s sysfsReader, dev string, tr Transport) ([]GIDEntry, error) {
	if !validName(dev) {
		return nil, fmt.Errorf("device name %q: %w", dev, unix.EINVAL)
	}
	ports, err := s.ports(dev)
	if err != nil {
		return nil, err
	}
	var es []GIDEntry
	for _, p := range ports {
		n, err := gidTableLen(s, dev, p)
		if err != nil {
			return nil, err
		}
		ll := parseSysfsLinkLayer(readOr(s, path.Join(portDir(dev, p), "link_layer")))
		for i := 0; i < n; i++ {
			e, err := gidEntryFromSysfs(s, dev, tr, ll, p, i)
			if errors.Is(err, unix.ENODATA) {
				continue
			}
			if err != nil {
				return nil, err
			}
			es = append(es, e)
		}
	}
	return es, nil
}

// gidEntrySysfs is QueryGID read from sysfs.
func gidEntrySysfs(s sysfsReader, dev string, tr Transport, port, index int) (GIDEntry, error) {
	if !validName(dev) {
		return GIDEntry{}, fmt.Errorf("device name %q: %w", dev, unix.EINVAL)
	}
	ll := parseSysfsLinkLayer(readOr(s, path.Join(portDir(dev, port), "link_layer")))
	return gidEntryFromSysfs(s, dev, tr, ll, port, index)
}

// gidTableLen counts the gids/<i> files of a port (the gid_tbl_len the
// kernel reports).
func gidTableLen(s sysfsReader, dev string, port int) (int, error) {
	names, err := s.readDir(path.Join(portDir(dev, port), "gids"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if _, ok := parseIndexedName(name, ""); ok {
			n++
		}
	}
	return n, nil
}

// gidEntryFromSysfs reads one entry; ENODATA for an unused (all-zero) one,
// EINVAL for a port or index the device does not have.
func gidEntryFromSysfs(s sysfsReader, dev string, tr Transport, ll LinkLayer, port, index int) (GIDEntry, error) {
	dir := portDir(dev, port)
	idx := strconv.Itoa(index)
	v, err := s.read(path.Join(dir, "gids", idx))
	if errors.Is(err, fs.ErrNotExist) {
		return GIDEntry{}, fmt.Errorf("port %d GID %d: %w", port, index, unix.EINVAL)
	}
	if err != nil {
		return GIDEntry{}, err
	}
	g, err := parseSysfsGID(v)
	if err != nil {
		return GIDEntry{}, err
	}
	if g == ([16]byte{}) {
		return GIDEntry{}, fmt.Errorf("port %d GID %d: %w", port, index, unix.ENODATA)
	}
	e := GIDEntry{GID: g, Index: index, Port: port}
	t, err := s.read(path.Join(dir, "gid_attrs", "types", idx))
	switch {
	case err == nil:
		if e.Type, err = parseSysfsGIDType(t, ll, tr); err != nil {
			return GIDEntry{}, err
		}
	case errors.Is(err, unix.EINVAL), errors.Is(err, fs.ErrNotExist):
		// InfiniBand ports fail with EINVAL; kernels without gid_attrs
		// have no file: both mean IB/RoCE v1 (rdma-core's rule).
		e.Type, _ = parseSysfsGIDType(sysfsGIDTypeV1, ll, tr)
	default:
		return GIDEntry{}, err
	}
	if nd, err := s.read(path.Join(dir, "gid_attrs", "ndevs", idx)); err == nil && validName(nd) {
		e.Netdev = nd
		if v, err := s.read(path.Join(sysNetClass, nd, "ifindex")); err == nil {
			e.NetdevIndex, _ = parseSysfsInt(v)
		}
	}
	return e, nil
}

// pkeySysfs reads ports/<p>/pkeys/<i>.
func pkeySysfs(s sysfsReader, dev string, port, index int) (uint16, error) {
	if !validName(dev) {
		return 0, fmt.Errorf("device name %q: %w", dev, unix.EINVAL)
	}
	v, err := s.read(path.Join(portDir(dev, port), "pkeys", strconv.Itoa(index)))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("port %d P_Key %d: %w", port, index, unix.EINVAL)
	}
	if err != nil {
		return 0, err
	}
	return parseSysfsPKey(v)
}

// readOr reads a sysfs attribute, "" on any error.
func readOr(s sysfsReader, name string) string {
	v, _ := s.read(name)
	return v
}
