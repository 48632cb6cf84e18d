// Command abigen generates Go bindings for C kernel ABI headers: Go structs with
// exactly the C layout, untyped constants with their C names, and a table of C
// sizes and offsets that a test checks the Go structs against.
//
// It is run by `go generate ./abi` (see abi/generate.go) and needs a C compiler
// only then: generated files are committed and nothing at build or test time
// calls the compiler.
//
// # How it works
//
//  1. It writes a C file including every -include header and preprocesses it
//     with `gcc -E -dD` to learn which object-like macros each header defines.
//  2. It adds one probe per macro, `enum abigen_mN { abigen_mN_v = (MACRO) };`,
//     and drops the macros that are not integer constant expressions (gcc's
//     error lines name them; string literals are kept as Go strings).
//  3. It compiles the file with `gcc -g -c -fno-eliminate-unused-debug-types` and
//     reads the object's DWARF with debug/elf and debug/dwarf: every struct and
//     enum a header declares, with member names, types, offsets and sizes; the
//     probe enums give the macro values, with gcc's own signedness and width.
//  4. It compiles once more with one `_Alignof(struct tag)` probe per struct.
//  5. It lays out Go structs with explicit padding (`_ [n]byte`) so every field
//     sits at its C offset and unsafe.Sizeof equals sizeof, checks that layout
//     against its model of Go's alignment rules, and writes gofmt'ed files.
//
// No value is computed by hand: offsets, sizes and constant values all come
// from the compiler, so the output follows the ABI of the compiler's target
// (x86-64 and arm64 agree for these headers; TestArm64SameLayout checks it when
// aarch64-linux-gnu-gcc is installed).
//
// # Mapping rules
//
//   - struct ib_uverbs_create_cq → IbUverbsCreateCq; member max_send_wr →
//     MaxSendWr (split at '_', capitalise each part). A struct declared without
//     a tag inside another gets the parent's Go name plus the member's
//     (ib_uverbs_odp_caps.per_transport_caps → IbUverbsOdpCapsPerTransportCaps).
//   - __u8 … __u64 and __aligned_u64 → uint8 … uint64; __s8 … __s64 → int8 …
//     int64; __be16/32/64 → uint16/32/64 with a "big-endian" comment: the field
//     holds the bytes as stored, so a little-endian host reads them swapped
//     (use encoding/binary.BigEndian on the bytes, or math/bits.ReverseBytes).
//   - fixed arrays → Go arrays; structs → Go struct types; members of
//     anonymous structs are flattened into the parent, as C does.
//   - a union → a byte array of its size named after the union member (Ex for
//     `ex`), or `_union` (`_union0`, `_union1`, … when there are several) when
//     the union has no member name. Integer members reachable through the
//     union (directly or through untagged structs) get accessors: ExImmData /
//     SetExImmData, Data / SetData. Untagged structs in named union members get
//     Go types too (RxeSendWrWrRdma) for unsafe views.
//   - flexible array members (x[], x[0], __DECLARE_FLEX_ARRAY) are omitted; the
//     layout table records them as tails with their offset and element size,
//     also when they end a nested struct that ends the parent (rxe_send_wqe's
//     dma.sge at 208).
//   - a scalar member the Go layout cannot place at its C offset (packed
//     structs) becomes NameBytes [n]byte with Name / SetName accessors.
//   - DWARF has no struct alignment, so abigen asks `_Alignof` for every
//     struct tag. When the Go fields align a type less than C does (a union
//     of u64 turned into bytes, a flexible __aligned_u64 array left out), a
//     zero-size first field `_ [0]uint64` gives it C's alignment.
//   - bitfields are rejected.
//   - enum constants and object-like macros keep their C names as untyped
//     constants; function-like, empty and non-integer macros are listed at the
//     end of the constants file.
//
// # Flags
//
// Without flags abigen generates package abi: the defaults are the uverbs
// core, rxe, siw and mlx5 uapi headers, rdma_netlink.h and rdma_user_cm.h
// (the rdma_cm ABI: rdma_ucm_* structs). Any list flag given
// replaces that list's default.
//
//	-cc gcc              C compiler (gcc or clang; a cross compiler gives that target's layout)
//	-cflags "..."        extra compiler flags, split at spaces (e.g. "-I/opt/rdma-core/include")
//	-include HEADER      header to #include, in order (repeatable)
//	-structs HDR=REGEXP  generate every struct declared in HDR whose tag matches REGEXP (repeatable)
//	-consts HDR[=REGEXP] generate every enum constant and object-like macro declared in HDR
//	                     whose name matches REGEXP, default all (repeatable)
//	-pkg abi             package name of the generated files
//	-dir .               output directory
//	-types ztypes.go     Go structs ("" to skip)
//	-constfile zconst.go constants ("" to skip)
//	-layout zlayout.go   layout table ("" to skip)
//	-layouttest zlayout_test.go
//	                     test helper mapping Go names to reflect types ("" to skip)
//	-layoutimport PATH   import path of the package declaring StructLayout, FieldLayout
//	                     and TailLayout; empty declares them in the layout file
//	-keep                keep the temporary C files and object, and print where they are
//
// A header HDR is matched against the end of the path gcc reports for each
// declaration ("rdma/ib_user_verbs.h" matches /usr/include/rdma/ib_user_verbs.h).
//
// For example, the mlx5 provider can generate its WQE and CQE layouts from
// libibverbs-dev's mlx5dv.h with, in provider/mlx5/generate.go:
//
//	//go:generate go run ../../abi/internal/abigen -pkg mlx5 -include infiniband/mlx5dv.h -structs infiniband/mlx5dv.h=^mlx5_(wqe_[a-z_]*seg|cqe64|wqe_av)\b -consts infiniband/mlx5dv.h=^MLX5_(OPCODE|CQE|WQE)_ -types zwqe.go -constfile zwqe_const.go -layout zwqe_layout.go -layouttest zwqe_layout_test.go -layoutimport github.com/goverbs/goverbs/abi
//
// (go generate expands $NAME, so write no '$' in the patterns) and check the result with a test like abi/layout_test.go, walking its own
// StructLayouts against its layoutGoTypes map.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// defaultIncludes are the headers package abi is generated from.
// linux/netlink.h comes first so rdma_netlink.h's RDMA_NLA_TYPE_MASK, which
// uses NLA_F_NESTED without including it, can be evaluated.
var defaultIncludes = []string{
	"linux/netlink.h",
	"rdma/ib_user_verbs.h",
	"rdma/ib_user_ioctl_verbs.h",
	"rdma/ib_user_ioctl_cmds.h",
	"rdma/rdma_user_ioctl_cmds.h",
	"rdma/rdma_user_ioctl.h",
	"rdma/rdma_user_rxe.h",
	"rdma/siw-abi.h",
	"rdma/mlx5-abi.h",
	"rdma/mlx5_user_ioctl_cmds.h",
	"rdma/mlx5_user_ioctl_verbs.h",
	"rdma/rdma_netlink.h",
	"rdma/rdma_user_cm.h",
}

var defaultStructs = []string{
	"rdma/ib_user_verbs.h=^ib_uverbs_",
	"rdma/ib_user_ioctl_verbs.h=^ib_uverbs_",
	"rdma/rdma_user_ioctl_cmds.h=^ib_uverbs_",
	"rdma/rdma_user_rxe.h=.",
	"rdma/siw-abi.h=.",
	"rdma/mlx5-abi.h=.",
	"rdma/mlx5_user_ioctl_verbs.h=.",
	"rdma/rdma_user_cm.h=^rdma_ucm_",
}

var defaultConsts = []string{
	"rdma/ib_user_verbs.h",
	"rdma/ib_user_ioctl_verbs.h",
	"rdma/ib_user_ioctl_cmds.h",
	"rdma/rdma_user_ioctl_cmds.h",
	// Only the verbs part of rdma_user_ioctl.h: the legacy name of the ioctl
	// magic. Its MAD and HFI ioctl numbers are other drivers' business.
	"rdma/rdma_user_ioctl.h=^IB_IOCTL_MAGIC$",
	"rdma/rdma_user_rxe.h",
	"rdma/siw-abi.h",
	"rdma/mlx5-abi.h",
	"rdma/mlx5_user_ioctl_cmds.h",
	"rdma/mlx5_user_ioctl_verbs.h",
	"rdma/rdma_netlink.h",
	"rdma/rdma_user_cm.h",
}

// listFlag is a repeatable string flag whose first use replaces its default.
type listFlag struct {
	vals []string
	set  bool
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }

func (l *listFlag) Set(s string) error {
	if !l.set {
		l.vals, l.set = nil, true
	}
	l.vals = append(l.vals, s)
	return nil
}

func main() {
	cfg := defaultConfig()
	includes := &listFlag{vals: cfg.Includes}
	structs := &listFlag{vals: defaultStructs}
	consts := &listFlag{vals: defaultConsts}
	var cflags string
	flag.StringVar(&cfg.CC, "cc", cfg.CC, "C compiler")
	flag.StringVar(&cflags, "cflags", "", "extra C compiler flags, separated by spaces")
	flag.Var(includes, "include", "header to #include (repeatable)")
	flag.Var(structs, "structs", "HEADER=REGEXP: structs to generate (repeatable)")
	flag.Var(consts, "consts", "HEADER[=REGEXP]: constants to generate (repeatable)")
	flag.StringVar(&cfg.Pkg, "pkg", cfg.Pkg, "Go package name")
	flag.StringVar(&cfg.Dir, "dir", cfg.Dir, "output directory")
	flag.StringVar(&cfg.TypesFile, "types", cfg.TypesFile, "output file for structs (empty: none)")
	flag.StringVar(&cfg.ConstFile, "constfile", cfg.ConstFile, "output file for constants (empty: none)")
	flag.StringVar(&cfg.LayoutFile, "layout", cfg.LayoutFile, "output file for the layout table (empty: none)")
	flag.StringVar(&cfg.LayoutTestFile, "layouttest", cfg.LayoutTestFile, "output test file mapping Go names to types (empty: none)")
	flag.StringVar(&cfg.LayoutImport, "layoutimport", "", "import path declaring StructLayout (empty: declare it)")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the temporary C files and print their directory")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: abigen [flags]\n\nSee the package documentation (go doc ./abi/internal/abigen) for details.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg.Includes = includes.vals
	cfg.CFlags = strings.Fields(cflags)
	var err error
	if cfg.Structs, err = parseSpecs(structs.vals, true); err == nil {
		cfg.Consts, err = parseSpecs(consts.vals, false)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(2)
	}
	files, err := generate(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
	if err := writeFiles(cfg.Dir, files); err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
}

// defaultConfig is the configuration that generates package abi.
func defaultConfig() *config {
	structs, err := parseSpecs(defaultStructs, true)
	if err != nil {
		panic(err)
	}
	consts, err := parseSpecs(defaultConsts, false)
	if err != nil {
		panic(err)
	}
	return &config{
		CC:             "gcc",
		Includes:       append([]string(nil), defaultIncludes...),
		Structs:        structs,
		Consts:         consts,
		Pkg:            "abi",
		Dir:            ".",
		TypesFile:      "ztypes.go",
		ConstFile:      "zconst.go",
		LayoutFile:     "zlayout.go",
		LayoutTestFile: "zlayout_test.go",
	}
}

// writeFiles writes the generated files into dir, leaving unchanged files alone.
func writeFiles(dir string, files []genFile) error {
	for _, f := range files {
		path := dir + string(os.PathSeparator) + f.Name
		if old, err := os.ReadFile(path); err == nil && string(old) == string(f.Data) {
			continue
		}
		if err := os.WriteFile(path, f.Data, 0o666); err != nil {
			return err
		}
	}
	return nil
}
