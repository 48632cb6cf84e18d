package main

import (
	"fmt"
	"strconv"
	"strings"
)

// option is one command-line option as getopt_long(3) knows it (a copy of
// cmd/pingpong's parser until the project has one shared getopt).
type option struct {
	short rune
	long  string
	arg   bool // takes an argument
}

// errUsage asks the caller to print the usage text (and exit 1), as
// rdma-core's examples do for any option they do not understand.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

// parsed is what getopt found: the options in order and the operands.
type parsed struct {
	opts     []optVal
	operands []string
}

type optVal struct {
	short rune
	val   string
}

// getopt parses args as glibc's getopt_long does with a short option
// string: options and operands may be mixed (GNU permutation), "--" ends
// the options, short options may be grouped ("-ec") and take their
// argument attached ("-s64") or as the next word, long options take it
// after "=" or as the next word and may be abbreviated to any unambiguous
// prefix.
func getopt(args []string, opts []option) (parsed, error) {
	var p parsed
	byShort := map[rune]option{}
	for _, o := range opts {
		byShort[o.short] = o
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			p.operands = append(p.operands, args[i+1:]...)
			return p, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			o, err := findLong(opts, name)
			if err != nil {
				return p, err
			}
			switch {
			case o.arg && !hasVal:
				if i+1 >= len(args) {
					return p, errUsage{fmt.Sprintf("option '--%s' requires an argument", o.long)}
				}
				i++
				val = args[i]
			case !o.arg && hasVal:
				return p, errUsage{fmt.Sprintf("option '--%s' doesn't allow an argument", o.long)}
			}
			p.opts = append(p.opts, optVal{o.short, val})
		case len(a) > 1 && a[0] == '-':
			rs := []rune(a[1:])
			for j := 0; j < len(rs); j++ {
				o, ok := byShort[rs[j]]
				if !ok {
					return p, errUsage{fmt.Sprintf("invalid option -- '%c'", rs[j])}
				}
				if !o.arg {
					p.opts = append(p.opts, optVal{o.short, ""})
					continue
				}
				val := string(rs[j+1:])
				if val == "" {
					if i+1 >= len(args) {
						return p, errUsage{fmt.Sprintf("option requires an argument -- '%c'", o.short)}
					}
					i++
					val = args[i]
				}
				p.opts = append(p.opts, optVal{o.short, val})
				break
			}
		default:
			p.operands = append(p.operands, a)
		}
	}
	return p, nil
}

// findLong finds a long option by its name or an unambiguous prefix.
func findLong(opts []option, name string) (option, error) {
	var found []option
	for _, o := range opts {
		if o.long == name {
			return o, nil
		}
		if name != "" && strings.HasPrefix(o.long, name) {
			found = append(found, o)
		}
	}
	switch len(found) {
	case 0:
		return option{}, errUsage{fmt.Sprintf("unrecognized option '--%s'", name)}
	case 1:
		return found[0], nil
	}
	return option{}, errUsage{fmt.Sprintf("option '--%s' is ambiguous", name)}
}

// number parses an option's number as strtol(s, NULL, 0) accepts it:
// decimal, 0x hexadecimal or 0 octal, with an optional sign.
func number(s string) (int64, error) {
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
	v, err := strconv.ParseInt(t, base, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if neg {
		v = -v
	}
	return v, nil
}
