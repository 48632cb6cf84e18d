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
# PAIR_STEP_WAIT s; every step ends within PAIR_STEP_TIMEOUT s (SIGKILL). Each side prints
#   PAIR-STEP: <n> <server>@<A|B>-><client>@<A|B> <server|client> PASS|FAIL <status> <seconds>
# and the script exits non-zero if any of its sides failed.
N=${PAIR_ITERS:-200} W=${PAIR_STEP_WAIT:-600} T=${PAIR_STEP_TIMEOUT:-600}
me=$([ "$PAIR_SELF" = 1 ] && echo A || echo B)
tool() { case $1 in goverbs) echo "pingpong rc" ;; rdma-core) echo ibv_rc_pingpong ;; esac; }
failed=0 i=0
while read -r stool sside ctool cside; do
  i=$((i + 1)) port=$((18600 + i)) name="$stool@$sside->$ctool@$cside"
  if [ "$sside" = "$me" ]; then role=server t=$stool; elif [ "$cside" = "$me" ]; then role=client t=$ctool; else continue; fi
  s=$(cut -d' ' -f1 /proc/uptime)
  if [ "$role" = server ]; then
    # shellcheck disable=SC2046 # tool() is a command and its words
    timeout -s KILL "$T" $(tool "$t") -d "$PAIR_DEV" -g 1 -c -n "$N" -p "$port" 2>&1 | sed "s/^/  step $i $role | /"
    rc=${PIPESTATUS[0]}
  else
    # Every attempt streams (a hung one shows how far it got); the refusals
    # are not printed, and the retries back off from 0.5 s to 4 s.
    end=$(( $(cut -d. -f1 /proc/uptime) + W )) nap=0.5 tries=0
    while :; do
      tries=$((tries + 1))
      # shellcheck disable=SC2046
      timeout -s KILL "$T" $(tool "$t") -d "$PAIR_DEV" -g 1 -c -n "$N" -p "$port" "$PAIR_PEER" 2>&1 |
        tee /tmp/pair-client.out | grep -v "Couldn't connect to" | sed "s/^/  step $i $role | /"
      rc=${PIPESTATUS[0]}
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
