package main

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// cStruct is a tagged struct declared in a header.
type cStruct struct {
	Tag    string
	File   string // path gcc reports
	Header string // spec header, or the path after the last include/ when not selected
	Line   int
	Type   *dwarf.StructType
	Sel    bool
}

// cValue is an integer constant with the signedness and width gcc gave it.
type cValue struct {
	Bits   uint64
	Signed bool
}

func (v cValue) String() string {
	if v.Signed && int64(v.Bits) < 0 {
		n := -int64(v.Bits)
		if n < 1024 && n > 0 {
			return "-" + strconv.FormatInt(n, 10)
		}
		return "-0x" + strconv.FormatUint(-v.Bits, 16)
	}
	if v.Bits < 1024 {
		return strconv.FormatUint(v.Bits, 10)
	}
	return "0x" + strconv.FormatUint(v.Bits, 16)
}

// cEnum is an enum declared in a selected header, with its selected constants.
type cEnum struct {
	Name   string // tag, "" when anonymous
	Header string
	Line   int
	Consts []cEnumConst
}

type cEnumConst struct {
	Name  string
	Value cValue
}

// cDecls is everything read from the object's DWARF.
type cDecls struct {
	Structs map[string]*cStruct // by tag
	Enums   []*cEnum
	Probes  map[int]cValue   // macro probe index → value
	Aligns  map[string]int64 // struct tag → _Alignof
}

// structTags lists the tags of the complete structs in an object's DWARF.
func structTags(obj string) ([]string, error) {
	f, err := elf.Open(obj)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", obj, err)
	}
	var tags []string
	seen := map[string]bool{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			return tags, nil
		}
		if e.Tag == dwarf.TagCompileUnit {
			continue
		}
		if e.Children {
			r.SkipChildren()
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		decl, _ := e.Val(dwarf.AttrDeclaration).(bool)
		line, _ := e.Val(dwarf.AttrDeclLine).(int64) // 0 for gcc's builtins (__va_list_tag)
		if e.Tag == dwarf.TagStructType && name != "" && !decl && line > 0 && !seen[name] {
			seen[name] = true
			tags = append(tags, name)
		}
	}
}

// readDWARF reads struct and enum declarations from the object file.
func readDWARF(cfg *config, obj string, alignTags []string) (*cDecls, error) {
	f, err := elf.Open(obj)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", obj, err)
	}
	out := &cDecls{Structs: map[string]*cStruct{}, Probes: map[int]cValue{}, Aligns: map[string]int64{}}
	r := d.Reader()
	var files []*dwarf.LineFile
	fileOf := func(e *dwarf.Entry) string {
		i, ok := e.Val(dwarf.AttrDeclFile).(int64)
		if !ok || i < 0 || int(i) >= len(files) || files[i] == nil {
			return ""
		}
		return files[i].Name
	}
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			lr, err := d.LineReader(e)
			if err != nil {
				return nil, err
			}
			if lr != nil {
				files = lr.Files()
			}
			continue
		}
		if e.Children {
			r.SkipChildren()
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		line, _ := e.Val(dwarf.AttrDeclLine).(int64)
		if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl {
			continue
		}
		switch e.Tag {
		case dwarf.TagStructType:
			if name == "" {
				continue
			}
			t, err := d.Type(e.Offset)
			if err != nil {
				return nil, err
			}
			st, ok := t.(*dwarf.StructType)
			if !ok || st.Incomplete {
				continue
			}
			file := fileOf(e)
			hdr, sel := matchSpec(cfg.Structs, file, name)
			if !sel {
				hdr = shortHeader(file)
			}
			if old := out.Structs[name]; old != nil {
				return nil, fmt.Errorf("struct %s declared twice (%s, %s)", name, old.File, file)
			}
			out.Structs[name] = &cStruct{Tag: name, File: file, Header: hdr, Line: int(line), Type: st, Sel: sel}
		case dwarf.TagEnumerationType:
			t, err := d.Type(e.Offset)
			if err != nil {
				return nil, err
			}
			et, ok := t.(*dwarf.EnumType)
			if !ok {
				continue
			}
			enc, _ := e.Val(dwarf.AttrEncoding).(int64)
			signed := enc == 5 || enc == 6 // DW_ATE_signed, DW_ATE_signed_char
			if enc == 0 {
				// No DW_AT_encoding: gcc makes an enum signed iff a value is negative.
				for _, v := range et.Val {
					signed = signed || v.Val < 0
				}
			}
			norm := func(v int64) cValue {
				b := uint64(v)
				if sz := et.ByteSize; sz > 0 && sz < 8 {
					mask := uint64(1)<<(8*sz) - 1
					b &= mask
					if signed && b&(1<<(8*sz-1)) != 0 {
						b |= ^mask
					}
				}
				return cValue{Bits: b, Signed: signed}
			}
			if strings.HasPrefix(name, alignPrefix) && len(et.Val) == 1 {
				n, err := strconv.Atoi(strings.TrimPrefix(name, alignPrefix))
				if err == nil && n >= 0 && n < len(alignTags) {
					out.Aligns[alignTags[n]] = et.Val[0].Val
					continue
				}
			}
			if strings.HasPrefix(name, probePrefix) && len(et.Val) == 1 {
				n, err := strconv.Atoi(strings.TrimPrefix(name, probePrefix))
				if err == nil {
					out.Probes[n] = norm(et.Val[0].Val)
					continue
				}
			}
			ce := &cEnum{Name: name, Line: int(line)}
			for _, v := range et.Val {
				hdr, ok := matchSpec(cfg.Consts, fileOf(e), v.Name)
				if !ok {
					continue
				}
				ce.Header = hdr
				ce.Consts = append(ce.Consts, cEnumConst{v.Name, norm(v.Val)})
			}
			if len(ce.Consts) > 0 {
				out.Enums = append(out.Enums, ce)
			}
		}
	}
	return out, nil
}

// shortHeader spells a header path the way it is #included.
func shortHeader(file string) string {
	file = filepath.ToSlash(file)
	if i := strings.LastIndex(file, "/include/"); i >= 0 {
		return file[i+len("/include/"):]
	}
	return filepath.Base(file)
}
