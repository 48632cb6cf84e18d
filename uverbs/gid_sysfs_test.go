package uverbs

import (
	"errors"
	"io/fs"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"
)

func TestParseSysfsGID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // netip form, "" for an error
	}{
		{"fe80:0000:0000:0000:5054:00ff:fe12:3456", "fe80::5054:ff:fe12:3456"},
		{"0000:0000:0000:0000:0000:ffff:0a00:020f", "::ffff:10.0.2.15"},
		{"0000:0000:0000:0000:0000:0000:0000:0000", "::"},
		{"FE80:0000:0000:0000:5054:00FF:FE12:3456", "fe80::5054:ff:fe12:3456"},
		{"fe80:0000:0000:0000:5054:00ff:fe12:345", ""},
		{"fe80:0000:0000:0000:5054:00ff:fe12:34567", ""},
		{"fe80-0000:0000:0000:5054:00ff:fe12:3456", ""},
		{"fe80:+000:0000:0000:5054:00ff:fe12:3456", ""},
		{"fe80:0x00:0000:0000:5054:00ff:fe12:3456", ""},
		{"", ""},
	} {
		g, err := parseSysfsGID(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("parseSysfsGID(%q) = %x, want an error", tc.in, g)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseSysfsGID(%q): %v", tc.in, err)
			continue
		}
		if got := netip.AddrFrom16(g).String(); got != tc.want {
			t.Errorf("parseSysfsGID(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func FuzzParseSysfsGID(f *testing.F) {
	f.Add("fe80:0000:0000:0000:5054:00ff:fe12:3456")
	f.Add("0000:0000:0000:0000:0000:ffff:0a00:020f")
	f.Add("4ec3:b8f8:1a8b:0000:0000:0000:0000:0000")
	f.Add("FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF")
	f.Add("0000:0000:0000:0000:0000:0000:0000:000g")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := parseSysfsGID(s)
		if err != nil {
			return
		}
		// Whatever parses must be what sysfs would print, case aside.
		if back := formatSysfsGID(g); back != strings.ToLower(s) {
			t.Fatalf("parseSysfsGID(%q) = %x, which prints as %q", s, g, back)
		}
	})
}

func TestParseSysfsGIDType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ll   LinkLayer
		tr   Transport
		want GIDType
		err  bool
	}{
		{"IB/RoCE v1", LinkLayerInfiniBand, TransportIB, GIDTypeIB, false},
		{"IB/RoCE v1", LinkLayerEthernet, TransportIB, GIDTypeRoCEv1, false},
		{"IB/RoCE v1", LinkLayerEthernet, TransportIWARP, GIDTypeIB, false},
		{"IB/RoCE v1", LinkLayerUnspecified, TransportIB, GIDTypeIB, false},
		{"RoCE v2", LinkLayerEthernet, TransportIB, GIDTypeRoCEv2, false},
		{"RoCE v3", LinkLayerEthernet, TransportIB, 0, true},
		{"", LinkLayerEthernet, TransportIB, 0, true},
	} {
		got, err := parseSysfsGIDType(tc.in, tc.ll, tc.tr)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseSysfsGIDType(%q, %v, %v) = %v, %v; want %v (error %v)", tc.in, tc.ll, tc.tr, got, err, tc.want, tc.err)
		}
	}
}

func TestParseSysfsPKey(t *testing.T) {
	for in, want := range map[string]int{"0xffff": 0xffff, "0x7fff": 0x7fff, "0x0": 0, "0x": -1, "ffff": -1, "0x10000": -1, "0x-1": -1, "0x+f": -1} {
		got, err := parseSysfsPKey(in)
		if want < 0 {
			if err == nil {
				t.Errorf("parseSysfsPKey(%q) = %#x, want an error", in, got)
			}
		} else if err != nil || int(got) != want {
			t.Errorf("parseSysfsPKey(%q) = %#x, %v; want %#x", in, got, err, want)
		}
	}
}

// errFS answers one file with an error, as sysfs answers an unused
// gid_attrs/types/<i> with EINVAL.
type errFS struct {
	fstest.MapFS
	errs map[string]error
}

func (e errFS) Open(name string) (fs.File, error) {
	if err, ok := e.errs[name]; ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return e.MapFS.Open(name)
}

func (e errFS) ReadFile(name string) ([]byte, error) {
	if err, ok := e.errs[name]; ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return e.MapFS.ReadFile(name)
}

// rigGIDSysfs is the GID part of the 6.1 rig's sysfs: rxe0 on eth0 (three
// RoCE v2 GIDs, then empty slots) and siw0 (one GID built from the MAC,
// typed "IB/RoCE v1", no netdev), as read in the guest.
func rigGIDSysfs() errFS {
	m := fstest.MapFS{}
	errs := map[string]error{}
	put := func(name, v string) { m[name] = &fstest.MapFile{Data: []byte(v + "\n")} }
	rxe := "class/infiniband/rxe0/ports/1/"
	put(rxe+"link_layer", "Ethernet")
	gids := []string{
		"fe80:0000:0000:0000:5054:00ff:fe12:3456",
		"0000:0000:0000:0000:0000:ffff:0a00:020f",
		"fec0:0000:0000:0000:5054:00ff:fe12:3456",
	}
	for i := 0; i < 8; i++ {
		idx := strconv.Itoa(i)
		if i < len(gids) {
			put(rxe+"gids/"+idx, gids[i])
			put(rxe+"gid_attrs/types/"+idx, "RoCE v2")
			put(rxe+"gid_attrs/ndevs/"+idx, "eth0")
		} else {
			put(rxe+"gids/"+idx, "0000:0000:0000:0000:0000:0000:0000:0000")
			m[rxe+"gid_attrs/types/"+idx] = &fstest.MapFile{}
			m[rxe+"gid_attrs/ndevs/"+idx] = &fstest.MapFile{}
			errs[rxe+"gid_attrs/types/"+idx] = syscall.EINVAL
			errs[rxe+"gid_attrs/ndevs/"+idx] = syscall.EINVAL
		}
	}
	put(rxe+"pkeys/0", "0xffff")
	put("class/net/eth0/ifindex", "2")
	siw := "class/infiniband/siw0/ports/1/"
	put(siw+"link_layer", "Ethernet")
	put(siw+"gids/0", "4ec3:b8f8:1a8b:0000:0000:0000:0000:0000")
	put(siw+"gid_attrs/types/0", "IB/RoCE v1")
	m[siw+"gid_attrs/ndevs/0"] = &fstest.MapFile{}
	errs[siw+"gid_attrs/ndevs/0"] = syscall.EINVAL
	return errFS{m, errs}
}

func TestGIDTableSysfs(t *testing.T) {
	s := sysfsReader{fsys: rigGIDSysfs()}
	es, err := gidTableSysfs(s, "rxe0", TransportIB)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fe80::5054:ff:fe12:3456", "::ffff:10.0.2.15", "fec0::5054:ff:fe12:3456"}
	if len(es) != len(want) {
		t.Fatalf("rxe0: %d entries, want %d: %+v", len(es), len(want), es)
	}
	for i, e := range es {
		if got := netip.AddrFrom16(e.GID).String(); got != want[i] || e.Index != i || e.Port != 1 ||
			e.Type != GIDTypeRoCEv2 || e.Netdev != "eth0" || e.NetdevIndex != 2 {
			t.Errorf("rxe0 entry %d = %+v (%s)", i, e, got)
		}
	}
	if _, err := gidEntrySysfs(s, "rxe0", TransportIB, 1, 5); !errors.Is(err, unix.ENODATA) {
		t.Errorf("unused entry: %v, want ENODATA", err)
	}
	if _, err := gidEntrySysfs(s, "rxe0", TransportIB, 1, 8); !errors.Is(err, unix.EINVAL) {
		t.Errorf("entry past the table: %v, want EINVAL", err)
	}
	if _, err := gidEntrySysfs(s, "rxe0", TransportIB, 2, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("missing port: %v, want EINVAL", err)
	}
	es, err = gidTableSysfs(s, "siw0", TransportIWARP)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Type != GIDTypeIB || es[0].Netdev != "" || es[0].NetdevIndex != 0 ||
		es[0].GID != [16]byte{0x4e, 0xc3, 0xb8, 0xf8, 0x1a, 0x8b} {
		t.Errorf("siw0: %+v", es)
	}
	if p, err := pkeySysfs(s, "rxe0", 1, 0); err != nil || p != 0xffff {
		t.Errorf("rxe0 P_Key 0 = %#x, %v", p, err)
	}
	if _, err := pkeySysfs(s, "siw0", 1, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("siw0 P_Key 0: %v, want EINVAL", err)
	}
	if _, err := gidTableSysfs(s, "../rxe0", TransportIB); !errors.Is(err, unix.EINVAL) {
		t.Errorf("bad name: %v", err)
	}
}

// FuzzGIDEntrySysfs feeds arbitrary sysfs contents to the fallback reader:
// it must never panic, and what it accepts must be consistent.
func FuzzGIDEntrySysfs(f *testing.F) {
	f.Add("fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2", "eth0", "2", "Ethernet")
	f.Add("4ec3:b8f8:1a8b:0000:0000:0000:0000:0000", "IB/RoCE v1", "", "", "Ethernet")
	f.Add("0000:0000:0000:0000:0000:0000:0000:0000", "", "", "", "InfiniBand")
	f.Add("fe80:0000:0000:0000:0002:c903:0049:8f21", "IB/RoCE v1", "../x", "-1", "InfiniBand")
	f.Fuzz(func(t *testing.T, gid, typ, ndev, ifindex, ll string) {
		m := fstest.MapFS{}
		put := func(name, v string) { m[name] = &fstest.MapFile{Data: []byte(v)} }
		p := "class/infiniband/d0/ports/1/"
		put(p+"gids/0", gid)
		put(p+"gid_attrs/types/0", typ)
		put(p+"gid_attrs/ndevs/0", ndev)
		put(p+"link_layer", ll)
		if validName(ndev) {
			put("class/net/"+ndev+"/ifindex", ifindex)
		}
		s := sysfsReader{fsys: m}
		e, err := gidEntrySysfs(s, "d0", TransportIB, 1, 0)
		if err != nil {
			return
		}
		g, perr := parseSysfsGID(strings.TrimSuffix(gid, "\n"))
		if perr != nil || g != e.GID || g == ([16]byte{}) {
			t.Fatalf("accepted GID %q as %x", gid, e.GID)
		}
		if e.Type > GIDTypeRoCEv2 || e.Index != 0 || e.Port != 1 || e.NetdevIndex < 0 {
			t.Fatalf("entry %+v", e)
		}
		if e.Netdev != "" && !validName(e.Netdev) {
			t.Fatalf("netdev %q", e.Netdev)
		}
		es, err := gidTableSysfs(s, "d0", TransportIB)
		if err != nil || len(es) != 1 || !reflect.DeepEqual(es[0], e) {
			t.Fatalf("table %+v, %v; entry %+v", es, err, e)
		}
	})
}
