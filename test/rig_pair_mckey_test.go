package test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeMckey stands in for rdma-core's mckey in TestRigPairMckey. A sender
// (-s) adds the next of FAKE_SENT's counts (one per run) to rxe1's
// sent_pkts, as if that many of its datagrams reached the wire; a receiver
// joins and attaches (a line in the fake /proc/net/igmp, rxe's 33:33 MAC
// in the fake /proc/net/dev_mcast) and completes once the fake
// goverbs sender has created $FAKE_DIR/delivered-GROUP, else waits to be
// killed, as mckey does.
const fakeMckey = `#!/bin/bash
s=
while getopts m:b:sC:S: o; do case $o in m) g=$OPTARG ;; s) s=1 ;; *) ;; esac; done
echo "mckey: starting $([ -n "$s" ] && echo client || echo server)"
if [ -n "$s" ]; then
  runs=$(cat "$FAKE_DIR/runs" 2>/dev/null || echo 0); echo $((runs + 1)) > "$FAKE_DIR/runs"
  read -ra sent <<<"$FAKE_SENT"
  echo $(( $(cat "$PAIR_HW/sent_pkts") + ${sent[$runs]} )) > "$PAIR_HW/sent_pkts"
  echo "data transfers complete"
  exit 0
fi
IFS=. read -r a b c d <<<"$g"
printf '\t\t\t\t%02X%02X%02X%02X     1 0:00000000\t\t0\n' "$d" "$c" "$b" "$a" >> "$PAIR_IGMP"
printf '3    eth1            1     0     %s\n' "$(printf '01005e%02x%02x%02x' $((b & 127)) "$c" "$d")" "$(printf '3333%02x%02x%02x%02x' "$a" "$b" "$c" "$d")" >> "$PAIR_DEV_MCAST"
for _ in $(seq 50); do
  [ -e "$FAKE_DIR/delivered-$g" ] && { echo "receiving data transfers"; echo "data transfers complete"; exit 0; }
  sleep 0.1
done
exec sleep 300
`

// TestRigPairMckey runs guest/pair-mckey.sh, rdma-core's side of pair-cm.sh's
// mckey steps, with a fake mckey and counters against a fake goverbs side
// speaking the side channel's protocol (rdmacm/pair_rig_test.go): it must
// pass only when the datagrams its side counted arrived, retry the next group
// when a try failed, and say what went wrong otherwise.
func TestRigPairMckey(t *testing.T) {
	bash, script := hostScript(t, filepath.Join("guest", "pair-mckey.sh"))
	type peer func(t *testing.T, r *bufio.Reader, w net.Conn, dir string)
	say := func(t *testing.T, w net.Conn, line string) {
		if _, err := fmt.Fprintln(w, line); err != nil {
			t.Errorf("sending %q: %v", line, err)
		}
	}
	hear := func(t *testing.T, r *bufio.Reader, want string) []string {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, want) {
			t.Fatalf("heard %q (%v), want %q...", line, err, want)
		}
		return strings.Fields(line)
	}
	// goverbs sending: deliver (or not) each try's datagrams, answer what
	// went out, and expect the receiver's count.
	sender := func(deliver ...bool) peer {
		return func(t *testing.T, r *bufio.Reader, w net.Conn, dir string) {
			for i, ok := range deliver {
				f := hear(t, r, "ready ")
				if want := fmt.Sprintf("239.77.11.%d", i+1); len(f) != 4 || f[1] != want || f[2] != "10" || f[3] != "100" {
					t.Fatalf("try %d: %q, want ready %s 10 100", i+1, f, want)
				}
				if ok {
					if err := os.WriteFile(filepath.Join(dir, "delivered-"+f[1]), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				say(t, w, "sent 10")
			}
			want := map[bool]string{true: "done 10", false: "done 0"}[deliver[len(deliver)-1]]
			hear(t, r, want)
		}
	}
	// goverbs receiving: one "ready" a try; it answers the count it received.
	receiver := func(got ...string) peer {
		return func(t *testing.T, r *bufio.Reader, w net.Conn, dir string) {
			for i, g := range got {
				say(t, w, fmt.Sprintf("ready 239.77.12.%d 50 100", i+1))
				f := hear(t, r, "sent ")
				if g == "retry" {
					if f[1] != "0" {
						t.Fatalf("try %d: %q, want sent 0", i+1, f)
					}
					continue
				}
				say(t, w, "done "+g)
			}
		}
	}
	for _, c := range []struct {
		name, role  string
		sent        string // FAKE_SENT
		peer        peer
		ok          bool
		last        string
		readyGroups int
	}{
		{"receive", "receive", "", sender(true), true, "pair-mckey: PASS: mckey received the 10 datagrams goverbs sent", 1},
		{"receive-second-try", "receive", "", sender(false, true), true, "pair-mckey: PASS: mckey received the 10", 2},
		{"receive-never", "receive", "", sender(false, false, false), false, "pair-mckey: FAIL: mckey never received all 10 datagrams goverbs sent in 3 tries", 3},
		{"send", "send", "50", receiver("50"), true, "pair-mckey: PASS: goverbs received all 50 datagrams mckey's rxe1 transmitted", 0},
		{"send-after-nothing", "send", "0 30", receiver("retry", "30"), true, "pair-mckey: PASS: goverbs received all 30", 0},
		{"send-short", "send", "30", receiver("29"), false, "pair-mckey: FAIL: goverbs received 29 of the 30 datagrams rxe1 transmitted", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, hw := filepath.Join(dir, "bin"), filepath.Join(dir, "hw")
			for _, d := range []string{bin, hw} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			igmp := filepath.Join(dir, "igmp")
			files := map[string]string{
				filepath.Join(bin, "mckey"):     fakeMckey,
				filepath.Join(hw, "sent_pkts"):  "1000\n",
				filepath.Join(hw, "rcvd_pkts"):  "7\n",
				igmp:                            "Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter\n3\teth1      :     1      V3\n",
				filepath.Join(dir, "dev_mcast"): "3    eth1            1     0     01005e000001\n",
			}
			for f, body := range files {
				if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			group := map[string]string{"receive": "239.77.11.1", "send": "239.77.12.1"}[c.role]
			cmd := exec.Command(bash, script, c.role, strconv.Itoa(port), group)
			// PAIR_MCKEY_RECV_WAIT 3: the script's deadline counts whole
			// seconds of uptime, so 1 left the fake mckey between 0 and 1 s
			// to see its delivered file, and a loaded make unit (-race,
			// two cores) once saw a delivered try fail (session 52).
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "PAIR_DEV=rxe1", "PAIR_NET=eth1",
				"PAIR_IP=127.0.0.1", "PAIR_PEER=127.0.0.1", "PAIR_HW="+hw, "PAIR_IGMP="+igmp,
				"PAIR_DEV_MCAST="+filepath.Join(dir, "dev_mcast"), "PAIR_MCKEY_RECV_WAIT=3", "PAIR_MCKEY_WAIT=20",
				"FAKE_DIR="+dir, "FAKE_SENT="+c.sent)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			l.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
			conn, err := l.Accept()
			if err != nil {
				cmd.Process.Kill()
				t.Fatalf("the script never connected: %v\n%s", err, <-done)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(60 * time.Second))
			c.peer(t, bufio.NewReader(conn), conn, dir)
			var werr error
			select {
			case werr = <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("the script did not end\n%s", out.String())
			}
			t.Logf("pair-mckey.sh %s:\n%s", c.role, out.String())
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, c.last) {
				t.Errorf("last line %q, want %q...\n%s", last, c.last, out.String())
			}
			if (werr == nil) != c.ok {
				t.Errorf("exit %v, want success %v\n%s", werr, c.ok, out.String())
			}
			if n := strings.Count(out.String(), "eth1 filter: 01005e4d0b0"); n != c.readyGroups || strings.Contains(out.String(), " no") {
				t.Errorf("%d joins seen, want %d\n%s", n, c.readyGroups, out.String())
			}
		})
	}
}
