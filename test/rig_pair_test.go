package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fakePingpong stands in for goverbs' pingpong and ibv_rc_pingpong in the
// pair watcher test: it prints the two address lines, then, with FAKE_OK=1,
// moves rxe1's sent_pkts counter three times and succeeds; otherwise it
// sits silent (the stall the watcher must end).
const fakePingpong = `#!/bin/bash
echo "  local address:  LID 0x0000, QPN 0x000011, PSN 0x000001, GID ::ffff:10.77.0.1"
echo "  remote address: LID 0x0000, QPN 0x000012, PSN 0x000002, GID ::ffff:10.77.0.2"
if [ "$FAKE_OK" = 1 ]; then
  for i in 1 2 3 4 5; do sleep 0.3; echo $((RANDOM + i * 100000)) > "$PAIR_HW/sent_pkts"; done
  echo "409600 bytes in 0.01 seconds = 1.00 Mbit/sec"
  exit 0
fi
exec sleep 300
`

// TestRigPairStall (its cases one after the other: the script keeps its
// files in /tmp, as in the guest) runs guest/pair-pingpong.sh (guest A's side of every
// step) with fake tools and counters: a step whose tools go silent after the
// address exchange ends within seconds with a STALL line saying what it last
// did, and steps whose counters move are left alone.
func TestRigPairStall(t *testing.T) {
	bash, script := hostScript(t, filepath.Join("guest", "pair-pingpong.sh"))
	for _, ok := range []bool{false, true} {
		name := map[bool]string{false: "stall", true: "healthy"}[ok]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin, hw := filepath.Join(dir, "bin"), filepath.Join(dir, "hw")
			for _, d := range []string{bin, hw} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			files := map[string]string{
				filepath.Join(bin, "pingpong"):        fakePingpong,
				filepath.Join(bin, "ibv_rc_pingpong"): fakePingpong,
				filepath.Join(bin, "rdma"):            "#!/bin/sh\necho 'link rxe1/1 lqpn 17 type RC state RTS'\n",
				filepath.Join(hw, "sent_pkts"):        "5\n",
				filepath.Join(hw, "rcvd_pkts"):        "7\n",
			}
			for f, body := range files {
				if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bash, script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "PAIR_SELF=1", "PAIR_DEV=rxe1",
				"PAIR_HW="+hw, "PAIR_PEER=10.77.0.2", "PAIR_STALL=1", "PAIR_STEP_TIMEOUT=60", "PAIR_ITERS=5")
			if ok {
				cmd.Env = append(cmd.Env, "FAKE_OK=1")
			}
			out, err := cmd.CombinedOutput()
			steps := regexp.MustCompile(`(?m)^PAIR-STEP: (\d) \S+ (server|client) (PASS|FAIL) (\d+) ([0-9.]+)$`).FindAllStringSubmatch(string(out), -1)
			if len(steps) != 6 {
				t.Fatalf("%d PAIR-STEP lines, want 6 (guest A is in every step); status %v\n%s", len(steps), err, out)
			}
			stalls := strings.Count(string(out), "STALL: no packet sent or received on rxe1 for 1s after the address exchange; rxe1 sent_pkts 5 rcvd_pkts 7; QP: link rxe1/1 lqpn 17 type RC state RTS ; last line:   remote address: LID 0x0000")
			for _, s := range steps {
				if want := map[bool]string{false: "FAIL", true: "PASS"}[ok]; s[3] != want {
					t.Errorf("step %s: %s (status %s), want %s\n%s", s[1], s[3], s[4], want, out)
				}
				if secs, _ := strconv.ParseFloat(s[5], 64); !ok && secs >= 10 {
					t.Errorf("step %s took %s s to end its stall (PAIR_STALL=1)", s[1], s[5])
				}
			}
			if want := map[bool]int{false: 6, true: 0}[ok]; stalls != want {
				t.Errorf("%d STALL lines with the counters, QP state and last line, want %d\n%s", stalls, want, out)
			}
			if (err == nil) != ok {
				t.Errorf("script status %v, want success only for healthy steps", err)
			}
		})
	}
}
