package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// needCC skips the test when the compiler or the default headers are missing;
// the tests that need it run in parallel.
func needCC(t *testing.T) {
	t.Helper()
	t.Parallel()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed: abigen needs it to read the headers")
	}
	for _, h := range defaultIncludes {
		if _, err := os.Stat("/usr/include/" + h); err != nil {
			t.Skipf("header %s missing (Debian: apt-get install linux-libc-dev)", h)
		}
	}
}

var inputLine = regexp.MustCompile(`(?m)^//\t(\S+ sha256:[0-9a-f]+)$`)

// TestUpToDate regenerates package abi's files and compares them with the
// committed ones.
func TestUpToDate(t *testing.T) {
	needCC(t)
	cfg := defaultConfig()
	files, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		path := filepath.Join("..", "..", f.Name)
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go generate ./abi)", err)
		}
		if bytes.Equal(old, f.Data) {
			continue
		}
		oldIn := inputLine.FindAllSubmatch(old, -1)
		newIn := inputLine.FindAllSubmatch(f.Data, -1)
		if fmt.Sprint(oldIn) != fmt.Sprint(newIn) {
			t.Skipf("the headers here differ from those abi/%s was generated from: the comparison would say nothing", f.Name)
		}
		t.Errorf("abi/%s is stale: run go generate ./abi\n%s", f.Name, firstDiff(old, f.Data))
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n committed: %s\n generated: %s", i+1, x, y)
		}
	}
	return ""
}

// TestDeterministic generates twice and expects the same bytes.
func TestDeterministic(t *testing.T) {
	needCC(t)
	a, err := generate(defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate(defaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s differs between two runs", a[i].Name)
		}
	}
}

// TestCompilerAgrees checks what abigen read from DWARF against the C
// compiler's own offsetof, sizeof and constant values: it writes one
// _Static_assert per struct, member, flexible array and constant and compiles
// them, the way rdma-core's DECLARE_CMD checks its command structs.
func TestCompilerAgrees(t *testing.T) {
	needCC(t)
	cfg := defaultConfig()
	m, err := buildModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("#include <stddef.h>\n")
	for _, h := range cfg.Includes {
		fmt.Fprintf(&b, "#include <%s>\n", h)
	}
	n := 0
	assert := func(cond, what string) {
		n++
		fmt.Fprintf(&b, "_Static_assert(%s, %q);\n", cond, what)
	}
	for _, s := range m.Structs {
		// An untagged struct is checked through its tagged ancestor:
		// offsets relative to the member that holds it.
		tag, base := s.CName, ""
		if i := strings.Index(s.CName, "."); i >= 0 {
			tag, base = s.CName[:i], s.CName[i+1:]
		}
		typ := "struct " + tag
		member := func(p string) string { return join(base, p) }
		rel := func(p string) string {
			if base == "" {
				return fmt.Sprintf("offsetof(%s, %s)", typ, p)
			}
			return fmt.Sprintf("(offsetof(%s, %s) - offsetof(%s, %s))", typ, member(p), typ, base)
		}
		if base == "" {
			assert(fmt.Sprintf("sizeof(%s) == %d", typ, s.Size), s.CName)
			assert(fmt.Sprintf("_Alignof(%s) == %d", typ, s.CAlign), s.CName+" alignment")
		} else {
			assert(fmt.Sprintf("sizeof(((%s *)0)->%s) == %d", typ, base, s.Size), s.CName)
			assert(fmt.Sprintf("_Alignof(__typeof__(((%s *)0)->%s)) == %d", typ, base, s.CAlign), s.CName+" alignment")
		}
		for _, e := range s.Entries {
			if e.CName == "" {
				continue // an unnamed union: its members are checked by name
			}
			assert(fmt.Sprintf("%s == %d", rel(e.CName), e.Offset), s.CName+"."+e.CName)
			assert(fmt.Sprintf("sizeof(((%s *)0)->%s) == %d", typ, member(e.CName), e.Size), s.CName+"."+e.CName)
		}
		for _, tl := range s.Tails {
			assert(fmt.Sprintf("%s == %d", rel(tl.CName), tl.Offset), s.CName+"."+tl.CName+"[]")
			assert(fmt.Sprintf("sizeof(((%s *)0)->%s[0]) == %d", typ, member(tl.CName), tl.ElemSize), s.CName+"."+tl.CName+"[0]")
		}
	}
	consts := 0
	for _, it := range m.Consts {
		var names []string
		var vals []string
		if it.Enum != nil {
			for _, c := range it.Enum.Consts {
				names, vals = append(names, c.Name), append(vals, cLiteral(c.Value))
			}
		}
		for _, mc := range it.Macros {
			if mc.IsStr {
				continue
			}
			v, _ := findValue(it, mc.Name)
			names, vals = append(names, mc.Name), append(vals, v)
		}
		for i := range names {
			consts++
			assert(fmt.Sprintf("(%s) == %s", names[i], vals[i]), names[i])
		}
	}
	if consts < 500 || len(m.Structs) < 150 {
		t.Fatalf("only %d constants and %d structs: the headers changed or the reader lost some", consts, len(m.Structs))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "asserts.c")
	if err := os.WriteFile(src, b.Bytes(), 0o666); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gcc", "-std=gnu11", "-fsyntax-only", "-fmax-errors=0", src).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc disagrees with abigen:\n%s", out)
	}
	t.Logf("%d static assertions over %d structs and %d constants hold", n, len(m.Structs), consts)
}

// cLiteral spells a value as a C constant of the same signedness.
func cLiteral(v cValue) string {
	if v.Signed {
		return fmt.Sprintf("(long long)%#xULL", v.Bits)
	}
	return fmt.Sprintf("%#xULL", v.Bits)
}

// findValue returns the C literal of macro name in a const block; the block
// keeps Go-formatted values, so parse them back.
func findValue(it *constItem, name string) (string, bool) {
	for i, m := range it.Macros {
		if m.Name == name {
			v := it.Values[i]
			if strings.HasPrefix(v, "-") {
				return "(" + v + "LL)", true
			}
			return v + "ULL", true
		}
	}
	return "", false
}

func TestGoName(t *testing.T) {
	for c, want := range map[string]string{
		"ib_uverbs_create_cq":           "IbUverbsCreateCq",
		"mlx5_ib_create_qp_resp":        "Mlx5IbCreateQpResp",
		"mlx5_ib_alloc_ucontext_req_v2": "Mlx5IbAllocUcontextReqV2",
		"rxe_send_wqe":                  "RxeSendWqe",
		"user_handle":                   "UserHandle",
		"max_send_wr":                   "MaxSendWr",
		"_sockaddr_in6":                 "SockaddrIn6",
		"pad_1":                         "Pad1",
	} {
		if got := goName(c); got != want {
			t.Errorf("goName(%q) = %q, want %q", c, got, want)
		}
	}
}

// edgeConfig generates testdata/edge.h into package edge.
func edgeConfig(t *testing.T) *config {
	t.Helper()
	abs, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.CFlags = []string{"-I" + abs}
	cfg.Includes = []string{"edge.h"}
	cfg.Structs, _ = parseSpecs([]string{"edge.h=^edge_"}, true)
	cfg.Consts, _ = parseSpecs([]string{"edge.h"}, false)
	cfg.Pkg = "edge"
	return cfg
}

// TestEdgeCases checks the mapping rules on testdata/edge.h.
func TestEdgeCases(t *testing.T) {
	needCC(t)
	m, err := buildModel(edgeConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*genStruct{}
	for _, s := range m.Structs {
		byName[s.GoName] = s
	}
	fields := func(goName string) string {
		s := byName[goName]
		if s == nil {
			t.Fatalf("no struct %s", goName)
		}
		var parts []string
		for _, f := range s.Fields {
			parts = append(parts, fmt.Sprintf("%s %s @%d", f.Name, f.Type, f.Offset))
		}
		for _, a := range s.Accessors {
			parts = append(parts, fmt.Sprintf("%s() %s", a.Name, a.GoType))
		}
		for _, tl := range s.Tails {
			parts = append(parts, fmt.Sprintf("%s[] @%d", tl.CName, tl.Offset))
		}
		return strings.Join(parts, "; ")
	}
	for goName, want := range map[string]string{
		"EdgePacked":        "A uint8 @0; BBytes [4]byte @1; CBytes [2]byte @5; B() uint32; C() uint16",
		"EdgePackedAligned": "X uint32 @0; S uint8 @4; YBytes [2]byte @5; Z uint8 @7; W uint64 @8; Y() uint16",
		"EdgeOuter": "_ [0]uint64 @0; Tag uint8 @0; P EdgePacked @1; Un [4]byte @8; _ [4]byte @12; _union [8]byte @16; In1 uint32 @24; In2 uint32 @28; " +
			"UnU32v() uint32; UnS16v() int16; UnBytesLo() uint8; UnBytesHi() uint8; AnonA() uint64; AnonB() int64; tail[] @32",
		"EdgeOuterUnBytes": "Lo uint8 @0; Hi uint8 @1",
		"EdgeMisaligned":   "Head uint32 @0; Pa [16]byte @4; After uint32 @20",
		"EdgeNestedTail":   "A uint64 @0; O EdgeOuter @8; o.tail[] @40",
	} {
		if got := fields(goName); got != want {
			t.Errorf("%s:\n got  %s\n want %s", goName, got, want)
		}
	}
	vals := map[string]string{}
	for _, it := range m.Consts {
		if it.Enum != nil {
			for _, c := range it.Enum.Consts {
				vals[c.Name] = c.Value.String()
			}
		}
		for i, mc := range it.Macros {
			vals[mc.Name] = it.Values[i]
		}
	}
	for name, want := range map[string]string{
		"EDGE_INT": "42", "EDGE_NEG": "-5", "EDGE_BIG": "0xffffffffffffffff", "EDGE_STR": `"hi \"there\""`,
		"EDGE_SIZE": "7", "EDGE_A": "-1", "EDGE_B": "0x7fffffff", "EDGE_C": "0x10000000000", "EDGE_D": "0x80000000",
	} {
		if vals[name] != want {
			t.Errorf("%s = %q, want %q", name, vals[name], want)
		}
	}
	reasons := map[string]string{}
	for _, s := range m.Skipped {
		reasons[s.Name] = s.Reason
	}
	for name, want := range map[string]string{
		"EDGE_FN": "function-like macro", "EDGE_EMPTY": "empty macro", "ABIGEN_EDGE_H": "empty macro",
		"EDGE_TYPE": "not an integer constant expression", "EDGE_UNDEFINED": "not an integer constant expression",
	} {
		if reasons[name] != want {
			t.Errorf("%s skipped as %q, want %q", name, reasons[name], want)
		}
	}
}

func TestBitfieldRejected(t *testing.T) {
	needCC(t)
	cfg := edgeConfig(t)
	cfg.Includes = []string{"bitfield.h"}
	cfg.Structs, _ = parseSpecs([]string{"bitfield.h=."}, true)
	cfg.Consts = nil
	if _, err := buildModel(cfg); err == nil || !strings.Contains(err.Error(), "bitfield") {
		t.Fatalf("want a bitfield error, got %v", err)
	}
}

// layoutCheckTest is a minimal layout test for a generated package: every Go
// struct against the C layout abigen recorded.
const layoutCheckTest = `package %s

import "testing"

func TestLayout(t *testing.T) {
	for _, l := range StructLayouts {
		typ := layoutGoTypes[l.GoName]
		if typ.Size() != l.Size {
			t.Errorf("%%s: Go size %%d, C %%d", l.GoName, typ.Size(), l.Size)
		}
		if uintptr(typ.Align()) < l.Align {
			t.Errorf("%%s: Go alignment %%d, C %%d", l.GoName, typ.Align(), l.Align)
		}
		for _, f := range l.Fields {
			if f.GoName == "" {
				continue
			}
			sf, ok := typ.FieldByName(f.GoName)
			if !ok || sf.Offset != f.Offset || sf.Type.Size() != f.Size {
				t.Errorf("%%s.%%s: Go %%d+%%d, C %%d+%%d", l.GoName, f.GoName, sf.Offset, sf.Type.Size(), f.Offset, f.Size)
			}
		}
	}
	if len(StructLayouts) < %d {
		t.Errorf("only %%d layouts", len(StructLayouts))
	}
}
`

// buildAndTest writes the generated files into a scratch module and runs go
// vet and go test there: the Go compiler's layout, not abigen's model of it.
func buildAndTest(t *testing.T, cfg *config, minStructs int) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Skip("go command not found")
		}
	}
	files, err := generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files = append(files,
		genFile{"go.mod", []byte("module example.com/" + cfg.Pkg + "\n\ngo 1.22\n")},
		genFile{"check_test.go", []byte(fmt.Sprintf(layoutCheckTest, cfg.Pkg, minStructs))})
	if err := writeFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"vet", "."}, {"test", "-count=1", "."}} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in the generated package: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEdgeCasesCompile checks the edge-case output with the Go compiler.
func TestEdgeCasesCompile(t *testing.T) {
	needCC(t)
	buildAndTest(t, edgeConfig(t), 6)
}

// TestMlx5dvReuse runs the flags the package documentation suggests for the
// mlx5 provider (WQE segments and CQEs from libibverbs-dev's mlx5dv.h, which
// include a packed struct) and checks the output with the Go compiler.
func TestMlx5dvReuse(t *testing.T) {
	needCC(t)
	if _, err := os.Stat("/usr/include/infiniband/mlx5dv.h"); err != nil {
		t.Skip("mlx5dv.h missing (Debian: apt-get install libibverbs-dev)")
	}
	cfg := defaultConfig()
	cfg.Includes = []string{"infiniband/mlx5dv.h"}
	cfg.Structs, _ = parseSpecs([]string{`infiniband/mlx5dv.h=^mlx5_(wqe_[a-z_]*seg|cqe64|wqe_av)\b`}, true)
	cfg.Consts, _ = parseSpecs([]string{"infiniband/mlx5dv.h=^MLX5_(OPCODE|CQE|WQE)_"}, false)
	cfg.Pkg = "mlx5"
	m, err := buildModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Structs {
		if s.CName == "mlx5_wqe_ctrl_seg" {
			got := fmt.Sprint(s.Size, " ", s.Fields[3].Name, " ", s.Fields[3].Offset)
			if got != "16 DciStreamChannelIdBytes 9" {
				t.Errorf("mlx5_wqe_ctrl_seg: %s", got)
			}
		}
	}
	buildAndTest(t, cfg, 10)
}

// TestArm64SameLayout generates the structs with an arm64 cross compiler
// (Debian: gcc-aarch64-linux-gnu) and expects the same Go types and table as
// on the host: the committed files serve both architectures.
func TestArm64SameLayout(t *testing.T) {
	needCC(t)
	const cross = "aarch64-linux-gnu-gcc"
	if _, err := exec.LookPath(cross); err != nil {
		t.Skip(cross + " not installed (Debian: apt-get install gcc-aarch64-linux-gnu)")
	}
	host := defaultConfig()
	arm := defaultConfig()
	arm.CC = cross
	for _, cfg := range []*config{host, arm} {
		cfg.ConstFile = "" // the cross headers package may be another kernel version
	}
	hf, err := generate(host)
	if err != nil {
		t.Fatal(err)
	}
	af, err := generate(arm)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(b []byte) []byte { return inputLine.ReplaceAll(b, nil) }
	for i := range hf {
		if !bytes.Equal(strip(hf[i].Data), strip(af[i].Data)) {
			t.Errorf("%s differs between the host and arm64:\n%s", hf[i].Name, firstDiff(strip(hf[i].Data), strip(af[i].Data)))
		}
	}
}
