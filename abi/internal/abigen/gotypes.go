package main

import (
	"debug/dwarf"
	"fmt"
	"strings"
	"unicode"
)

// mapType maps a C member type (not a union) to Go.
func (g *gen) mapType(s *genStruct, t dwarf.Type, goSuffix, cPath string) (goType, error) {
	if sc, ok := scalarOf(t); ok {
		return sc, nil
	}
	switch st := strip(t).(type) {
	case *dwarf.ArrayType:
		if st.Count <= 0 {
			return goType{}, fmt.Errorf("flexible array in the middle of a struct")
		}
		var elem goType
		if u, ok := strip(st.Type).(*dwarf.StructType); ok && u.Kind == "union" {
			elem = goType{Expr: fmt.Sprintf("[%d]byte", u.ByteSize), Size: u.ByteSize, Align: 1, Comment: unionComment(u)}
		} else {
			var err error
			if elem, err = g.mapType(s, st.Type, goSuffix, cPath); err != nil {
				return goType{}, err
			}
		}
		return goType{
			Expr: fmt.Sprintf("[%d]%s", st.Count, elem.Expr), Size: st.Count * elem.Size, Align: elem.Align,
			BigEndian: elem.BigEndian, CType: cTypeName(t), Comment: elem.Comment, Struct: nil,
		}, nil
	case *dwarf.StructType:
		if st.Kind != "struct" {
			return goType{}, fmt.Errorf("%s is not a struct", st.Kind)
		}
		var gs *genStruct
		var err error
		if st.StructName != "" {
			gs, err = g.tagged(st.StructName)
		} else {
			gs, err = g.untagged(s, goSuffix, cPath, st)
		}
		if err != nil {
			return goType{}, err
		}
		return goType{Expr: gs.GoName, Size: gs.Size, Align: gs.Align, CType: cTypeName(t), Struct: gs}, nil
	}
	return goType{}, fmt.Errorf("abigen: C type %s (%T) has no Go mapping", t, strip(t))
}

// scalarOf maps C integer types (and pointers, as uint64) to Go.
func scalarOf(t dwarf.Type) (goType, bool) {
	be := false
	var le bool
	cname := cTypeName(t)
	for {
		switch tt := t.(type) {
		case *dwarf.TypedefType:
			be = be || strings.HasPrefix(tt.Name, "__be")
			le = le || strings.HasPrefix(tt.Name, "__le")
			t = tt.Type
			continue
		case *dwarf.QualType:
			t = tt.Type
			continue
		}
		break
	}
	size := t.Size()
	var signed bool
	switch tt := t.(type) {
	case *dwarf.UintType, *dwarf.UcharType, *dwarf.BoolType:
	case *dwarf.IntType, *dwarf.CharType:
		signed = true
	case *dwarf.EnumType:
		for _, v := range tt.Val {
			signed = signed || v.Val < 0
		}
	case *dwarf.PtrType:
		if size != 8 {
			return goType{}, false
		}
		return goType{Expr: "uint64", Size: 8, Align: 8, CType: cname, Comment: "C pointer " + cname}, true
	default:
		return goType{}, false
	}
	if size != 1 && size != 2 && size != 4 && size != 8 {
		return goType{}, false
	}
	expr := fmt.Sprintf("uint%d", size*8)
	if signed {
		expr = fmt.Sprintf("int%d", size*8)
	}
	gt := goType{Expr: expr, Size: size, Align: size, Scalar: true, BigEndian: be, CType: cname}
	switch {
	case be:
		gt.Comment = "big-endian"
	case le:
		gt.Comment = "little-endian"
	}
	return gt, true
}

// strip removes typedefs and qualifiers.
func strip(t dwarf.Type) dwarf.Type {
	for {
		switch tt := t.(type) {
		case *dwarf.TypedefType:
			t = tt.Type
		case *dwarf.QualType:
			t = tt.Type
		default:
			return t
		}
	}
}

// cTypeName spells a C type briefly.
func cTypeName(t dwarf.Type) string {
	switch tt := t.(type) {
	case *dwarf.TypedefType:
		return tt.Name
	case *dwarf.StructType:
		if tt.StructName != "" {
			return tt.Kind + " " + tt.StructName
		}
		return tt.Kind
	case *dwarf.ArrayType:
		return fmt.Sprintf("%s[%d]", cTypeName(tt.Type), tt.Count)
	}
	return t.String()
}

func unionComment(u *dwarf.StructType) string {
	var parts []string
	for _, f := range u.Field {
		if f.Type.Size() <= 0 {
			continue
		}
		n := f.Name
		if n == "" {
			n = "(unnamed)"
		}
		parts = append(parts, n+" "+cTypeName(f.Type))
	}
	return "union: " + strings.Join(parts, ", ")
}

// goName maps a C identifier to an exported Go name: max_send_wr → MaxSendWr.
func goName(c string) string {
	var b strings.Builder
	for _, p := range strings.Split(c, "_") {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	n := b.String()
	if n == "" || !unicode.IsLetter(rune(n[0])) {
		n = "X" + n
	}
	return n
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }
