package main

import (
	"strings"

	"github.com/goverbs/goverbs/internal/getopt"
)

// The command line is parsed as glibc's getopt_long parses ibv_devinfo's
// (internal/getopt): optstring "d:i:lv" and the long options ib-dev=,
// ib-port=, list and verbose. ibv_devinfo ignores operands. In short:
//
//   - options and operands may be mixed; operands are skipped (and
//     ignored by ibv_devinfo) unless POSIXLY_CORRECT is set, which stops
//     at the first operand; "--" ends the options; "-" is an operand;
//   - short options group ("-vl") and take an argument attached ("-drxe0")
//     or from the next word ("-d rxe0"), even one that starts with '-';
//   - a long option may be abbreviated to any unique prefix ("--ib-d");
//     an exact match wins; its argument is attached with '=' or is the
//     next word;
//   - errors are printed as "<argv0>: …" on stderr and end the parse.

// devinfoLongOpts is ibv_devinfo's table, in its order (the order of the
// "possibilities" listed for an ambiguous abbreviation).
var devinfoLongOpts = []getopt.Long{
	{Name: "ib-dev", HasArg: true, Val: 'd'},
	{Name: "ib-port", HasArg: true, Val: 'i'},
	{Name: "list", Val: 'l'},
	{Name: "verbose", Val: 'v'},
}

const devinfoOptstring = "d:i:lv"

// newGetopt parses ibv_devinfo's command line (internal/getopt is glibc's
// getopt_long).
func newGetopt(args []string, posix bool, errorOut func(string)) *getopt.Parser {
	return getopt.New(args, devinfoOptstring, devinfoLongOpts, posix, errorOut)
}

// takeExtensions removes ibvinfo's own options from a command line before
// the ibv_devinfo-compatible parse, so that everything ibv_devinfo accepts
// or rejects parses exactly as it does: "-json"/"--json" and "-x"/"--extra",
// as whole words in option position (not the argument of -d or -i, not
// after "--", not after the first operand under POSIXLY_CORRECT).
func takeExtensions(args []string, posix bool) (rest []string, jsonOut, extra bool) {
	rest = append(rest, args[0])
	options := true
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !options {
			rest = append(rest, a)
			continue
		}
		switch {
		case a == "-json" || a == "--json":
			jsonOut = true
			continue
		case a == "-x" || a == "--extra":
			extra = true
			continue
		case a == "--":
			options = false
		case len(a) < 2 || a[0] != '-':
			if posix {
				options = false
			}
		case strings.HasPrefix(a, "--"):
			if name, _, hasValue := strings.Cut(a[2:], "="); !hasValue && getopt.TakesArg(devinfoLongOpts, name) && i+1 < len(args) {
				rest = append(rest, a, args[i+1])
				i++
				continue
			}
		default:
			// A short group whose last option wants an argument takes the
			// next word.
			for j := 1; j < len(a); j++ {
				if getopt.ShortTakesArg(devinfoOptstring, a[j]) {
					if j == len(a)-1 && i+1 < len(args) {
						rest = append(rest, a, args[i+1])
						i++
						goto next
					}
					break
				}
			}
		}
		rest = append(rest, a)
	next:
	}
	return rest, jsonOut, extra
}

// cStrtol is C's strtol(s, NULL, 0) on a 64-bit long: leading white
// space, a sign, a 0x (hex) or 0 (octal) prefix, digits up to the first
// that does not fit; overflow saturates. ibv_devinfo parses -i with it.
func cStrtol(s string) int64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	if i < len(s) && s[i] == '0' {
		base = 8
		if i+2 < len(s) && (s[i+1] == 'x' || s[i+1] == 'X') && digitVal(s[i+2]) < 16 {
			base = 16
			i += 2
		}
	}
	const limit = 1 << 63 // |LONG_MIN|
	var v uint64
	over := false
	for ; i < len(s); i++ {
		d := uint64(digitVal(s[i]))
		if d >= base {
			break
		}
		if v > (limit-d)/base {
			over = true
			continue
		}
		v = v*base + d
	}
	switch {
	case neg && (over || v >= limit):
		return -1 << 63
	case neg:
		return -int64(v)
	case over || v >= limit:
		return 1<<63 - 1
	}
	return int64(v)
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}
