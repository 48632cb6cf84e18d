package rigtest

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Rounds runs the rounds of a race test: connections made one after
// another until a race the kernel has (siw_accept's, UnreadOn says which)
// shows. Each round has a context that a watchdog cancels after Bound: a
// round whose watchdog fired counts as hung, and what the server's socket
// on the round's port holds unread is noted first, before the round's
// processes die. The test fails if any round hung; any other failure is
// the round's to report.
type Rounds struct {
	Count int           // rounds to run, unless Env says otherwise
	Env   string        // the environment variable that sets the count
	Bound time.Duration // a round not over after this has hung
	Mark  string        // what a round reporting true did, for the log
}

// Round is one round: its index, its port and its context.
type Round struct {
	I, Port int
	Ctx     context.Context
	// Cancel ends the round's context (its processes, if made with
	// exec.CommandContext) without counting it as hung.
	Cancel context.CancelFunc
	hung   *atomic.Bool
}

// Hung reports whether the round's watchdog fired: the round hung, and
// Rounds counts it so; its processes' failures are not the round's to
// report.
func (r Round) Hung() bool { return r.hung.Load() }

// Run runs the rounds: round i on port port(i). run reports whether to
// count the round under Mark. At the end it logs how many rounds hung and
// were marked, with GOVERBS_SIW_NUDGE's value (the nudges that cure the
// race are off when it is "0", so the hangs show).
func (r Rounds) Run(t testing.TB, port func(i int) int, run func(Round) bool) {
	t.Helper()
	n := r.Count
	if s := os.Getenv(r.Env); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a count of rounds", r.Env, s)
		}
	}
	var (
		unread       []string // written by the watchdogs, one at a time
		hung, marked []int
		start        = time.Now()
	)
	for i := range n {
		p := port(i)
		ctx, cancel := context.WithCancel(context.Background())
		fired, noted := new(atomic.Bool), make(chan struct{})
		watchdog := time.AfterFunc(r.Bound, func() {
			fired.Store(true)
			unread = append(unread, UnreadOn(p)...)
			close(noted)
			cancel()
		})
		mark := run(Round{I: i, Port: p, Ctx: ctx, Cancel: cancel, hung: fired})
		if !watchdog.Stop() { // it fired
			<-noted
			hung = append(hung, i)
		}
		cancel()
		if mark {
			marked = append(marked, i)
		}
	}
	t.Logf("%d rounds in %v (GOVERBS_SIW_NUDGE=%q): %d hung %v (server sockets with unread bytes: %q); %s in %d %v",
		n, time.Since(start).Round(time.Second), os.Getenv("GOVERBS_SIW_NUDGE"), len(hung), hung, unread, r.Mark, len(marked), marked)
	if len(hung) > 0 {
		t.Errorf("%d of %d rounds hung (not over after %v)", len(hung), n, r.Bound)
	}
}
