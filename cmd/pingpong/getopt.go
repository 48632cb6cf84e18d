package main

import (
	"fmt"
	"strconv"
	"strings"

	gnu "github.com/goverbs/goverbs/internal/getopt"
)

// option is one command-line option as getopt_long(3) knows it.
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

// getopt parses args (without the program name) as glibc's getopt_long
// does with the short option string and long table opts make
// (internal/getopt): options and operands may be mixed (GNU permutation,
// unless POSIXLY_CORRECT is set), "--" ends the options, short options may
// be grouped ("-ec") and take their argument attached ("-s64") or as the
// next word, long options take it after "=" or as the next word and may be
// abbreviated to any unambiguous prefix. A bad option is an errUsage with
// glibc's message.
func getopt(args []string, opts []option, posix bool) (parsed, error) {
	var optstring strings.Builder
	long := make([]gnu.Long, len(opts))
	for i, o := range opts {
		optstring.WriteRune(o.short)
		if o.arg {
			optstring.WriteByte(':')
		}
		long[i] = gnu.Long{Name: o.long, HasArg: o.arg, Val: byte(o.short)}
	}
	const argv0 = "pingpong"
	var msg string
	g := gnu.New(append([]string{argv0}, args...), optstring.String(), long, posix, func(s string) { msg = s })
	var p parsed
	for {
		c, arg := g.Next()
		switch c {
		case 0:
			p.operands = g.Operands()
			return p, nil
		case '?':
			return p, errUsage{strings.TrimSuffix(strings.TrimPrefix(msg, argv0+": "), "\n")}
		}
		p.opts = append(p.opts, optVal{rune(c), arg})
	}
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
