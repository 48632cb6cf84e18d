#!/bin/bash
# The two-machine pingpong interop (pair.sh --pingpong), run in both guests
# after pair-net.sh: goverbs' cmd/pingpong and rdma-core's ibv_rc_pingpong
# over rxe1, RC, -g 1 -c -n $PAIR_ITERS, every pairing in both roles and
# both directions between the guests, one step after the other:
#   step  server (guest)       client (guest)
#   1     goverbs (A)          rdma-core (B)
#   2     rdma-core (A)        goverbs (B)
#   3     goverbs (B)          rdma-core (A)
#   4     rdma-core (B)        goverbs (A)
#   5     goverbs (A)          goverbs (B)
#   6     goverbs (B)          goverbs (A)
# Each step has its own TCP port; the client retries while the server is not
# listening yet ("Couldn't connect", the words of both tools), for up to
# PAIR_STEP_WAIT s; every step ends within PAIR_STEP_TIMEOUT s (SIGKILL).
# A stall cannot sit silent: once a side's tool has printed the peer's address
# (the exchange is done, RDMA traffic must flow), a watcher samples rxe1's
# packet counters every second; PAIR_STALL s (default 30) without a packet
# sent or received on rxe1 end that side's tool, after a line saying what it
# last did (its last output line, the counters, its QP's state). Each side prints
#   PAIR-STEP: <n> <server>@<A|B>-><client>@<A|B> <server|client> PASS|FAIL <status> <seconds>
# and the script exits non-zero if any of its sides failed.
N=${PAIR_ITERS:-200} W=${PAIR_STEP_WAIT:-600} T=${PAIR_STEP_TIMEOUT:-600} S=${PAIR_STALL:-30}
me=$([ "$PAIR_SELF" = 1 ] && echo A || echo B)
tool() { case $1 in goverbs) echo "pingpong rc" ;; rdma-core) echo ibv_rc_pingpong ;; esac; }
hw=${PAIR_HW:-/sys/class/infiniband/$PAIR_DEV/ports/1/hw_counters}  # PAIR_HW: a fake, to test this script
counters() { echo "sent_pkts $(cat "$hw/sent_pkts" 2>/dev/null) rcvd_pkts $(cat "$hw/rcvd_pkts" 2>/dev/null)"; }
# run_tool OUT TOOL ARGS...: the tool under the step's timeout, its output
# streamed with the step's prefix and kept in OUT, watched for a stall.
run_tool() {
  local out=$1; shift
  : > "$out"; rm -f /tmp/pair-tool.pid
  watch_tool "$out" &
  local w=$!
  # shellcheck disable=SC2016 # $$ is the inner shell's: the tool's pid after exec
  timeout -s KILL "$T" bash -c 'echo $$ > /tmp/pair-tool.pid; exec "$@"' _ "$@" 2>&1 |
    tee "$out" | grep -v "Couldn't connect to" | sed "s/^/  step $i $role | /"
  local rc=${PIPESTATUS[0]}
  kill "$w" 2>/dev/null; wait "$w" 2>/dev/null
  return "$rc"
}
# watch_tool OUT: after the address exchange (a "remote address" line), S
# seconds in which rxe1 neither sent nor received a packet end the tool.
watch_tool() {
  local pid='' last='' still=0 c qp
  until [ -n "$pid" ]; do sleep 0.2; pid=$(cat /tmp/pair-tool.pid 2>/dev/null); done
  while sleep 1 && kill -0 "$pid" 2>/dev/null; do
    grep -q 'remote address' "$1" || continue
    c=$(counters)
    if [ "$c" != "$last" ]; then last=$c still=0; continue; fi
    still=$((still + 1))
    [ "$still" -ge "$S" ] || continue
    qp=$(rdma resource show qp link "$PAIR_DEV/1" 2>&1 | grep -v ' qpn 1 ' | tr -s ' \n' ' ')
    echo "  step $i $role | STALL: no packet sent or received on $PAIR_DEV for ${S}s after the address exchange;" \
      "$PAIR_DEV $c; QP: ${qp:-none}; last line: $(grep -v '^$' "$1" | tail -1)"
    kill -KILL "$pid" 2>/dev/null
    return
  done
}
failed=0 i=0
while read -r stool sside ctool cside; do
  i=$((i + 1)) port=$((18600 + i)) name="$stool@$sside->$ctool@$cside"
  if [ "$sside" = "$me" ]; then role=server t=$stool; elif [ "$cside" = "$me" ]; then role=client t=$ctool; else continue; fi
  s=$(cut -d' ' -f1 /proc/uptime)
  if [ "$role" = server ]; then
    # shellcheck disable=SC2046 # tool() is a command and its words
    run_tool /tmp/pair-server.out $(tool "$t") -d "$PAIR_DEV" -g 1 -c -n "$N" -p "$port"
    rc=$?
  else
    # Every attempt streams (a hung one shows how far it got); the refusals
    # are not printed, and the retries back off from 0.5 s to 4 s.
    end=$(( $(cut -d. -f1 /proc/uptime) + W )) nap=0.5 tries=0
    while :; do
      tries=$((tries + 1))
      # shellcheck disable=SC2046
      run_tool /tmp/pair-client.out $(tool "$t") -d "$PAIR_DEV" -g 1 -c -n "$N" -p "$port" "$PAIR_PEER"
      rc=$?
      if grep -q "Couldn't connect to" /tmp/pair-client.out && [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; then
        sleep $nap; case $nap in 0.5) nap=1 ;; 1) nap=2 ;; *) nap=4 ;; esac
        continue
      fi
      break
    done
    [ $tries = 1 ] || echo "  step $i $role | $tries attempts (the server was not listening yet)"
  fi
  e=$(cut -d' ' -f1 /proc/uptime)
  if [ "$rc" = 0 ]; then r=PASS; else r=FAIL failed=$((failed + 1)); fi
  echo "PAIR-STEP: $i $name $role $r $rc $(awk "BEGIN{printf \"%.1f\", $e - $s}")"
done <<STEPS
goverbs A rdma-core B
rdma-core A goverbs B
goverbs B rdma-core A
rdma-core B goverbs A
goverbs A goverbs B
goverbs B goverbs A
STEPS
[ $failed = 0 ]
