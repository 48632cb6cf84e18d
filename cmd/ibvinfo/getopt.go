package main

import "strings"

// The command line is parsed as glibc's getopt_long parses ibv_devinfo's:
// optstring "d:i:lv" and the long options ib-dev=, ib-port=, list and
// verbose. What follows is glibc 2.36's behaviour (posix/getopt.c), which
// Debian 12's ibv_devinfo gets, written from its documented rules and
// checked against the real tool in the rig:
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

// longOpt is one entry of the long option table.
type longOpt struct {
	name   string
	hasArg bool
	val    byte
}

// devinfoLongOpts is ibv_devinfo's table, in its order (the order of the
// "possibilities" listed for an ambiguous abbreviation).
var devinfoLongOpts = []longOpt{
	{"ib-dev", true, 'd'},
	{"ib-port", true, 'i'},
	{"list", false, 'l'},
	{"verbose", false, 'v'},
}

const devinfoOptstring = "d:i:lv"

// getopt walks a command line as getopt_long does. Next returns the
// option character and its argument, '?' after printing an error, or 0 at
// the end.
type getopt struct {
	args     []string // argv, args[0] the program name
	optstr   string
	long     []longOpt
	posix    bool // POSIXLY_CORRECT: stop at the first operand
	optind   int
	next     string // rest of a group of short options
	errorOut func(string)
}

func newGetopt(args []string, posix bool, errorOut func(string)) *getopt {
	return &getopt{args: args, optstr: devinfoOptstring, long: devinfoLongOpts, posix: posix, optind: 1, errorOut: errorOut}
}

func (g *getopt) argv0() string { return g.args[0] }

// Next returns the next option: its character and argument; '?' when the
// option was bad (the error is already printed); 0 when there are no more.
func (g *getopt) Next() (byte, string) {
	if g.next == "" {
		// Find the next option word, skipping operands.
		for {
			if g.optind >= len(g.args) {
				return 0, ""
			}
			a := g.args[g.optind]
			if a == "--" {
				g.optind++
				return 0, ""
			}
			if len(a) >= 2 && a[0] == '-' {
				break
			}
			if g.posix {
				return 0, ""
			}
			g.optind++ // an operand: ibv_devinfo ignores them
		}
		a := g.args[g.optind]
		if strings.HasPrefix(a, "--") {
			return g.longOption(a[2:])
		}
		g.next = a[1:]
	}
	c := g.next[0]
	g.next = g.next[1:]
	if g.next == "" {
		g.optind++
	}
	i := strings.IndexByte(g.optstr, c)
	if i < 0 || c == ':' || c == ';' {
		g.errorOut(g.argv0() + ": invalid option -- '" + string([]byte{c}) + "'\n")
		g.next = ""
		return '?', ""
	}
	if i+1 < len(g.optstr) && g.optstr[i+1] == ':' {
		switch {
		case g.next != "":
			arg := g.next
			g.next = ""
			g.optind++
			return c, arg
		case g.optind >= len(g.args):
			g.errorOut(g.argv0() + ": option requires an argument -- '" + string([]byte{c}) + "'\n")
			return '?', ""
		default:
			arg := g.args[g.optind]
			g.optind++
			return c, arg
		}
	}
	return c, ""
}

// longOption handles "--name[=value]" (text is what follows "--").
func (g *getopt) longOption(text string) (byte, string) {
	name, value, hasValue := strings.Cut(text, "=")
	var found *longOpt
	for i := range g.long {
		if g.long[i].name == name {
			found = &g.long[i]
			break
		}
	}
	if found == nil {
		var ambiguous []int
		first := -1
		for i := range g.long {
			if !strings.HasPrefix(g.long[i].name, name) {
				continue
			}
			if first < 0 {
				first = i
				continue
			}
			f := g.long[first]
			if f.hasArg != g.long[i].hasArg || f.val != g.long[i].val {
				if ambiguous == nil {
					ambiguous = append(ambiguous, first)
				}
				ambiguous = append(ambiguous, i)
			}
		}
		if ambiguous != nil {
			var b strings.Builder
			b.WriteString(g.argv0() + ": option '--" + text + "' is ambiguous; possibilities:")
			for _, i := range ambiguous {
				b.WriteString(" '--" + g.long[i].name + "'")
			}
			b.WriteString("\n")
			g.errorOut(b.String())
			g.optind++
			return '?', ""
		}
		if first >= 0 {
			found = &g.long[first]
		}
	}
	if found == nil {
		g.errorOut(g.argv0() + ": unrecognized option '--" + text + "'\n")
		g.optind++
		return '?', ""
	}
	g.optind++
	if hasValue {
		if !found.hasArg {
			g.errorOut(g.argv0() + ": option '--" + found.name + "' doesn't allow an argument\n")
			return '?', ""
		}
		return found.val, value
	}
	if found.hasArg {
		if g.optind >= len(g.args) {
			g.errorOut(g.argv0() + ": option '--" + found.name + "' requires an argument\n")
			return '?', ""
		}
		arg := g.args[g.optind]
		g.optind++
		return found.val, arg
	}
	return found.val, ""
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
			if name, _, hasValue := strings.Cut(a[2:], "="); !hasValue && takesArg(name) && i+1 < len(args) {
				rest = append(rest, a, args[i+1])
				i++
				continue
			}
		default:
			// A short group whose last option wants an argument takes the
			// next word.
			for j := 1; j < len(a); j++ {
				k := strings.IndexByte(devinfoOptstring, a[j])
				if k >= 0 && a[j] != ':' && k+1 < len(devinfoOptstring) && devinfoOptstring[k+1] == ':' {
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

// takesArg reports whether a long option word (possibly abbreviated) names
// an option with an argument: what getopt would do with the next word.
func takesArg(name string) bool {
	var match *longOpt
	for i := range devinfoLongOpts {
		o := &devinfoLongOpts[i]
		if o.name == name {
			return o.hasArg
		}
		if strings.HasPrefix(o.name, name) {
			if match != nil && (match.hasArg != o.hasArg || match.val != o.val) {
				return false // ambiguous: an error, the next word is not taken
			}
			if match == nil {
				match = o
			}
		}
	}
	return match != nil && match.hasArg
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
