package uverbs_test

import (
	_ "embed"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
)

//go:embed example_test.go
var exampleSource string

// rigOutputs reads each example's "Rig output:" comment from its source:
// the expected output, one line per comment line after the marker.
func rigOutputs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", exampleSource, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		for _, cg := range f.Comments {
			if cg.Pos() < fn.Body.Lbrace || cg.End() > fn.Body.Rbrace {
				continue
			}
			if text, ok := strings.CutPrefix(cg.Text(), "Rig output:\n"); ok {
				out[strings.TrimPrefix(fn.Name.Name, "Example")] = text
			}
		}
	}
	return out
}

// capture runs f with os.Stdout redirected and returns what it printed.
func capture(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	f()
	w.Close()
	os.Stdout = saved
	return <-done
}

// TestExamplesRig runs the package's examples on the rig's devices and
// checks each one's output against its "Rig output:" comment (go test
// only compiles them: a host has no device). An example that fails calls
// log.Fatal, which fails this binary.
func TestExamplesRig(t *testing.T) {
	want := rigOutputs(t)
	for _, name := range []string{"Devices", "PD_RegMR", "CQ_Wait", "QP_Connect"} {
		if want[name] == "" {
			t.Errorf("Example%s has no Rig output comment", name)
		}
	}
	rigtest.Require(t)
	for _, d := range []string{"rxe0", "rxea", "rxeb", "siw0"} {
		rigtest.Device(t, d)
	}
	for name, ex := range map[string]func(){
		"Devices": ExampleDevices, "PD_RegMR": ExamplePD_RegMR, "CQ_Wait": ExampleCQ_Wait,
		"QP_Connect": ExampleQP_Connect, "Recorder": ExampleRecorder,
	} {
		t.Run(name, func(t *testing.T) {
			got := capture(t, ex)
			t.Logf("Example%s printed:\n%s", name, got)
			if w, ok := want[name]; ok && strings.TrimSpace(got) != strings.TrimSpace(w) {
				t.Errorf("Example%s printed\n%s\nwant (its Rig output comment)\n%s", name, got, w)
			}
		})
	}
}
