package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// The test binary doubles as ibvinfo: run with IBVINFO_TEST_MAIN=1 it is
// the program, so the rig tests need no separately built binary.
func TestMain(m *testing.M) {
	if os.Getenv("IBVINFO_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// ---- unit tests ----

func TestCStrtol(t *testing.T) {
	for in, want := range map[string]int64{
		"1": 1, " 2": 2, "\t+3x": 3, "-4": -4, "0x10": 16, "0X1f": 31, "010": 8, "08": 0, "0x": 0, "0xg": 0,
		"abc": 0, "": 0, "-": 0, "9223372036854775807": 1<<63 - 1, "9223372036854775808": 1<<63 - 1,
		"-9223372036854775808": -1 << 63, "-99999999999999999999": -1 << 63, "4294967297": 4294967297,
		"  \n\v\f\r7": 7, "1 2": 1, "0x7fffffffffffffff": 1<<63 - 1, "0xffffffffffffffff": 1<<63 - 1,
	} {
		if got := cStrtol(in); got != want {
			t.Errorf("cStrtol(%q) = %d, want %d", in, got, want)
		}
	}
}

func FuzzCStrtol(f *testing.F) {
	for _, s := range []string{"1", "-0x1f", " 077", "99999999999999999999", "+", "0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := cStrtol(s)
		// A plain decimal that fits must agree with strconv.
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && (len(s) < 2 || s[0] != '0' && !(len(s) > 2 && (s[0] == '-' || s[0] == '+') && s[1] == '0')) {
			if v != n {
				t.Fatalf("cStrtol(%q) = %d, strconv %d", s, v, n)
			}
		}
	})
}

func TestGetoptNoDevice(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		rc        int
		out, errs string
	}{
		{[]string{"-z"}, 255, "Usage: ibv_devinfo ", "ibv_devinfo: invalid option -- 'z'\n"},
		{[]string{"--ib"}, 255, "Usage:", "ibv_devinfo: option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n"},
		{[]string{"--ib=3"}, 255, "Usage:", "ibv_devinfo: option '--ib=3' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n"},
		{[]string{"--list=3"}, 255, "Usage:", "ibv_devinfo: option '--list' doesn't allow an argument\n"},
		{[]string{"--ib-dev"}, 255, "Usage:", "ibv_devinfo: option '--ib-dev' requires an argument\n"},
		{[]string{"-v", "-d"}, 255, "Usage:", "ibv_devinfo: option requires an argument -- 'd'\n"},
		{[]string{"--foo=bar"}, 255, "Usage:", "ibv_devinfo: unrecognized option '--foo=bar'\n"},
		{[]string{"--=x"}, 255, "Usage:", "ibv_devinfo: option '--=x' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--list' '--verbose'\n"},
		{[]string{"-i", "0"}, 1, "Usage:", ""},
		{[]string{"-i", "-3"}, 1, "Usage:", ""},
		{[]string{"-i", "4294967296"}, 1, "Usage:", ""}, // (int)2^32 == 0
		{[]string{"-h"}, 255, "Usage:", "ibv_devinfo: invalid option -- 'h'\n"},
		{[]string{"--help"}, 255, "Usage:", "ibv_devinfo: unrecognized option '--help'\n"},
		{[]string{"-l", "-z"}, -1, "", ""}, // -l runs before -z is seen
	} {
		var out, errs bytes.Buffer
		rc := run(append([]string{"ibv_devinfo"}, tc.args...), &out, &errs, false)
		if tc.rc == -1 {
			if errs.String() == "ibv_devinfo: invalid option -- 'z'\n" {
				t.Errorf("%q: parsed past -l", tc.args)
			}
			continue
		}
		if rc != tc.rc || !strings.HasPrefix(out.String(), tc.out) || errs.String() != tc.errs {
			t.Errorf("%q: rc %d, stdout %q, stderr %q; want %d, %q…, %q", tc.args, rc, out.String(), errs.String(), tc.rc, tc.out, tc.errs)
		}
	}
}

func TestTakeExtensions(t *testing.T) {
	for _, tc := range []struct {
		in, rest    string
		json, extra bool
	}{
		{"-json -v", "-v", true, false},
		{"-x -d rxe0", "-d rxe0", false, true},
		{"-d -x", "-d -x", false, false}, // -x is -d's argument
		{"--ib-dev -json", "--ib-dev -json", false, false},
		{"--ib-d -x -x", "--ib-d -x", false, true},
		{"-vd -json --json", "-vd -json", true, false},
		{"-- -x", "-- -x", false, false},
		{"--extra --json -l", "-l", true, true},
		{"-drxe0 -x", "-drxe0", false, true},
	} {
		rest, j, x := takeExtensions(append([]string{"p"}, strings.Fields(tc.in)...), false)
		if got := strings.Join(rest[1:], " "); got != tc.rest || j != tc.json || x != tc.extra {
			t.Errorf("takeExtensions(%q) = %q, %v, %v; want %q, %v, %v", tc.in, got, j, x, tc.rest, tc.json, tc.extra)
		}
	}
}

// ---- rig tests: ibvinfo against ibv_devinfo in the same guest ----

// result is one run of a program.
type result struct {
	stdout, stderr, combined string
	rc                       int
}

// runProg runs path with argv[0] "ibv_devinfo" (ibv_devinfo's messages
// name argv[0]) twice: stdout and stderr apart, then both into one pipe,
// which shows how they interleave.
func runProg(t *testing.T, path string, env []string, args ...string) result {
	t.Helper()
	var r result
	for _, combined := range []bool{false, true} {
		cmd := exec.Command(path, args...)
		cmd.Args[0] = "ibv_devinfo"
		cmd.Env = append(os.Environ(), env...)
		var out, errs bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &errs
		if combined {
			cmd.Stderr = &out
		}
		err := cmd.Run()
		rc := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			rc = ee.ExitCode()
		case err != nil: // Errorf, not Fatalf: runProg may run on its own goroutine
			t.Errorf("%s %q: %v", path, args, err)
			return r
		}
		if combined {
			r.combined = out.String()
			if rc != r.rc {
				t.Errorf("%s %q: exit %d, then %d", path, args, r.rc, rc)
			}
		} else {
			r.stdout, r.stderr, r.rc = out.String(), errs.String(), rc
		}
	}
	return r
}

// tools returns ibv_devinfo's path and this test binary (as ibvinfo).
func tools(t *testing.T) (devinfo, self string) {
	t.Helper()
	rigtest.Require(t)
	devinfo, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Fatalf("the rig has no ibv_devinfo: %v", err)
	}
	self, err = os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return devinfo, self
}

var selfEnv = []string{"IBVINFO_TEST_MAIN=1"}

// devinfoCases are command lines run through both programs: every mode,
// every device of the rig, the error paths and getopt's corners.
var devinfoCases = [][]string{
	{}, {"-v"}, {"-l"}, {"--list"},
	{"-d", "rxe0"}, {"-d", "rxea"}, {"-d", "rxeb"}, {"-d", "siw0"},
	{"-v", "-d", "rxe0"}, {"-v", "-d", "rxea"}, {"-v", "-d", "siw0"},
	{"-d", "rxe0", "-i", "1"}, {"-d", "rxea", "-i", "1"}, {"-d", "siw0", "-i", "1"},
	{"-v", "-d", "rxe0", "-i", "1"}, {"-v", "-d", "siw0", "-i", "1"},
	{"--ib-dev=rxe0"}, {"--ib-dev", "siw0", "--ib-port=1", "--verbose"}, {"-vdrxe0"}, {"-vi1", "-d", "rxea"},
	{"--ib-d=rxea", "--ib-p", "1"}, {"--verb", "-d", "siw0"}, {"--li"},
	{"-d", "rxe0", "-i", "2"}, {"-d", "siw0", "-i", "9"}, {"-i", "2"}, {"-v", "-i", "2"},
	{"-d", "nosuch"}, {"-v", "-d", "nosuch"}, {"-d", ""},
	{"-i", "0"}, {"-i", "abc"}, {"-i", "-5"}, {"-i", "0x1", "-d", "rxe0"}, {"-i", "010", "-d", "rxe0"},
	{"-i", "257", "-d", "rxe0"}, {"-i", "256", "-d", "rxe0"}, {"-i", "4294967297", "-d", "siw0"}, {"-i", " 1x", "-d", "rxe0"},
	{"-h"}, {"--help"}, {"-z"}, {"-vz"}, {"--ib"}, {"--list=3"}, {"--ib-dev"}, {"-d"}, {"-i"}, {"--foo=bar"}, {"--=x"},
	{"foo"}, {"foo", "-l"}, {"--", "-l"}, {"-l", "-z"}, {"-z", "-l"}, {"-"}, {"-d", "rxe0", "-d", "siw0"},
	{"-d", "-v"}, {"-v", "-v", "-d", "rxeb", "extra", "words"},
}

// TestRigMatchesDevinfo: for every case, ibvinfo's stdout, stderr, their
// interleaving and exit status are ibv_devinfo's, byte for byte.
func TestRigMatchesDevinfo(t *testing.T) {
	devinfo, self := tools(t)
	// Both programs must see the same tables: a GID that appears between
	// their runs (an IPv6 autoconfiguration) would void the comparison.
	defer rigtest.GIDsUnchanged(t)()
	type line struct {
		name string
		env  []string
		args []string
	}
	var lines []line
	for _, args := range devinfoCases {
		lines = append(lines, line{fmt.Sprintf("%q", args), nil, args})
	}
	// POSIXLY_CORRECT stops getopt at the first operand.
	posix := []string{"POSIXLY_CORRECT=1"}
	for _, args := range [][]string{{"foo", "-l"}, {"-d", "siw0", "bar", "-z"}} {
		lines = append(lines, line{fmt.Sprintf("POSIXLY_CORRECT %q", args), posix, args})
	}
	// Two command lines at a time, one per vCPU of the guest: each line is
	// four process starts (~0.1 s each under emulation), and no line's
	// output depends on another's.
	diffs := make([]string, len(lines))
	slots := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, l := range lines {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			want := runProg(t, devinfo, l.env, l.args...)
			got := runProg(t, self, slices.Concat(selfEnv, l.env), l.args...)
			if got != want {
				diffs[i] = diffResults(want, got)
			}
		}()
	}
	wg.Wait()
	for i, d := range diffs {
		if d != "" {
			t.Errorf("%s:\n%s", lines[i].name, d)
		}
	}
	t.Logf("%d command lines: ibvinfo's output is ibv_devinfo's", len(lines))
}

func diffResults(want, got result) string {
	var b strings.Builder
	if want.rc != got.rc {
		fmt.Fprintf(&b, "exit: ibv_devinfo %d, ibvinfo %d\n", want.rc, got.rc)
	}
	for _, s := range []struct{ name, w, g string }{{"stdout", want.stdout, got.stdout}, {"stderr", want.stderr, got.stderr}, {"stdout+stderr", want.combined, got.combined}} {
		if s.w != s.g {
			fmt.Fprintf(&b, "%s differs:\n%s", s.name, lineDiff(s.w, s.g))
		}
	}
	return b.String()
}

// lineDiff shows the first differing lines.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	n := 0
	for i := 0; i < max(len(wl), len(gl)) && n < 8; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "  line %d: ibv_devinfo %q\n  line %d: ibvinfo     %q\n", i+1, w, i+1, g)
			n++
		}
	}
	return b.String()
}

var unknownFlags = regexp.MustCompile(`(Unknown flags: )?0x[0-9A-Fa-f]+`)

// unknownSpelling writes every unnamed-bits element of a flag list as "0xc0".
func unknownSpelling(s string) string {
	return unknownFlags.ReplaceAllStringFunc(s, func(m string) string {
		return strings.ToLower(strings.TrimPrefix(m, "Unknown flags: "))
	})
}

// TestRigJSON decodes ibvinfo -json and checks its values against
// ibv_devinfo -v's text for every device.
func TestRigJSON(t *testing.T) {
	devinfo, self := tools(t)
	// Both programs must see the same tables: a GID that appears between
	// their runs (an IPv6 autoconfiguration) would void the comparison.
	defer rigtest.GIDsUnchanged(t)()
	text := runProg(t, devinfo, nil, "-v")
	if text.rc != 0 {
		t.Fatalf("ibv_devinfo -v: exit %d: %s", text.rc, text.stderr)
	}
	js := runProg(t, self, selfEnv, "-json")
	if js.rc != 0 || js.stderr != "" {
		t.Fatalf("ibvinfo -json: exit %d: %s", js.rc, js.stderr)
	}
	var rep Report
	dec := json.NewDecoder(strings.NewReader(js.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("ibvinfo -json: %v\n%s", err, js.stdout)
	}
	blocks := splitDevinfo(text.stdout)
	if len(rep.Devices) != len(blocks) {
		t.Fatalf("ibvinfo -json has %d devices, ibv_devinfo -v %d", len(rep.Devices), len(blocks))
	}
	for i, d := range rep.Devices {
		if d.HCAID != blocks[i].name {
			t.Errorf("device %d: %s, ibv_devinfo %s", i, d.HCAID, blocks[i].name)
			continue
		}
		want := blocks[i].fields
		got := jsonAsDevinfo(d)
		checked := 0
		for k, w := range want {
			g, ok := got[k]
			if !ok {
				t.Errorf("%s: ibv_devinfo prints %s = %q, the JSON has no such field", d.HCAID, k, w)
				continue
			}
			// Bits rdma-core 44 has no name for (7.3 rxe's ODP flags 0x40 and
			// 0x80) are "Unknown flags: 0xC0" in one list and "0xc0" in the
			// other, depending on the field: compare them in one spelling.
			w, g = unknownSpelling(w), unknownSpelling(g)
			if g != w {
				t.Errorf("%s: %s: ibv_devinfo %q, JSON %q", d.HCAID, k, w, g)
			}
			checked++
		}
		if d.Driver.Name == "" || d.UverbsDev == "" || d.CoreABI == 0 || len(d.Transports) == 0 {
			t.Errorf("%s: extra fields missing: %+v", d.HCAID, d)
		}
		t.Logf("%s: %d values of ibv_devinfo -v found in the JSON", d.HCAID, checked)
	}
	// -l -json and the error paths keep ibv_devinfo's exit codes.
	l := runProg(t, self, selfEnv, "-json", "-l")
	var list List
	if err := json.Unmarshal([]byte(l.stdout), &list); err != nil || l.rc != 0 || len(list.HCAs) != len(blocks) {
		t.Errorf("-json -l: %v, exit %d, %q", err, l.rc, l.stdout)
	}
	bad := runProg(t, self, selfEnv, "-json", "-d", "nosuch")
	if bad.rc != 255 || bad.stderr != "IB device 'nosuch' wasn't found\n" || bad.stdout != "" {
		t.Errorf("-json -d nosuch: %+v", bad)
	}
}

// TestRigExtra: -x adds the goverbs block after ibv_devinfo's text and
// leaves the rest unchanged.
func TestRigExtra(t *testing.T) {
	devinfo, self := tools(t)
	// Both programs must see the same tables: a GID that appears between
	// their runs (an IPv6 autoconfiguration) would void the comparison.
	defer rigtest.GIDsUnchanged(t)()
	for _, dev := range []string{"rxe0", "siw0"} {
		want := runProg(t, devinfo, nil, "-v", "-d", dev)
		got := runProg(t, self, selfEnv, "-x", "-v", "-d", dev)
		if got.rc != 0 || !strings.HasPrefix(got.stdout, want.stdout) {
			t.Fatalf("-x -v -d %s: exit %d, output does not start with ibv_devinfo's:\n%s", dev, got.rc, lineDiff(want.stdout, got.stdout))
		}
		extra := strings.TrimPrefix(got.stdout, want.stdout)
		for _, s := range []string{"\tgoverbs:\n", "\t\tdriver:\t\t\t", "\t\tuverbs_dev:\t\t/dev/infiniband/uverbs", "transport:\t\tQueryDevice ioctl", "transport:\t\tQueryPort ioctl", "transport:\t\tQueryGIDTable ioctl", "GID[  0] port 1:"} {
			if !strings.Contains(extra, s) {
				t.Errorf("%s: -x block lacks %q:\n%s", dev, s, extra)
			}
		}
		t.Logf("ibvinfo -x -v -d %s adds:\n%s", dev, extra)
	}
}

// devinfoBlock is one device of ibv_devinfo -v, flattened: "max_qp",
// "port1.state", "port1.GID[1]", "device_cap_flags.flags" (the flag lines
// joined by commas), "tso_caps.max_tso".
type devinfoBlock struct {
	name   string
	fields map[string]string
}

func splitDevinfo(out string) []devinfoBlock {
	var bs []devinfoBlock
	var b *devinfoBlock
	last, section, port := "", "", ""
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		tabs := len(line) - len(strings.TrimLeft(line, "\t"))
		text := line[tabs:]
		key, val, _ := strings.Cut(text, ":")
		val = strings.TrimLeft(val, "\t")
		switch {
		case tabs == 0:
			bs = append(bs, devinfoBlock{name: val, fields: map[string]string{}})
			b = &bs[len(bs)-1]
			last, section, port = "", "", ""
		case tabs == 5:
			k := last + ".flags"
			if b.fields[k] != "" {
				b.fields[k] += ","
			}
			b.fields[k] += text
		case tabs == 2 && key == "port":
			port = "port" + val + "."
		case tabs == 3 && port != "":
			last = port + key
			b.fields[last] = val
		case tabs == 1:
			last, section = key, ""
			b.fields[key] = val
			if val == "" {
				section = key
			}
		case tabs == 2 && section != "":
			last = section + "." + key
			b.fields[last] = val
		}
	}
	return bs
}

// jsonAsDevinfo renders a JSON device the way ibv_devinfo -v prints its
// values, keyed as splitDevinfo keys them.
func jsonAsDevinfo(d *Device) map[string]string {
	e := func(v Enum) string { return fmt.Sprintf("%s (%d)", v.Name, v.Value) }
	i := func(v uint32) string { return strconv.Itoa(int(int32(v))) }
	fl := func(f Flags, none string) string {
		if len(f) == 0 {
			return none
		}
		return strings.Join(f, ",")
	}
	m := map[string]string{
		"transport": e(d.Transport), "fw_ver": d.FWVer, "node_guid": d.NodeGUID, "sys_image_guid": d.SysImageGUID,
		"vendor_id": fmt.Sprintf("0x%04x", d.VendorID), "vendor_part_id": i(d.VendorPartID), "hw_ver": fmt.Sprintf("0x%X", d.HWVer),
		"board_id": d.BoardID, "phys_port_cnt": strconv.Itoa(d.PhysPortCnt),
		"max_mr_size": fmt.Sprintf("0x%x", d.MaxMRSize), "page_size_cap": fmt.Sprintf("0x%x", d.PageSizeCap),
		"max_qp": i(d.MaxQP), "max_qp_wr": i(d.MaxQPWR), "device_cap_flags": fmt.Sprintf("0x%08x", d.DeviceCapFlagsValue),
		"device_cap_flags.flags": fl(d.DeviceCapFlags, ""),
		"max_sge":                i(d.MaxSGE), "max_sge_rd": i(d.MaxSGERd), "max_cq": i(d.MaxCQ), "max_cqe": i(d.MaxCQE),
		"max_mr": i(d.MaxMR), "max_pd": i(d.MaxPD), "max_qp_rd_atom": i(d.MaxQPRdAtom), "max_ee_rd_atom": i(d.MaxEERdAtom),
		"max_res_rd_atom": i(d.MaxResRdAtom), "max_qp_init_rd_atom": i(d.MaxQPInitRdAtom), "max_ee_init_rd_atom": i(d.MaxEEInitRdAtom),
		"atomic_cap": e(d.AtomicCap), "max_ee": i(d.MaxEE), "max_rdd": i(d.MaxRDD), "max_mw": i(d.MaxMW),
		"max_raw_ipv6_qp": i(d.MaxRawIPv6QP), "max_raw_ethy_qp": i(d.MaxRawEthyQP), "max_mcast_grp": i(d.MaxMcastGrp),
		"max_mcast_qp_attach": i(d.MaxMcastQPAttach), "max_total_mcast_qp_attach": i(d.MaxTotalMcastQPAttach),
		"max_ah": i(d.MaxAH), "max_fmr": i(d.MaxFMR), "max_map_per_fmr": i(d.MaxMapPerFMR), "max_srq": i(d.MaxSRQ),
		"max_srq_wr": i(d.MaxSRQWR), "max_srq_sge": i(d.MaxSRQSGE), "max_pkeys": strconv.Itoa(int(d.MaxPKeys)),
		"local_ca_ack_delay": strconv.Itoa(int(d.LocalCAAckDelay)),
		"general_odp_caps":   "", "general_odp_caps.flags": fl(d.GeneralODPCaps, ""),
		"rc_odp_caps": "", "rc_odp_caps.flags": fl(d.RCODPCaps, "NO SUPPORT"),
		"uc_odp_caps": "", "uc_odp_caps.flags": fl(d.UCODPCaps, "NO SUPPORT"),
		"ud_odp_caps": "", "ud_odp_caps.flags": fl(d.UDODPCaps, "NO SUPPORT"),
		"xrc_odp_caps": "", "xrc_odp_caps.flags": fl(d.XRCODPCaps, "NO SUPPORT"),
		"device_cap_flags_ex": fmt.Sprintf("0x%X", d.DeviceCapFlagsExValue),
		"tso_caps":            "", "tso_caps.max_tso": i(d.TSOCaps.MaxTSO),
		"rss_caps":                                "",
		"rss_caps.max_rwq_indirection_tables":     strconv.Itoa(int(d.RSSCaps.MaxRWQIndirectionTables)),
		"rss_caps.max_rwq_indirection_table_size": strconv.Itoa(int(d.RSSCaps.MaxRWQIndirectionTableSize)),
		"rss_caps.rx_hash_function":               fmt.Sprintf("0x%x", d.RSSCaps.RxHashFunction),
		"rss_caps.rx_hash_fields_mask":            fmt.Sprintf("0x%X", d.RSSCaps.RxHashFieldsMask),
		"max_wq_type_rq":                          strconv.Itoa(int(d.MaxWQTypeRQ)),
		"packet_pacing_caps":                      "",
		"packet_pacing_caps.qp_rate_limit_min":    fmt.Sprintf("%dkbps", d.PacketPacingCaps.QPRateLimitMinKbps),
		"packet_pacing_caps.qp_rate_limit_max":    fmt.Sprintf("%dkbps", d.PacketPacingCaps.QPRateLimitMaxKbps),
		"num_comp_vectors":                        strconv.Itoa(d.NumCompVectors),
	}
	// device_cap_flags_ex's lines name only the bits above 31.
	var exLines []string
	ex := d.DeviceCapFlagsExValue &^ 0xffffffff
	for _, n := range capExNames {
		if ex&n.bit != 0 {
			exLines = append(exLines, n.name)
			ex &^= n.bit
		}
	}
	if ex != 0 {
		exLines = append(exLines, fmt.Sprintf("Unknown flags: 0x%X", ex))
	}
	if len(exLines) > 0 {
		m["device_cap_flags_ex.flags"] = strings.Join(exLines, ",")
	}
	if d.CompletionTimestampMask == 0 {
		m["completion_timestamp_mask not supported"] = ""
	}
	if d.HCACoreClockKHz == 0 {
		m["core clock not supported"] = ""
	}
	if d.TMCaps.MaxNumTags == 0 {
		m["tag matching not supported"] = ""
	}
	for _, p := range d.Ports {
		k := fmt.Sprintf("port%d.", p.Port)
		for f, v := range map[string]string{
			"state": e(p.State), "max_mtu": e(p.MaxMTU), "active_mtu": e(p.ActiveMTU),
			"sm_lid": strconv.Itoa(int(p.SMLID)), "port_lid": strconv.Itoa(int(p.PortLID)), "port_lmc": fmt.Sprintf("0x%02x", p.PortLMC),
			"link_layer": p.LinkLayer, "max_msg_sz": fmt.Sprintf("0x%x", p.MaxMsgSz),
			"port_cap_flags": fmt.Sprintf("0x%08x", p.PortCapFlagsValue), "port_cap_flags2": fmt.Sprintf("0x%04x", p.PortCapFlags2Value),
			"max_vl_num": e(p.MaxVLNum), "bad_pkey_cntr": fmt.Sprintf("0x%x", p.BadPKeyCntr), "qkey_viol_cntr": fmt.Sprintf("0x%x", p.QKeyViolCntr),
			"sm_sl": strconv.Itoa(int(p.SMSL)), "pkey_tbl_len": strconv.Itoa(int(p.PKeyTblLen)), "gid_tbl_len": strconv.Itoa(int(p.GIDTblLen)),
			"subnet_timeout": strconv.Itoa(int(p.SubnetTimeout)), "init_type_reply": strconv.Itoa(int(p.InitTypeReply)),
			"active_width": e(p.ActiveWidth), "active_speed": e(p.ActiveSpeed), "phys_state": e(p.PhysState),
		} {
			m[k+f] = v
		}
		for _, g := range p.GIDs {
			m[fmt.Sprintf("%sGID[%3d]", k, g.Index)] = g.GID + ", " + g.Type
		}
	}
	return m
}

// FuzzGetopt: any command line parses to an end, never panics, and every
// error is one line naming argv[0].
func FuzzGetopt(f *testing.F) {
	for _, s := range []string{"-v -d rxe0", "--ib-d=x --ib-p 1", "-vdrxe0 -x -json", "--ib", "--=x", "-- -l", "-i", "- foo -l", "-\x00"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, line string, posix bool) {
		args := append([]string{"ibv_devinfo"}, strings.Split(line, " ")...)
		rest, _, _ := takeExtensions(args, posix)
		if len(rest) > len(args) || rest[0] != "ibv_devinfo" {
			t.Fatalf("takeExtensions(%q) = %q", args, rest)
		}
		var errs []string
		g := newGetopt(rest, posix, func(s string) { errs = append(errs, s) })
		for n := 0; ; n++ {
			if n > 2*len(line)+2 {
				t.Fatalf("%q: getopt does not end", rest)
			}
			c, _ := g.Next()
			if c == 0 {
				break
			}
			if c == '?' {
				if len(errs) != 1 || !strings.HasPrefix(errs[0], "ibv_devinfo: ") || !strings.HasSuffix(errs[0], "\n") {
					t.Fatalf("%q: errors %q", rest, errs)
				}
				break
			}
			if !strings.ContainsRune("dilv", rune(c)) {
				t.Fatalf("%q: option %q", rest, c)
			}
		}
	})
}
