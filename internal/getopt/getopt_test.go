package getopt

import (
	"strings"
	"testing"
)

var testLong = []Long{{"ib-dev", true, 'd'}, {"ib-port", true, 'i'}, {"iters", true, 'n'}, {"list", false, 'l'}}

// parse runs a whole command line: the options as "c=arg" words, the
// operands, and the one error line (if any).
func parse(args []string, posix bool) (opts, operands []string, errs string) {
	g := New(append([]string{"prog"}, args...), "d:i:n:l", testLong, posix, func(s string) { errs += s })
	for {
		c, arg := g.Next()
		switch c {
		case 0:
			return opts, g.Operands(), errs
		case '?':
			return opts, nil, errs
		}
		opts = append(opts, string(c)+"="+arg)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args           string
		posix          bool
		opts, operands string
		err            string
	}{
		{args: "-l host -drxe0 --ib-p 2 x -- -l", opts: "l= d=rxe0 i=2", operands: "host x -l"},
		{args: "-l host -drxe0", posix: true, opts: "l=", operands: "host -drxe0"},
		{args: "-ld -x --list=", opts: "l= d=-x", err: "prog: option '--list' doesn't allow an argument\n"},
		{args: "--ib", err: "prog: option '--ib' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n"},
		{args: "--it=3 - --", opts: "n=3", operands: "-"},
		{args: "-z", err: "prog: invalid option -- 'z'\n"},
		{args: "-l -n", opts: "l=", err: "prog: option requires an argument -- 'n'\n"},
		{args: "--ib-dev", err: "prog: option '--ib-dev' requires an argument\n"},
		{args: "--nope=1", err: "prog: unrecognized option '--nope=1'\n"},
	} {
		opts, operands, errs := parse(strings.Fields(c.args), c.posix)
		if strings.Join(opts, " ") != c.opts || strings.Join(operands, " ") != c.operands || errs != c.err {
			t.Errorf("%q (posix %v): opts %q operands %q error %q; want %q %q %q", c.args, c.posix, opts, operands, errs, c.opts, c.operands, c.err)
		}
	}
	if !TakesArg(testLong, "ib-d") || !TakesArg(testLong, "it") || TakesArg(testLong, "l") || TakesArg(testLong, "i") {
		t.Error("TakesArg")
	}
	if !ShortTakesArg("d:l", 'd') || ShortTakesArg("d:l", 'l') || ShortTakesArg("d:l", ':') || ShortTakesArg("d:l", 'x') {
		t.Error("ShortTakesArg")
	}
}
