package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// durLatLine is a -D latency report: #bytes, #iterations, t_avg, tps.
var durLatLine = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$`)

// TestInteropDurationRig runs -D (duration mode) against perftest in both
// roles on rxe0: each side runs by its own clock (margin, sampling,
// margin), every wait gives up when the run ends, and the sides that
// report print perftest's duration lines with the completions counted in
// the sampling window.
func TestInteropDurationRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "rxe0")
	cases := []struct {
		test  string
		flags []string
	}{
		{"send_lat", []string{"-D", "2"}},
		{"write_lat", []string{"-D", "2"}},
		{"read_lat", []string{"-D", "2"}},
		{"send_bw", []string{"-D", "3", "-f", "1", "-s", "1024"}},
		{"write_bw", []string{"-D", "3", "-f", "1", "-s", "1024"}},
	}
	for _, tc := range cases {
		for _, p := range pairs[:2] {
			t.Run(tc.test+"/"+p.name, func(t *testing.T) {
				durationCase(t, tc.test, p, tc.flags)
			})
		}
	}
}

func durationCase(t *testing.T, test string, p pair, flags []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := nextPort()
	args := append([]string{"-p", strconv.Itoa(port), "-F"}, flags...)
	srv := rigtest.Start(t, fmt.Sprintf("server (goverbs=%v)", p.srvOurs), command(t, ctx, test, p.srvOurs, "rxe0", slices.Clip(args), ""))
	rigtest.WaitTCPListen(t, srv, port, time.Minute)
	start := time.Now()
	cli := rigtest.Start(t, fmt.Sprintf("client (goverbs=%v)", p.cliOurs), command(t, ctx, test, p.cliOurs, "rxe0", slices.Clip(args), "127.0.0.1"))
	cerr, serr := cli.Wait(), srv.Wait()
	took := time.Since(start)
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v, server: %v\n%s%s", cerr, serr, srv.Output(), cli.Output())
	}
	d, _ := strconv.Atoi(flags[slices.Index(flags, "-D")+1])
	if took < time.Duration(d)*time.Second {
		t.Errorf("the run took %v; -D %d wants at least %d s", took, d, d)
	}
	// check finds a side's figures; a goverbs side's must be positive
	// (perftest's may be inf under TCG, where its TSC calibration fails).
	check := func(pr *rigtest.Proc, ours bool) string {
		out := pr.Stdout.String()
		if strings.HasSuffix(test, "_bw") {
			m := bwLine.FindStringSubmatch(out)
			if m == nil {
				t.Errorf("%s printed no bandwidth line\n%s", pr.Name, pr.Output())
				return ""
			}
			n, _ := strconv.Atoi(m[2])
			avg, _ := strconv.ParseFloat(m[4], 64)
			if n <= 0 || m[3] != "0.00" || ours && !(avg > 0) {
				t.Errorf("%s: %q: want iterations counted, no peak (0.00) and, from goverbs, a positive average", pr.Name, m[0])
			}
			return m[0]
		}
		if !strings.Contains(out, resultFmtLatDur) {
			t.Errorf("%s printed no duration header %q\n%s", pr.Name, resultFmtLatDur, pr.Output())
		}
		m := durLatLine.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("%s printed no duration latency line\n%s", pr.Name, pr.Output())
			return ""
		}
		n, _ := strconv.Atoi(m[2])
		avg, _ := strconv.ParseFloat(m[3], 64)
		tps, _ := strconv.ParseFloat(m[4], 64)
		if n <= 0 || ours && !(avg > 0 && tps > 0) {
			t.Errorf("%s: %q: want iterations counted and, from goverbs, a positive t_avg and tps", pr.Name, m[0])
		}
		return m[0]
	}
	var got []string
	if test != "read_lat" { // ib_read_lat's server prints no figures
		// ib_write_bw's server prints the client's report.
		measured := p.srvOurs
		if test == "write_bw" {
			measured = p.cliOurs
		}
		got = append(got, "server: "+check(srv, measured))
	}
	got = append(got, "client: "+check(cli, p.cliOurs))
	t.Logf("%v: %s", took.Round(time.Millisecond), strings.Join(got, "; "))
}
