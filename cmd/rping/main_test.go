package main

import (
	"reflect"
	"testing"
)

// TestParseArgs: rping's options parse as glibc's getopt parses
// "a:I:Pp:C:S:t:scvVdq": grouped flags, attached or separate values,
// operands permuted past, "--" ending the options.
func TestParseArgs(t *testing.T) {
	type opt struct {
		op  rune
		val string
	}
	for _, c := range []struct {
		args []string
		want []opt
		bad  bool
	}{
		{[]string{"-s", "-a", "10.0.2.15", "-vV", "-S100", "-C", "5"},
			[]opt{{'s', ""}, {'a', "10.0.2.15"}, {'v', ""}, {'V', ""}, {'S', "100"}, {'C', "5"}}, false},
		{[]string{"-c", "-p7174", "--", "-x"}, []opt{{'c', ""}, {'p', "7174"}}, false},
		{[]string{"-c", "extra", "-d"}, []opt{{'c', ""}, {'d', ""}}, false},
		{[]string{"-x"}, nil, true},
		{[]string{"-a"}, nil, true},
	} {
		var got []opt
		err := parseArgs(c.args, func(op rune, val string) error {
			got = append(got, opt{op, val})
			return nil
		})
		if (err != nil) != c.bad || (!c.bad && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%v: %v, %v", c.args, got, err)
		}
	}
}

func TestRunRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{},                    // neither -s nor -c
		{"-c", "-S", "25"},    // below RPING_MIN_BUFSIZE (26)
		{"-c", "-S", "65536"}, // above RPING_BUFSIZE - 1
		{"-c", "-C", "-1"},    // negative count
		{"-s", "-y"},          // unknown option
	} {
		if rc := run(args); rc != 22 {
			t.Errorf("run(%q) = %d, want 22 (EINVAL)", args, rc)
		}
	}
}
