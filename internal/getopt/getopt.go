// Package getopt is glibc's getopt_long(3) for the commands that must
// parse a command line exactly as the rdma-core tool they replace does
// (cmd/ibvinfo, cmd/pingpong, cmd/perftest): the same options accepted,
// the same errors printed, word for word. It owns only that parse; it
// imports nothing of goverbs. New and Next are getopt_long itself; Parse
// runs it over a command's option table and returns the options in order
// and the operands, with Number for their numbers.
//
// What it follows is glibc 2.36's behaviour (posix/getopt.c, Debian 12),
// written from its documented rules and checked against the real tools in
// the rig:
//
//   - options and operands may be mixed (GNU permutation: the operands are
//     collected, in order, for Operands) unless POSIXLY_CORRECT is set,
//     which stops at the first operand; "--" ends the options; "-" is an
//     operand;
//   - short options group ("-vl") and take an argument attached ("-drxe0")
//     or from the next word ("-d rxe0"), even one that starts with '-';
//   - a long option may be abbreviated to any unique prefix ("--ib-d");
//     an exact match wins, and prefixes of entries that agree (same
//     argument rule and value) are not ambiguous; its argument is attached
//     with '=' or is the next word;
//   - errors are printed as "<argv0>: …\n" and Next returns '?'.
package getopt

import "strings"

// Long is one entry of a long option table: --Name, which takes an
// argument if HasArg, and is returned by Next as Val.
type Long struct {
	Name   string
	HasArg bool
	Val    byte
}

// Parser walks a command line as getopt_long does. Next returns the
// option character and its argument, '?' after printing an error, or 0 at
// the end.
type Parser struct {
	args     []string // argv, args[0] the program name
	optstr   string
	long     []Long
	posix    bool // POSIXLY_CORRECT: stop at the first operand
	optind   int
	next     string   // rest of a group of short options
	operands []string // operands skipped (permuted past) so far
	done     bool
	errorOut func(string)
}

// New returns a parser of args (args[0] is the program name, which errors
// start with) for the short options of optstring ("d:i:lv": a letter, with
// ':' after it if it takes an argument) and the long options long, in the
// table's order (the order an ambiguous abbreviation's possibilities are
// listed in). posix is whether POSIXLY_CORRECT is set; errorOut receives
// each error message, a whole line.
func New(args []string, optstring string, long []Long, posix bool, errorOut func(string)) *Parser {
	return &Parser{args: args, optstr: optstring, long: long, posix: posix, optind: 1, errorOut: errorOut}
}

func (g *Parser) argv0() string { return g.args[0] }

// Operands is the command line's operands, in order, once Next has
// returned 0: those options were mixed with and those after the options.
func (g *Parser) Operands() []string {
	if !g.done {
		return nil
	}
	return append(g.operands[:len(g.operands):len(g.operands)], g.args[min(g.optind, len(g.args)):]...)
}

// Next returns the next option: its character and argument; '?' when the
// option was bad (the error is already printed); 0 when there are no more.
func (g *Parser) Next() (byte, string) {
	if g.next == "" {
		// Find the next option word, skipping operands.
		for {
			if g.optind >= len(g.args) {
				g.done = true
				return 0, ""
			}
			a := g.args[g.optind]
			if a == "--" {
				g.optind++
				g.done = true
				return 0, ""
			}
			if len(a) >= 2 && a[0] == '-' {
				break
			}
			if g.posix {
				g.done = true
				return 0, ""
			}
			g.operands = append(g.operands, a) // permuted past
			g.optind++
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
func (g *Parser) longOption(text string) (byte, string) {
	name, value, hasValue := strings.Cut(text, "=")
	var found *Long
	for i := range g.long {
		if g.long[i].Name == name {
			found = &g.long[i]
			break
		}
	}
	if found == nil {
		var ambiguous []int
		first := -1
		for i := range g.long {
			if !strings.HasPrefix(g.long[i].Name, name) {
				continue
			}
			if first < 0 {
				first = i
				continue
			}
			f := g.long[first]
			if f.HasArg != g.long[i].HasArg || f.Val != g.long[i].Val {
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
				b.WriteString(" '--" + g.long[i].Name + "'")
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
		if !found.HasArg {
			g.errorOut(g.argv0() + ": option '--" + found.Name + "' doesn't allow an argument\n")
			return '?', ""
		}
		return found.Val, value
	}
	if found.HasArg {
		if g.optind >= len(g.args) {
			g.errorOut(g.argv0() + ": option '--" + found.Name + "' requires an argument\n")
			return '?', ""
		}
		arg := g.args[g.optind]
		g.optind++
		return found.Val, arg
	}
	return found.Val, ""
}

// TakesArg reports whether the long option word name (possibly
// abbreviated) names an option of long with an argument: whether getopt
// would take the next word as its argument.
func TakesArg(long []Long, name string) bool {
	var match *Long
	for i := range long {
		o := &long[i]
		if o.Name == name {
			return o.HasArg
		}
		if strings.HasPrefix(o.Name, name) {
			if match != nil && (match.HasArg != o.HasArg || match.Val != o.Val) {
				return false // ambiguous: an error, the next word is not taken
			}
			if match == nil {
				match = o
			}
		}
	}
	return match != nil && match.HasArg
}

// ShortTakesArg reports whether c is an option of optstring that takes an
// argument.
func ShortTakesArg(optstring string, c byte) bool {
	k := strings.IndexByte(optstring, c)
	return k >= 0 && c != ':' && k+1 < len(optstring) && optstring[k+1] == ':'
}
