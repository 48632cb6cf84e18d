package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// config is one generator run.
type config struct {
	CC             string
	CFlags         []string
	Includes       []string
	Structs        []spec
	Consts         []spec
	Pkg            string
	Dir            string
	TypesFile      string
	ConstFile      string
	LayoutFile     string
	LayoutTestFile string
	LayoutImport   string
	Keep           bool
}

// spec selects declarations of one header by name.
type spec struct {
	Header string         // "rdma/ib_user_verbs.h"
	Re     *regexp.Regexp // nil: all
}

func parseSpecs(vals []string, needRe bool) ([]spec, error) {
	var out []spec
	for _, v := range vals {
		hdr, re, hasRe := strings.Cut(v, "=")
		if hdr == "" || (needRe && !hasRe) {
			return nil, fmt.Errorf("bad spec %q: want HEADER=REGEXP", v)
		}
		s := spec{Header: hdr}
		if hasRe {
			r, err := regexp.Compile(re)
			if err != nil {
				return nil, fmt.Errorf("bad spec %q: %v", v, err)
			}
			s.Re = r
		}
		out = append(out, s)
	}
	return out, nil
}

// matchSpec reports whether a declaration named name in file is selected by
// specs, and returns the header as the spec spells it.
func matchSpec(specs []spec, file, name string) (string, bool) {
	for _, s := range specs {
		if headerMatches(file, s.Header) && (s.Re == nil || s.Re.MatchString(name)) {
			return s.Header, true
		}
	}
	return "", false
}

func headerMatches(file, hdr string) bool {
	file = filepath.ToSlash(file)
	return file == hdr || strings.HasSuffix(file, "/"+hdr)
}

// macro is an object-like macro defined by a selected header.
type macro struct {
	Name   string
	Body   string
	File   string // header as the spec spells it
	Line   int
	Str    string // Go-quoted value when Body is a plain C string literal
	IsStr  bool
	Probe  int // probe enum index, 0 if none
	Reason string
}

// skipped is a macro that got no constant, with why.
type skipped struct {
	Name, File, Reason string
}

// ccResult is what the compiler told about the headers.
type ccResult struct {
	Object    string            // path of the object file with DWARF
	Macros    []*macro          // selected object-like macros, in header order
	Skipped   []skipped         // selected macros without a value
	Inputs    map[string]string // spec header → resolved path
	ProbeFile string
	AlignTags []string // struct tag of each alignment probe
}

// Prefixes of the probe enums: macro values and struct alignments.
const (
	probePrefix = "abigen_m"
	alignPrefix = "abigen_a"
)

// runCC preprocesses and compiles the headers in a temporary directory.
func runCC(cfg *config, tmp string) (*ccResult, error) {
	res := &ccResult{Inputs: map[string]string{}}
	var inc bytes.Buffer
	for _, h := range cfg.Includes {
		fmt.Fprintf(&inc, "#include <%s>\n", h)
	}
	src := filepath.Join(tmp, "abigen_probe.c")
	res.ProbeFile = src
	if err := os.WriteFile(src, inc.Bytes(), 0o666); err != nil {
		return nil, err
	}

	// 1. Macro definitions with the file that defines each.
	pre, err := cc(cfg, tmp, "-E", "-dD", src)
	if err != nil {
		return nil, err
	}
	if err := res.scanMacros(cfg, pre); err != nil {
		return nil, err
	}

	// 2. Probe every candidate; drop those gcc rejects.
	cands := map[int]*macro{}
	var probes []*macro
	for _, m := range res.Macros {
		if m.Reason == "" && !m.IsStr {
			probes = append(probes, m)
		}
	}
	for try := 0; ; try++ {
		if try > 20 {
			return nil, fmt.Errorf("macro probes still fail after %d tries", try)
		}
		var b bytes.Buffer
		b.Write(inc.Bytes())
		line := strings.Count(inc.String(), "\n")
		clear(cands)
		n := 0
		for _, m := range probes {
			if m.Reason != "" {
				continue
			}
			n++
			line++
			m.Probe = n
			cands[line] = m
			fmt.Fprintf(&b, "enum %s%d { %s%d_v = (%s) };\n", probePrefix, n, probePrefix, n, m.Name)
		}
		if err := os.WriteFile(src, b.Bytes(), 0o666); err != nil {
			return nil, err
		}
		out, err := cc(cfg, tmp, "-fsyntax-only", "-fmax-errors=0", src)
		if err == nil {
			break
		}
		bad := badLines(out, filepath.Base(src))
		dropped := false
		for _, l := range bad {
			if m := cands[l]; m != nil && m.Reason == "" {
				m.Reason = "not an integer constant expression"
				dropped = true
			}
		}
		if !dropped {
			// Errors outside the probes: try each probe alone.
			if err := probeEach(cfg, tmp, inc.Bytes(), probes); err != nil {
				return nil, err
			}
			for _, m := range probes {
				m.Probe = 0
			}
			continue
		}
	}

	// 3. Compile with debug information for every declared type.
	res.Object = filepath.Join(tmp, "abigen_probe.o")
	compile := func() error {
		_, err := cc(cfg, tmp, "-g", "-O0", "-c", "-fno-eliminate-unused-debug-types", "-o", res.Object, src)
		return err
	}
	if err := compile(); err != nil {
		return nil, err
	}

	// 4. DWARF has no struct alignment: ask _Alignof for every struct tag
	// and compile again.
	tags, err := structTags(res.Object)
	if err != nil {
		return nil, err
	}
	old, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	b := bytes.NewBuffer(old)
	for i, tag := range tags {
		fmt.Fprintf(b, "enum %s%d { %s%d_v = _Alignof(struct %s) };\n", alignPrefix, i, alignPrefix, i, tag)
	}
	if err := os.WriteFile(src, b.Bytes(), 0o666); err != nil {
		return nil, err
	}
	if err := compile(); err != nil {
		return nil, err
	}
	res.AlignTags = tags
	for _, m := range res.Macros {
		if m.Reason != "" {
			res.Skipped = append(res.Skipped, skipped{m.Name, m.File, m.Reason})
		}
	}
	return res, nil
}

// probeEach compiles each probe alone, marking the ones that fail.
func probeEach(cfg *config, tmp string, inc []byte, probes []*macro) error {
	src := filepath.Join(tmp, "abigen_one.c")
	if err := os.WriteFile(src, inc, 0o666); err != nil {
		return err
	}
	if out, err := cc(cfg, tmp, "-fsyntax-only", src); err != nil {
		return fmt.Errorf("the headers do not compile on their own:\n%s", out)
	}
	for _, m := range probes {
		if m.Reason != "" {
			continue
		}
		b := append(append([]byte(nil), inc...), fmt.Sprintf("enum %sx { %sx_v = (%s) };\n", probePrefix, probePrefix, m.Name)...)
		if err := os.WriteFile(src, b, 0o666); err != nil {
			return err
		}
		if _, err := cc(cfg, tmp, "-fsyntax-only", src); err != nil {
			m.Reason = "not an integer constant expression"
		}
	}
	return nil
}

// badLines returns the lines of file that compiler diagnostics point at.
func badLines(out []byte, file string) []int {
	re := regexp.MustCompile(regexp.QuoteMeta(file) + `:(\d+):`)
	var lines []int
	for _, m := range re.FindAllSubmatch(out, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		lines = append(lines, n)
	}
	return lines
}

// cc runs the compiler and returns its combined output.
func cc(cfg *config, dir string, args ...string) ([]byte, error) {
	full := append([]string{"-std=gnu11", "-w", "-ftrack-macro-expansion=0"}, cfg.CFlags...)
	full = append(full, args...)
	cmd := exec.Command(cfg.CC, full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.Bytes(), fmt.Errorf("%s %s: %v\n%s", cfg.CC, strings.Join(full, " "), err, stderr.Bytes())
	}
	if len(args) > 0 && args[0] == "-E" {
		return stdout.Bytes(), nil
	}
	return stderr.Bytes(), nil
}

var (
	lineMarker = regexp.MustCompile(`^# (\d+) "([^"]*)"`)
	defineLine = regexp.MustCompile(`^#define ([A-Za-z_][A-Za-z0-9_]*)(\(?)(.*)$`)
	cString    = regexp.MustCompile(`^"([^"\\]|\\[\\"nt])*"$`)
)

// scanMacros reads `gcc -E -dD` output: the #define lines of each selected
// header, and the resolved path of every header named in a spec.
func (res *ccResult) scanMacros(cfg *config, pre []byte) error {
	seen := map[string]bool{}
	file, line := "", 0
	sc := bufio.NewScanner(bytes.NewReader(pre))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		t := sc.Text()
		if m := lineMarker.FindStringSubmatch(t); m != nil {
			line, _ = strconv.Atoi(m[1])
			file = m[2]
			for _, s := range append(append([]spec(nil), cfg.Structs...), cfg.Consts...) {
				if headerMatches(file, s.Header) {
					res.Inputs[s.Header] = file
				}
			}
			continue
		}
		cur := line
		line++
		m := defineLine.FindStringSubmatch(t)
		if m == nil {
			continue
		}
		name, fn, body := m[1], m[2] == "(", strings.TrimSpace(m[3])
		hdr, ok := matchSpec(cfg.Consts, file, name)
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		mc := &macro{Name: name, Body: body, File: hdr, Line: cur}
		switch {
		case fn:
			mc.Reason = "function-like macro"
			mc.Body = "(" + body
		case body == "":
			mc.Reason = "empty macro"
		case cString.MatchString(body):
			s, err := strconv.Unquote(body)
			if err != nil {
				mc.Reason = "string macro Go cannot spell"
			} else {
				mc.IsStr, mc.Str = true, strconv.Quote(s)
			}
		}
		res.Macros = append(res.Macros, mc)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, s := range append(append([]spec(nil), cfg.Structs...), cfg.Consts...) {
		if res.Inputs[s.Header] == "" {
			return fmt.Errorf("header %s is named in a spec but not included (add -include %s)", s.Header, s.Header)
		}
	}
	return nil
}

// inputHashes returns "header sha256-prefix" lines for the spec headers.
func inputHashes(inputs map[string]string) ([]string, error) {
	var hdrs []string
	for h := range inputs {
		hdrs = append(hdrs, h)
	}
	sort.Strings(hdrs)
	var out []string
	for _, h := range hdrs {
		b, err := os.ReadFile(inputs[h])
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, h+" sha256:"+hex.EncodeToString(sum[:8]))
	}
	return out, nil
}
