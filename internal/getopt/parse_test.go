package getopt

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// rcTable is the part of ibv_rc_pingpong's table (cmd/pingpong's rc mode)
// the tests need, in its order.
var rcTable = []Option{
	{Short: 'd', Long: "ib-dev", Arg: true}, {Short: 'i', Long: "ib-port", Arg: true}, {Short: 's', Long: "size", Arg: true},
	{Short: 'r', Long: "rx-depth", Arg: true}, {Short: 'n', Long: "iters", Arg: true}, {Short: 'e', Long: "events"},
	{Short: 'g', Long: "gid-idx", Arg: true}, {Short: 'O', Long: "iodp"}, {Short: 'c', Long: "chk"},
}

// usageError is one command line Parse refuses and glibc's message for it.
type usageError struct {
	args []string
	msg  string
}

// wantUsageErrors checks that Parse refuses each command line with its
// UsageError.
func wantUsageErrors(t *testing.T, table []Option, cases []usageError) {
	t.Helper()
	for _, c := range cases {
		_, err := Parse(c.args, table, false)
		if ue, ok := err.(UsageError); !ok || ue.Msg != c.msg || ue.Error() != c.msg {
			t.Errorf("Parse(%q): %v; want the usage error %q", c.args, err, c.msg)
		}
	}
}

func TestParseTable(t *testing.T) {
	p, err := Parse([]string{"-g", "1", "host", "-s64", "--iters=10", "-ec", "--rx-d", "7", "--", "-x"}, rcTable, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{{'g', "1"}, {'s', "64"}, {'n', "10"}, {'e', ""}, {'c', ""}, {'r', "7"}}
	if !reflect.DeepEqual(p.Options, want) {
		t.Errorf("options %+v, want %+v", p.Options, want)
	}
	if strings.Join(p.Operands, ",") != "host,-x" {
		t.Errorf("operands %q", p.Operands)
	}
	wantUsageErrors(t, rcTable, []usageError{
		{[]string{"-z"}, "invalid option -- 'z'"},
		{[]string{"-s"}, "option requires an argument -- 's'"},
		{[]string{"--size"}, "option '--size' requires an argument"},
		{[]string{"--i", "1"}, "option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'"},
		{[]string{"--events=1"}, "option '--events' doesn't allow an argument"},
		{[]string{"--nope"}, "unrecognized option '--nope'"},
		{[]string{"-e", "x", "-c:"}, "invalid option -- ':'"},
	})
	// POSIXLY_CORRECT: the first operand ends the options.
	p, err = Parse([]string{"-e", "host", "-c"}, rcTable, true)
	if err != nil || !reflect.DeepEqual(p.Options, []Value{{'e', ""}}) || strings.Join(p.Operands, ",") != "host,-c" {
		t.Errorf("posix: %+v, %v", p, err)
	}
	// No options, no operands.
	if p, err := Parse(nil, rcTable, false); err != nil || p.Options != nil || len(p.Operands) != 0 {
		t.Errorf("empty command line: %+v, %v", p, err)
	}
}

// TestParseLongOnly: long-only options (runes that are not ASCII, as
// perftest's 0x1000 and up) come back as their rune, and no short option
// word reaches them, not even one made of the bytes Parse stands them in
// with.
func TestParseLongOnly(t *testing.T) {
	const (
		optGbits = 0x1000 + iota
		optOutput
	)
	table := []Option{
		{Short: 's', Long: "size", Arg: true}, {Short: 'a', Long: "all"},
		{Short: optGbits, Long: "report_gbits"}, {Short: optOutput, Long: "output", Arg: true},
		{Short: 'h'}, // short only
	}
	p, err := Parse([]string{"--report_g", "srv", "-as8", "--out=json", "--output", "-x", "-h"}, table, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{{optGbits, ""}, {'a', ""}, {'s', "8"}, {optOutput, "json"}, {optOutput, "-x"}, {'h', ""}}
	if !reflect.DeepEqual(p.Options, want) || strings.Join(p.Operands, ",") != "srv" {
		t.Errorf("got %+v %q, want %+v [srv]", p.Options, p.Operands, want)
	}
	wantUsageErrors(t, table, []usageError{
		{[]string{"-\x80"}, "invalid option -- '\x80'"},
		{[]string{"-\x81"}, "invalid option -- '\x81'"},
		{[]string{"-\u1000"}, "invalid option -- '\xe1'"},
		{[]string{"--report_gbits=1"}, "option '--report_gbits' doesn't allow an argument"},
		{[]string{"--output"}, "option '--output' requires an argument"},
		{[]string{"--h"}, "unrecognized option '--h'"},
	})
}

func TestParseBadTable(t *testing.T) {
	many := make([]Option, 129)
	for i := range many {
		many[i] = Option{Short: rune(0x1000 + i), Long: strings.Repeat("x", i+1)}
	}
	// 128 long-only options fit (bytes 0x80 to 0xff), each back as its own rune.
	p, err := Parse([]string{"--x", "--xx", "--" + strings.Repeat("x", 128)}, many[:128], false)
	if want := []Value{{0x1000, ""}, {0x1001, ""}, {0x107f, ""}}; err != nil || !reflect.DeepEqual(p.Options, want) {
		t.Errorf("128 long-only options: %+v, %v; want %+v", p.Options, err, want)
	}
	for _, c := range []struct {
		name  string
		table []Option
	}{
		{"'?'", []Option{{Short: '?', Long: "help"}}},
		{"':'", []Option{{Short: ':'}}},
		{"'-'", []Option{{Short: '-'}}},
		{"0", []Option{{Long: "zero"}}},
		{"twice", []Option{{Short: 'a'}, {Short: 'a', Long: "all"}}},
		{"long-only twice", []Option{{Short: 0x1000, Long: "x"}, {Short: 0x1000, Long: "y"}}},
		{"no long name", []Option{{Short: 0x1000}}},
		{"129 long-only", many},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Parse accepted the table", c.name)
				}
			}()
			_, _ = Parse(nil, c.table, false)
		}()
	}
}

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int64
	}{
		{"0", 0}, {"10", 10}, {"010", 8}, {"0x40", 64}, {"0X1f", 31}, {"-5", -5}, {"+7", 7}, {" 12 ", 12},
		{"-0x10", -16}, {"9223372036854775807", math.MaxInt64}, {"-0x8000000000000000", math.MinInt64},
	} {
		if v, err := Number(c.s); err != nil || v != c.want {
			t.Errorf("Number(%q) = %d, %v; want %d", c.s, v, err, c.want)
		}
	}
	for _, s := range []string{"", "x", "0x", "08", "1k", "--5", "+-5", "-0x-5", "9223372036854775808", "-9223372036854775809"} {
		if v, err := Number(s); err == nil {
			t.Errorf("Number(%q) = %d, want an error", s, v)
		}
	}
}
