package getopt

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Option is one entry of a command's option table, as getopt_long(3)
// sees it: -Short and --Long, which take an argument if Arg. A Short that
// is an ASCII letter (or other printable ASCII character) is a short
// option; any other rune (perftest uses 0x1000 and up) makes a long-only
// option, which Parse reports by that rune. Long "" is a short option with
// no long name.
type Option struct {
	Short rune
	Long  string
	Arg   bool // takes an argument
}

// Value is one option found on the command line: its Option's Short and
// its argument ("" for an option without one).
type Value struct {
	Short rune
	Arg   string
}

// Parsed is what Parse found: the options in command-line order and the
// operands, in order.
type Parsed struct {
	Options  []Value
	Operands []string
}

// UsageError is a command line getopt_long refuses, with glibc's message
// without the program name ("invalid option -- 'z'", "option '--size'
// requires an argument"). The commands that use Parse also return it for
// their own refusals of an option's value, to print their usage text.
type UsageError struct{ Msg string }

// Error returns Msg.
func (e UsageError) Error() string { return e.Msg }

// Parse parses args (without the program name) as glibc's getopt_long does
// with the short option string and long option table opts make (see the
// package comment): options and operands may be mixed (GNU permutation)
// unless posix (POSIXLY_CORRECT) stops at the first operand, "--" ends the
// options, short options may be grouped ("-ec") and take their argument
// attached ("-s64") or as the next word, long options take it after "=" or
// as the next word and may be abbreviated to any unambiguous prefix. The
// first bad option is a UsageError with glibc's message.
//
// A table Parse cannot hand to getopt_long (a Short of 0, '?', ':', ';' or
// '-', a Short twice, a long-only option without a Long, more than 128
// long-only options) is the caller's bug: Parse panics.
func Parse(args []string, opts []Option, posix bool) (Parsed, error) {
	// Long-only options travel through the parser as the bytes 0x80 and up:
	// the optstring holds only ASCII, so no short option word can name them.
	var optstring strings.Builder
	long := make([]Long, 0, len(opts))
	short := map[byte]rune{} // the parser's byte → Option.Short
	seen := map[rune]bool{}
	next := byte(0x80)
	for _, o := range opts {
		if seen[o.Short] {
			panic(fmt.Sprintf("getopt: option %q given twice", o.Short))
		}
		seen[o.Short] = true
		var b byte
		switch {
		case o.Short <= 0 || strings.ContainsRune("?:;-", o.Short):
			panic(fmt.Sprintf("getopt: option %q: %q cannot be an option character", o.Long, o.Short))
		case o.Short < 0x80:
			b = byte(o.Short)
			optstring.WriteByte(b)
			if o.Arg {
				optstring.WriteByte(':')
			}
		case o.Long == "":
			panic(fmt.Sprintf("getopt: long-only option %#x has no long name", o.Short))
		case next == 0:
			panic("getopt: more than 128 long-only options")
		default:
			b = next
			next++
		}
		short[b] = o.Short
		if o.Long != "" {
			long = append(long, Long{Name: o.Long, HasArg: o.Arg, Val: b})
		}
	}
	const argv0 = "getopt"
	var msg string
	g := New(append([]string{argv0}, args...), optstring.String(), long, posix, func(s string) { msg = s })
	var p Parsed
	for {
		c, arg := g.Next()
		switch c {
		case 0:
			p.Operands = g.Operands()
			return p, nil
		case '?':
			return p, UsageError{strings.TrimSuffix(strings.TrimPrefix(msg, argv0+": "), "\n")}
		}
		p.Options = append(p.Options, Value{short[c], arg})
	}
}

// Number parses an option's number as strtol(s, NULL, 0) accepts it:
// decimal, 0x hexadecimal or 0 octal, with one optional sign, white space
// around it ignored. Unlike strtol it refuses trailing garbage and numbers
// out of int64's range.
func Number(s string) (int64, error) {
	t := strings.TrimSpace(s)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	base := 10
	switch {
	case len(t) > 2 && (t[:2] == "0x" || t[:2] == "0X"):
		base, t = 16, t[2:]
	case len(t) > 1 && t[0] == '0':
		base, t = 8, t[1:]
	}
	u, err := strconv.ParseUint(t, base, 64) // no sign: one was taken above
	if err != nil || (!neg && u > math.MaxInt64) || (neg && u > -math.MinInt64) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if neg {
		return -int64(u), nil
	}
	return int64(u), nil
}
