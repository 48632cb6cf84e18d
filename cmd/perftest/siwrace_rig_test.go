package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// TestSIWAcceptRaceRig: goverbs' ib_read_lat -R server against rdma-core's
// client on siw0, one run per round (PERFTEST_SIW_ROUNDS, default 10,
// each of 10 iterations). siw's accept (siw_accept in Linux's siw_cm.c)
// sends the MPA reply before the QP owns the socket's receive callback; a
// client's first exchange message that arrives in between stays unread in
// the server's socket (1 run in 20 hung so on Linux 7.3 before the server
// nudged). The server's early answer (cm.go, nudgeEvery) must end every
// such round: a round not over after 45 s counts as hung,
// with the unread bytes of the server's socket noted. With
// GOVERBS_SIW_NUDGE=0 in the test's environment the nudge is off (it
// reaches the goverbs server) and the hangs show.
func TestSIWAcceptRaceRig(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "siw0")
	rounds := rigtest.Rounds{Count: 10, Env: "PERFTEST_SIW_ROUNDS", Bound: 45 * time.Second, Mark: "the server answered early"}
	rounds.Run(t, func(int) int { return nextPort() }, func(r rigtest.Round) bool {
		args := []string{"-p", strconv.Itoa(r.Port), "-n", "10", "-F", "-R", "-x", "0", "-s", "64"}
		sc := command(t, r.Ctx, "read_lat", true, "siw0", args, "")
		if os.Getenv("GOVERBS_SIW_NUDGE") == "" {
			sc.Env = append(sc.Env, "GOVERBS_SIW_NUDGE=log")
		}
		srv := rigtest.Start(t, "goverbs server", sc)
		waitCMListen(t, srv, r.Port, time.Minute)
		cli := rigtest.Start(t, "rdma-core client", command(t, r.Ctx, "read_lat", false, "siw0", args, "10.0.3.15"))
		cerr, serr := cli.Wait(), srv.Wait()
		switch {
		case r.Hung(): // Rounds counts it
		case cerr != nil || serr != nil:
			t.Errorf("round %d: client: %v, server: %v\n%s%s", r.I, cerr, serr, srv.Output(), cli.Output())
		case !latLine.MatchString(cli.Stdout.String()):
			t.Errorf("round %d: the client printed no latency line\n%s", r.I, cli.Output())
		}
		return strings.Contains(srv.Output(), "answered early")
	})
}
