package uverbs

import (
	_ "embed"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// wrSource is wr.go, embedded so the test also runs where the binary runs
// without the source tree (the rig's guest).
//
//go:embed wr.go
var wrSource []byte

// The aliases' documentation copies the provider structs' fields; every
// copy names exactly the fields the struct has, in order.
func TestWRDocsMatchStructs(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "wr.go", wrSource, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]reflect.Type{
		"SGE": reflect.TypeFor[SGE](), "SendWR": reflect.TypeFor[SendWR](), "RecvWR": reflect.TypeFor[RecvWR](),
		"UDDest": reflect.TypeFor[UDDest](), "MWBind": reflect.TypeFor[MWBind](),
		"WorkCompletion": reflect.TypeFor[WorkCompletion](), "QPCap": reflect.TypeFor[QPCap](),
	}
	seen := 0
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Doc == nil {
			return true
		}
		name := ts.Name.Name
		lines := strings.Split(ts.Doc.Text(), "\n")
		start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "type "+name+" struct {" })
		if start < 0 {
			return true
		}
		seen++
		var doc []string
		for _, l := range lines[start+1:] {
			l = strings.TrimSpace(l)
			if l == "}" {
				break
			}
			l, _, _ = strings.Cut(l, "//")
			idents := strings.Fields(strings.ReplaceAll(l, ",", " "))
			doc = append(doc, idents[:len(idents)-1]...) // the last word is the type
		}
		rt, ok := types[name]
		if !ok {
			t.Errorf("%s: documented as a struct but not checked here", name)
			return true
		}
		var fields []string
		for i := range rt.NumField() {
			fields = append(fields, rt.Field(i).Name)
		}
		if !slices.Equal(doc, fields) {
			t.Errorf("%s: the documentation lists %v, the struct has %v", name, doc, fields)
		}
		return true
	})
	if seen != len(types) {
		t.Errorf("checked %d documented structs, want %d", seen, len(types))
	}
}
