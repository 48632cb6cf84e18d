package rigtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRoundsCountsHungRounds: a round that outlasts Bound is ended by its
// context, reported hung (and only that one), and the test fails; marks
// and the count from the environment are honoured.
func TestRoundsCountsHungRounds(t *testing.T) {
	t.Setenv("ROUNDS_TEST_COUNT", "4")
	var sawHung []bool
	var ports []int
	rec := run(t, func(tb testing.TB) {
		Rounds{Count: 99, Env: "ROUNDS_TEST_COUNT", Bound: 100 * time.Millisecond, Mark: "odd"}.Run(tb,
			func(i int) int { return 9000 + i },
			func(r Round) bool {
				ports = append(ports, r.Port)
				if r.I == 2 {
					<-r.Ctx.Done() // hangs until the watchdog ends it
				}
				sawHung = append(sawHung, r.Hung())
				return r.I%2 == 1
			})
	})
	if want := []int{9000, 9001, 9002, 9003}; fmt.Sprint(ports) != fmt.Sprint(want) {
		t.Errorf("rounds ran on ports %v; want %v", ports, want)
	}
	if want := []bool{false, false, true, false}; fmt.Sprint(sawHung) != fmt.Sprint(want) {
		t.Errorf("Round.Hung in the rounds: %v; want %v", sawHung, want)
	}
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "1 of 4 rounds hung") {
		t.Errorf("errors %q; want one saying 1 of 4 rounds hung", rec.errs)
	}
	if len(rec.logs) != 1 || !strings.Contains(rec.logs[0], "1 hung [2]") || !strings.Contains(rec.logs[0], "odd in 2 [1 3]") {
		t.Errorf("log %q; want 1 hung [2] and odd in 2 [1 3]", rec.logs)
	}
}

// TestRoundsCanceledIsNotHung: a round that cancels its own context is
// not hung, and a run without hangs reports no error.
func TestRoundsCanceledIsNotHung(t *testing.T) {
	rec := run(t, func(tb testing.TB) {
		Rounds{Count: 2, Env: "ROUNDS_TEST_UNSET", Bound: time.Minute, Mark: "m"}.Run(tb,
			func(i int) int { return i },
			func(r Round) bool {
				r.Cancel()
				<-r.Ctx.Done()
				if r.Hung() {
					t.Errorf("round %d: Hung after its own Cancel", r.I)
				}
				return false
			})
	})
	if len(rec.errs) != 0 {
		t.Errorf("errors %q; want none", rec.errs)
	}
}
