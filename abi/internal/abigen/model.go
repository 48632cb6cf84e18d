package main

import (
	"debug/dwarf"
	"fmt"
	"sort"
	"strings"
)

// genStruct is one Go struct type to generate.
type genStruct struct {
	CName     string // C tag, or "parent.member" for an untagged struct
	GoName    string
	Header    string
	Line      int
	Size      int64
	CAlign    int64 // _Alignof in C
	Align     int64 // Go alignment of the Go type on 64-bit targets
	Fields    []genField
	Entries   []layoutEntry
	Tails     []layoutTail
	Accessors []accessor
	Notes     []string // extra doc comment paragraphs
	Nested    []*genStruct
	Top       bool // not nested in another generated type's output position
	Tagged    bool
	keepNotes int // Notes that survive a retry of layout
}

type genField struct {
	Name, Type, Comment string
	Offset, Size, Align int64
}

// layoutEntry is one C member (or member of a union, by C path) in the table.
type layoutEntry struct {
	CName, GoName string
	Offset, Size  int64
}

// layoutTail is a flexible array member.
type layoutTail struct {
	CName, CType     string
	Offset, ElemSize int64
}

// accessor reads or writes an integer at Off in byte-array field Field.
type accessor struct {
	Name, Field   string
	Off, Size     int64
	GoType, CType string
	CPath         string
	BigEndian     bool
}

// goType is a Go type expression with its size and Go alignment.
type goType struct {
	Expr        string
	Size, Align int64
	Scalar      bool // integer scalar: accessors can read it
	BigEndian   bool
	CType       string
	Comment     string
	Struct      *genStruct // for struct types
}

type gen struct {
	decls  *cDecls
	byGo   map[string]*genStruct
	byTag  map[string]*genStruct
	all    []*genStruct
	active map[string]bool
}

// buildTypes turns the selected C structs into Go structs, in output order.
func buildTypes(decls *cDecls, rank func(string) int) ([]*genStruct, error) {
	g := &gen{decls: decls, byGo: map[string]*genStruct{}, byTag: map[string]*genStruct{}, active: map[string]bool{}}
	var tags []string
	for tag, cs := range decls.Structs {
		if cs.Sel {
			tags = append(tags, tag)
		}
	}
	sort.Strings(tags)
	for _, tag := range tags {
		if _, err := g.tagged(tag); err != nil {
			return nil, err
		}
	}
	var top []*genStruct
	for _, s := range g.all {
		if s.Top {
			top = append(top, s)
		}
	}
	sort.Slice(top, func(i, j int) bool {
		a, b := top[i], top[j]
		if ra, rb := rank(a.Header), rank(b.Header); ra != rb {
			return ra < rb
		}
		if a.Header != b.Header {
			return a.Header < b.Header
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.CName < b.CName
	})
	var out []*genStruct
	var walk func(s *genStruct)
	walk = func(s *genStruct) {
		out = append(out, s)
		for _, n := range s.Nested {
			walk(n)
		}
	}
	for _, s := range top {
		walk(s)
	}
	return out, nil
}

// tagged returns the Go struct for C struct tag, building it on first use.
func (g *gen) tagged(tag string) (*genStruct, error) {
	if s := g.byTag[tag]; s != nil {
		return s, nil
	}
	cs := g.decls.Structs[tag]
	if cs == nil {
		return nil, fmt.Errorf("struct %s is used but not declared", tag)
	}
	if g.active[tag] {
		return nil, fmt.Errorf("struct %s contains itself", tag)
	}
	g.active[tag] = true
	defer delete(g.active, tag)
	s := &genStruct{CName: tag, GoName: goName(tag), Header: cs.Header, Line: cs.Line, Top: true, Tagged: true}
	if !cs.Sel {
		s.Notes = append(s.Notes, "It is not selected itself: a selected struct has a member of this type.")
	}
	if err := g.register(s); err != nil {
		return nil, err
	}
	g.byTag[tag] = s
	return s, g.build(s, cs.Type)
}

// untagged builds the Go struct for an untagged C struct reached by path.
func (g *gen) untagged(parent *genStruct, goSuffix, cPath string, st *dwarf.StructType) (*genStruct, error) {
	s := &genStruct{CName: parent.CName + "." + cPath, GoName: parent.GoName + goSuffix, Header: parent.Header, Line: parent.Line}
	if old := g.byGo[s.GoName]; old != nil && old.CName == s.CName {
		return old, nil // built before a retry of the parent's layout
	}
	if err := g.register(s); err != nil {
		return nil, err
	}
	parent.Nested = append(parent.Nested, s)
	return s, g.build(s, st)
}

func (g *gen) register(s *genStruct) error {
	if old := g.byGo[s.GoName]; old != nil {
		return fmt.Errorf("abigen: Go name %s is used by both %s and %s", s.GoName, old.CName, s.CName)
	}
	g.byGo[s.GoName] = s
	g.all = append(g.all, s)
	return nil
}

// member is a C member after flattening untagged unnamed structs.
type member struct {
	Name  string // C member name, "" for an unnamed union
	CPath string
	Off   int64
	Type  dwarf.Type
}

func flatten(st *dwarf.StructType, base int64, prefix string) ([]member, error) {
	var out []member
	for _, f := range st.Field {
		if f.BitSize != 0 {
			return nil, fmt.Errorf("bitfield %s is not supported", f.Name)
		}
		t := strip(f.Type)
		if sub, ok := t.(*dwarf.StructType); ok && f.Name == "" && sub.Kind == "struct" && sub.StructName == "" && f.Type.Size() > 0 {
			ms, err := flatten(sub, base+f.ByteOffset, prefix)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
			continue
		}
		out = append(out, member{Name: f.Name, CPath: join(prefix, f.Name), Off: base + f.ByteOffset, Type: f.Type})
	}
	return out, nil
}

// build lays out s from the C struct st.
func (g *gen) build(s *genStruct, st *dwarf.StructType) error {
	if st.Kind != "struct" {
		return fmt.Errorf("%s: %s is not a struct", s.CName, st.Kind)
	}
	s.Size = st.ByteSize
	s.CAlign = g.cAlignOf(st)
	s.keepNotes = len(s.Notes)
	err := g.layout(s, st, false)
	if err == errGoLayout {
		// A packed struct whose size Go cannot reach with typed fields.
		err = g.layout(s, st, true)
	}
	if err != nil {
		return fmt.Errorf("struct %s: %w", s.CName, err)
	}
	return nil
}

var errGoLayout = fmt.Errorf("abigen: Go layout does not match")

func (g *gen) layout(s *genStruct, st *dwarf.StructType, bytesOnly bool) error {
	s.Fields, s.Entries, s.Tails, s.Accessors = nil, nil, nil, nil
	s.Notes = s.Notes[:s.keepNotes]
	ms, err := flatten(st, 0, "")
	if err != nil {
		return err
	}
	lastSized := -1
	for i, m := range ms {
		if m.Type.Size() > 0 {
			lastSized = i
		}
	}
	names := map[string]string{}
	unnamedUnions := 0
	for _, m := range ms {
		if m.Name == "" && m.Type.Size() > 0 {
			unnamedUnions++
		}
	}
	unionIdx := 0
	pos := int64(0)
	pad := func(to int64) {
		if to > pos {
			s.Fields = append(s.Fields, genField{Name: "_", Type: fmt.Sprintf("[%d]byte", to-pos), Offset: pos, Size: to - pos, Align: 1})
			pos = to
		}
	}
	addName := func(goN, cN string) error {
		if old, ok := names[goN]; ok {
			return fmt.Errorf("members %s and %s both map to Go field %s", old, cN, goN)
		}
		names[goN] = cN
		return nil
	}
	for i, m := range ms {
		size := m.Type.Size()
		if size <= 0 {
			s.Tails = append(s.Tails, tailsOf(m.Type, m.Off, m.CPath)...)
			continue
		}
		if m.Off < pos {
			return fmt.Errorf("member %s at offset %d overlaps the previous member (ends at %d)", m.CPath, m.Off, pos)
		}
		pad(m.Off)
		t := strip(m.Type)
		if u, ok := t.(*dwarf.StructType); ok && u.Kind == "union" {
			name := "_union"
			if m.Name != "" {
				name = goName(m.Name)
			} else if unnamedUnions > 1 {
				name = fmt.Sprintf("_union%d", unionIdx)
				unionIdx++
			}
			if err := addName(name, m.CPath); err != nil {
				return err
			}
			s.Fields = append(s.Fields, genField{Name: name, Type: fmt.Sprintf("[%d]byte", size), Comment: unionComment(u), Offset: m.Off, Size: size, Align: 1})
			s.Entries = append(s.Entries, layoutEntry{CName: m.CPath, GoName: name, Offset: m.Off, Size: size})
			gp := ""
			if m.Name != "" {
				gp = name
			}
			if err := g.overlay(s, u, name, m.Off, 0, m.CPath, gp); err != nil {
				return err
			}
			pos = m.Off + size
			continue
		}
		gt, err := g.mapType(s, m.Type, goName(m.Name), m.CPath)
		if err != nil {
			return fmt.Errorf("member %s: %w", m.CPath, err)
		}
		if gt.Size != size {
			return fmt.Errorf("member %s: Go type %s has %d bytes, C %d", m.CPath, gt.Expr, gt.Size, size)
		}
		name := goName(m.Name)
		f := genField{Name: name, Type: gt.Expr, Comment: gt.Comment, Offset: m.Off, Size: size, Align: gt.Align}
		if m.Off%gt.Align != 0 || (bytesOnly && gt.Align > 1) {
			// Go cannot place this type here (packed C struct).
			f.Type, f.Align = fmt.Sprintf("[%d]byte", size), 1
			if gt.Scalar {
				f.Name = name + "Bytes"
				f.Comment = strings.TrimSpace("packed " + gt.CType + " at offset " + fmt.Sprint(m.Off) + ": use " + name + "/Set" + name + "; " + gt.Comment)
				s.Accessors = append(s.Accessors, accessor{Name: name, Field: f.Name, Off: 0, Size: size, GoType: gt.Expr, CType: gt.CType, CPath: m.CPath, BigEndian: gt.BigEndian})
			} else {
				f.Comment = strings.TrimSpace(fmt.Sprintf("packed %s at offset %d, not Go-aligned", gt.CType, m.Off))
			}
		}
		if err := addName(f.Name, m.CPath); err != nil {
			return err
		}
		s.Fields = append(s.Fields, f)
		s.Entries = append(s.Entries, layoutEntry{CName: m.CPath, GoName: f.Name, Offset: m.Off, Size: size})
		if gt.Struct != nil && i == lastSized {
			for _, t := range gt.Struct.Tails {
				s.Tails = append(s.Tails, layoutTail{CName: m.CPath + "." + t.CName, CType: t.CType, Offset: m.Off + t.Offset, ElemSize: t.ElemSize})
			}
		}
		pos = m.Off + size
	}
	pad(s.Size)
	if err := s.checkAccessors(); err != nil {
		return err
	}
	// Check the layout against Go's rules (64-bit: uint64 aligned to 8).
	off, align := int64(0), int64(1)
	for _, f := range s.Fields {
		off = roundUp(off, f.Align)
		if off != f.Offset {
			return fmt.Errorf("abigen: Go would place %s at %d, C has it at %d", f.Name, off, f.Offset)
		}
		off += f.Size
		align = max(align, f.Align)
	}
	if roundUp(off, align) != s.Size {
		if bytesOnly {
			return fmt.Errorf("abigen: Go size %d, C size %d", roundUp(off, align), s.Size)
		}
		return errGoLayout
	}
	s.Align = align
	switch {
	case s.CAlign > align && s.CAlign <= 8:
		// Give the Go type C's alignment with a zero-size first field.
		s.Fields = append([]genField{{Name: "_", Type: fmt.Sprintf("[0]uint%d", s.CAlign*8), Align: s.CAlign, Comment: fmt.Sprintf("C aligns this struct to %d bytes", s.CAlign)}}, s.Fields...)
		s.Align = s.CAlign
	case s.CAlign > align:
		s.Notes = append(s.Notes, fmt.Sprintf("C aligns it to %d bytes, Go to %d.", s.CAlign, align))
	case s.CAlign < align:
		s.Notes = append(s.Notes, fmt.Sprintf("C aligns it to %d bytes (packed), Go to %d.", s.CAlign, align))
	}
	return nil
}

// cAlignOf returns a C type's alignment: _Alignof for tagged structs (from
// the probes), the natural alignment of scalars, the largest member's for
// untagged structs and unions.
func (g *gen) cAlignOf(t dwarf.Type) int64 {
	switch tt := strip(t).(type) {
	case *dwarf.ArrayType:
		return g.cAlignOf(tt.Type)
	case *dwarf.StructType:
		if tt.Kind == "struct" && tt.StructName != "" {
			if a, ok := g.decls.Aligns[tt.StructName]; ok {
				return a
			}
		}
		a := int64(1)
		for _, f := range tt.Field {
			a = max(a, g.cAlignOf(f.Type))
		}
		return a
	}
	if sz := t.Size(); sz > 0 {
		return sz
	}
	return 1
}

// checkAccessors drops accessors whose names collide with fields or each other.
func (s *genStruct) checkAccessors() error {
	used := map[string]bool{}
	for _, f := range s.Fields {
		used[f.Name] = true
	}
	var keep []accessor
	for _, a := range s.Accessors {
		if used[a.Name] || used["Set"+a.Name] {
			s.Notes = append(s.Notes, fmt.Sprintf("No accessor for %s: the name %s is taken.", a.CPath, a.Name))
			continue
		}
		used[a.Name], used["Set"+a.Name] = true, true
		keep = append(keep, a)
	}
	s.Accessors = keep
	return nil
}

// overlay records what a union holds: layout entries for its named members
// (by C path), accessors for integer members, and Go types for untagged
// structs in named members. field is the Go byte array, fieldOff its offset
// in s, off the position of u inside that field.
func (g *gen) overlay(s *genStruct, u *dwarf.StructType, field string, fieldOff, off int64, cPath, goPath string) error {
	for _, f := range u.Field {
		if f.BitSize != 0 {
			return fmt.Errorf("bitfield %s is not supported", f.Name)
		}
		size := f.Type.Size()
		if size <= 0 {
			continue
		}
		mc, mg := join(cPath, f.Name), goPath+goName(f.Name)
		if f.Name == "" {
			mg = goPath
		}
		at := off + f.ByteOffset
		if f.Name != "" {
			s.Entries = append(s.Entries, layoutEntry{CName: mc, Offset: fieldOff + at, Size: size})
		}
		t := strip(f.Type)
		if st, ok := t.(*dwarf.StructType); ok && st.StructName == "" {
			if st.Kind == "struct" && f.Name != "" {
				if _, err := g.untagged(s, mg, mc, st); err != nil {
					return err
				}
			}
			if err := g.overlay(s, st, field, fieldOff, at, mc, mg); err != nil {
				return err
			}
			continue
		}
		if sc, ok := scalarOf(f.Type); ok && f.Name != "" {
			s.Accessors = append(s.Accessors, accessor{Name: mg, Field: field, Off: at, Size: size, GoType: sc.Expr, CType: sc.CType, CPath: mc, BigEndian: sc.BigEndian})
		}
	}
	return nil
}

// tailsOf finds the flexible array members in a zero-sized member.
func tailsOf(t dwarf.Type, off int64, cPath string) []layoutTail {
	switch t := strip(t).(type) {
	case *dwarf.ArrayType:
		if t.Count <= 0 {
			return []layoutTail{{CName: cPath, CType: cTypeName(t.Type) + "[]", Offset: off, ElemSize: t.Type.Size()}}
		}
	case *dwarf.StructType:
		var out []layoutTail
		for _, f := range t.Field {
			out = append(out, tailsOf(f.Type, off+f.ByteOffset, join(cPath, f.Name))...)
		}
		return out
	}
	return nil
}
