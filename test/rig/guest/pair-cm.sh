#!/bin/bash
# The two-machine rdma_cm interop (pair.sh --cm), run in both guests after
# pair-net.sh: goverbs' cmd/rping (on goverbs' rdmacm) and rdma-core's rping
# (on librdmacm) connect through the CM over rxe1, each guest's own kernel
# CM answering the other's MADs, every pairing in both roles and both
# directions, one step after the other; rping -v -V -C $PAIR_CM_COUNT, a
# different -S per step:
#   step  server (guest)       client (guest)      -S
#   c1    goverbs (A)          rdma-core (B)       64
#   c2    rdma-core (A)        goverbs (B)         4000
#   c3    goverbs (B)          rdma-core (A)       65535
#   c4    rdma-core (B)        goverbs (A)         26
#   c5    goverbs (A)          goverbs (B)         1024
#   c6    goverbs (B)          goverbs (A)         65535
# then rdma-core's ucmatose (RC, 4 connections, 10 messages of 100 bytes each
# way), udaddy (UD through SIDR, 10 messages each way), mckey (UD multicast;
# mckey's own words: the receiver is its "server", the sender its "client")
# and rdma_server/rdma_client (RC, one 16-byte message each way) against
# goverbs' rdmacm (the rdmacm test binary's TestRigPairPeer, the same
# protocols; in c8 goverbs' server says it listens by accepting TCP on the
# step's port, and ucmatose starts only then):
#   c7    ucmatose (A)         goverbs (B)
#   c8    goverbs (A)          ucmatose (B)
#   c9    udaddy (A)           goverbs (B)
#   c10   goverbs (A)          udaddy (B)
#   c11   mckey (A) receives   goverbs (B) sends       group 239.77.11.1
#   c12   goverbs (B) receives mckey -s (A) sends      group 239.77.12.1
#   c13   rdma_server (A)      goverbs (B)
#   c14   goverbs (A)          rdma_client (B)
# then perftest -R (the test's connection through the CM): rdma-core's ib_*
# tools against goverbs' cmd/perftest, -F -s 64 -n 200 for send_lat,
# -F -s 65536 -n 500 for write_bw:
#   c15   ib_send_lat (A)      goverbs send_lat (B)
#   c16   goverbs send_lat (A) ib_send_lat (B)
#   c17   ib_write_bw (B)      goverbs write_bw (A)
#   c18   goverbs write_bw (B) ib_write_bw (A)
# then rstream (librdmacm's rsocket against goverbs' rsocket, -T v: both
# sides check every byte):
#   c19   rdma-core (A)        goverbs (B)         -S 1 -C 100
#   c20   goverbs (A)          rdma-core (B)       -S 4096 -C 100
#   c21   rdma-core (B)        goverbs (A)         -S 1048576 -C 10
#   c22   goverbs (B)          rdma-core (A)       -S 16777216 -C 2
#   c23   goverbs (A)          goverbs (B)         -S 65536 -C 50
# The rping, mckey and rdma_server/rdma_client steps each have their own port
# (7700 + the step's number; the ucmatose steps use 7471, the udaddy ones
# 7174, the tools' defaults). A client whose connect is rejected (no
# listener on that port yet: the peer's CM answers REJ, "REJECTED" in both
# tools' words, "Connection refused" in rdma_client's) and that printed no
# ping retries for up to PAIR_STEP_WAIT s;
# every tool ends within PAIR_STEP_TIMEOUT s (SIGKILL). The data is checked
# three ways: -V (each side compares what came back), every one of the
# -C pings printed by -v (client: "ping data: rdma-ping-N", server:
# "server ping data: rdma-ping-N"), and both exit statuses. Once the first
# ping is printed, PAIR_STALL s (default 30) without a packet sent or
# received on rxe1 end that side's tool after a STALL: line. ucmatose,
# udaddy, rdma_server and rdma_client pass with exit 0 and their own
# success line ("return status 0", "data transfers complete", "end 0"),
# goverbs' side with TestRigPairPeer's PASS; a perftest step's sides (either
# perftest) pass with exit 0 and their result line; an rstream
# step's sides pass with exit 0 and rstream's result line ("custom ...").
# Their clients
# retry a REJECTED/UNREACHABLE/refused connect like rping's (perftest's own
# words: "Unable to connect (retries = N)" or "Unexpected CM event bl blka 8";
# an rstream client, either one, retries any failure before its result line:
# rdma-core's non-blocking connect reports a refusal in three wordings, and an
# rstream server serves one connection, so a retry cannot hide a connection
# that broke), and each such tool
# ends within min(PAIR_STEP_TIMEOUT, 180) s. A mckey step has no connection:
# rdma-core's side is guest/pair-mckey.sh, which runs mckey and talks to
# goverbs' side over a TCP side channel on the step's port (the receiver
# says when it is a member of the group, the sender how many datagrams its
# rxe put on the wire, the receiver how many arrived), and passes when
# every datagram the sender's rxe transmitted was received (both sides
# check the counts). c12's mckey -s runs on A: it exits right after posting
# its sends unsignaled, and rxe from 6.4 on drops what is still queued (6.12
# put 1 of its 50 on the wire in the first run), while A, the pair's first
# kernel (6.1 or 5.10 in the usual pairs), sends them all. Each side prints
#   PAIR-STEP: <id> <server>@<A|B>-><client>@<A|B> <server|client> PASS|FAIL <status> <seconds>
# and the script exits non-zero if any of its sides failed. PAIR_CM_STEPS
# (e.g. "c11 c12"), when set, runs only those steps.
C=${PAIR_CM_COUNT:-100} W=${PAIR_STEP_WAIT:-600} T=${PAIR_STEP_TIMEOUT:-600} S=${PAIR_STALL:-30}
me=$([ "$PAIR_SELF" = 1 ] && echo A || echo B)
# rdma-core's rping is /usr/bin's: goverbs' own, also called rping, is first in PATH.
tool() { case $1 in goverbs) echo /rig/bin/rping ;; rdma-core) echo /usr/bin/rping ;; esac; }
# ucm KIND ADDR TOOL ROLE PORT GROUP: rdma-core's side of a ucmatose, udaddy,
# mckey or rdma_server/rdma_client step.
ucm() {
  case $3 in
    ucmatose) if [ "$4" = server ]; then echo "ucmatose -b $2 -p 7471 -c 4 -C 10 -S 100"; else echo "ucmatose -s $2 -p 7471 -c 4 -C 10 -S 100"; fi ;;
    udaddy) if [ "$4" = server ]; then echo "udaddy -b $2 -C 10 -S 100"; else echo "udaddy -s $2 -C 10 -S 100"; fi ;;
    mckey) if [ "$4" = server ]; then echo "bash /rig/pair-mckey.sh receive $5 $6"; else echo "bash /rig/pair-mckey.sh send $5 $6"; fi ;;
    rdma_server|rdma_client) echo "$3 -s $2 -p $5" ;;
  esac
}
hw=${PAIR_HW:-/sys/class/infiniband/$PAIR_DEV/ports/1/hw_counters}
counters() { echo "sent_pkts $(cat "$hw/sent_pkts" 2>/dev/null) rcvd_pkts $(cat "$hw/rcvd_pkts" 2>/dev/null)"; }
# run_tool TOOL ARGS...: the tool under the step's timeout, stdout in
# /tmp/cm.out and stderr in /tmp/cm.err (kept apart: rdma-core's stdout is
# block-buffered into a file, its stderr lines would split a ping line),
# watched for a stall; both printed with the step's prefix afterwards.
run_tool() {
  : > /tmp/cm.out; : > /tmp/cm.err; rm -f /tmp/cm-tool.pid
  watch_tool &
  local w=$!
  # shellcheck disable=SC2016 # $$ is the inner shell's: the tool's pid after exec
  timeout -s KILL "$T" bash -c 'echo $$ > /tmp/cm-tool.pid; exec "$@"' _ "$@" > /tmp/cm.out 2> /tmp/cm.err
  local rc=$?
  kill "$w" 2>/dev/null; wait "$w" 2>/dev/null
  return "$rc"
}
watch_tool() {
  local pid='' last='' still=0 c
  until [ -n "$pid" ]; do sleep 0.2; pid=$(cat /tmp/cm-tool.pid 2>/dev/null); done
  while sleep 1 && kill -0 "$pid" 2>/dev/null; do
    grep -q 'ping data: rdma-ping-' /tmp/cm.out || continue
    c=$(counters)
    if [ "$c" != "$last" ]; then last=$c still=0; continue; fi
    still=$((still + 1))
    [ "$still" -ge "$S" ] || continue
    echo "  step $id $role | STALL: no packet sent or received on $PAIR_DEV for ${S}s after the first ping;" \
      "$PAIR_DEV $c; last ping: $(grep 'rdma-ping-' /tmp/cm.out | tail -1 | cut -c1-60)" >> /tmp/cm.err
    kill -KILL "$pid" 2>/dev/null
    return
  done
}
# show: the step's output, long ping lines cut, the middle pings elided.
show() {
  { sed 's/^/out: /' /tmp/cm.out; sed 's/^/err: /' /tmp/cm.err; } | cut -c1-100 |
    awk -v p="  step $id $role | " 'NR<=3 || /err: / || !/rdma-ping-/ {print p $0; next} {last=p $0; n++} END {if (n) print p "... " n " more ping lines, the last: " substr(last, length(p) + 1)}'
}
failed=0
while read -r id kind stool sside ctool cside size; do
  port=$((7700 + ${id#c})) name="$stool@$sside->$ctool@$cside"
  case " ${PAIR_CM_STEPS:-$id} " in *" $id "*) ;; *) continue ;; esac
  if [ "$sside" = "$me" ]; then role=server t=$stool; elif [ "$cside" = "$me" ]; then role=client t=$ctool; else continue; fi
  s=$(cut -d' ' -f1 /proc/uptime)
  if [ "$kind" != rping ]; then
    # a mckey side binds to its own address (the sender's side channel
    # connects to the receiver's, pair-mckey.sh knows PAIR_PEER)
    addr=$PAIR_IP; [ "$role" = client ] && [ "$kind" != mckey ] && addr=$PAIR_PEER
    group=239.77.${id#c}.1 peer=$kind-$role
    [ "$kind" = mckey ] && peer=mckey-$([ "$role" = server ] && echo receiver || echo sender)
    # shellcheck disable=SC2207 # ucm prints a command's words
    cmd=($(ucm "$kind" "$addr" "$t" "$role" "$port" "$group"))
    if [ "$kind" = perftest ]; then
      # $size is the test's name; rdma-core's tool is ib_<test>
      # -F: perftest's TSC calibration fails under TCG without it
      cmd=(-R -F -d "$PAIR_DEV" -p "$port")
      case $size in *_lat) cmd+=(-s 64 -n 200) ;; *) cmd+=(-s 65536 -n 500) ;; esac
      [ "$role" = client ] && cmd+=("$PAIR_PEER")
      if [ "$t" = goverbs ]; then cmd=(/rig/bin/perftest "$size" "${cmd[@]}"); else cmd=("ib_$size" "${cmd[@]}"); fi
    fi
    if [ "$kind" = rstream ]; then
      # $size is -S; the count keeps a step to seconds
      case $size in 1|4096) n=100 ;; 65536) n=50 ;; 1048576) n=10 ;; *) n=2 ;; esac
      cmd=(-p "$port" -S "$size" -C "$n" -T v)
      if [ "$role" = server ]; then cmd=(-b "$PAIR_IP" "${cmd[@]}"); else cmd=(-s "$PAIR_PEER" "${cmd[@]}"); fi
      if [ "$t" = goverbs ]; then cmd=(/rig/bin/rstream "${cmd[@]}"); else cmd=(/usr/bin/rstream "${cmd[@]}"); fi
    fi
    [ "$t" = goverbs ] && [ "$kind" != perftest ] && [ "$kind" != rstream ] && cmd=(env "RDMACM_PAIR_PEER=$peer" "RDMACM_PAIR_ADDR=$addr" "RDMACM_PAIR_PORT=$port" "RDMACM_PAIR_GROUP=$group"
      /rig/bin/rdmacm.test -test.v -test.timeout 170s -test.run '^TestRigPairPeer$')
    echo "  step $id $role | ${cmd[*]}"
    end=$(( $(cut -d. -f1 /proc/uptime) + W )) tries=0
    if [ "$kind@$t" = ucmatose@ucmatose ] && [ "$role" = client ]; then
      # ucmatose -c 4 exits on its first REJECTED and destroys its other
      # three connections, which goverbs' listener may have taken already
      # (their accept then fails): start it only once goverbs' server
      # says, by accepting TCP on the step's port, that it listens
      until { exec 3<>"/dev/tcp/$PAIR_PEER/$port"; } 2>/dev/null || [ "$(cut -d. -f1 /proc/uptime)" -ge $end ]; do sleep 0.2; done
      exec 3<&- 3>&-
    fi
    while :; do
      tries=$((tries + 1))
      T=$(( T < 180 ? T : 180 )) run_tool "${cmd[@]}"
      rc=$?
      if [ "$role" != client ] || [ "$rc" = 0 ] || [ "$(cut -d. -f1 /proc/uptime)" -ge $end ]; then break; fi
      if [ "$kind" = rstream ]; then
        # rdma-core's non-blocking rstream words a refused connect three
        # ways ("rpoll: Connection refused", "rpoll: Transport endpoint is
        # not connected", "rpoll: Success": POLLERR with errno 0), so any
        # failure before the result line is retried; the server serves one
        # connection, so a retry cannot pass a step whose connection broke
        grep -q '^custom ' /tmp/cm.out && break
      elif [ "$t" = goverbs ] ||
         ! grep -Eq 'REJECTED|UNREACHABLE|rdma_connect: Connection refused|Unable to connect \(retries|Unexpected CM event bl blka [78]$' /tmp/cm.out /tmp/cm.err ||
         grep -Eq 'data transfers|^ [0-9]+ +[0-9]+ ' /tmp/cm.out; then
        break
      fi
      sleep 0.5
    done
    [ $tries = 1 ] || echo "  step $id $role | $tries attempts (the server was not listening yet)"
    show
    e=$(cut -d' ' -f1 /proc/uptime)
    case $kind@$t in
      # a result line; perftest's t_min is "inf" when its TSC calibration
      # failed, as it may under TCG even with -F
      perftest@*) ok='^ [0-9]+ +[0-9]+ +([0-9.]+|inf) ' ;;
      rstream@*) ok='^custom ' ;;
      *@goverbs) ok='^--- PASS: TestRigPairPeer' ;;
      *@ucmatose) ok='return status 0' ;;
      *@udaddy) ok='data transfers complete' ;;
      *@mckey) ok='^pair-mckey: PASS' ;;
      *@rdma_server|*@rdma_client) ok="^$t: end 0\$" ;;
    esac
    if [ "$rc" = 0 ] && grep -Eq "$ok" /tmp/cm.out && ! grep -q -- '--- SKIP' /tmp/cm.out; then
      r=PASS
    else
      r=FAIL failed=$((failed + 1))
      echo "  step $id $role | FAIL: exit $rc, no '$ok'"
    fi
    echo "PAIR-STEP: $id $name $role $r $rc $(awk "BEGIN{printf \"%.1f\", $e - $s}")"
    continue
  fi
  echo "  step $id $role | $t rping -$([ "$role" = server ] && echo s || echo c) -S $size -C $C, port $port"
  if [ "$role" = server ]; then
    run_tool "$(tool "$t")" -s -a "$PAIR_IP" -p "$port" -v -V -C "$C" -S "$size"
    rc=$? want="server ping data: rdma-ping-"
  else
    end=$(( $(cut -d. -f1 /proc/uptime) + W )) tries=0
    while :; do
      tries=$((tries + 1))
      run_tool "$(tool "$t")" -c -a "$PAIR_PEER" -p "$port" -v -V -C "$C" -S "$size"
      rc=$?
      if [ "$rc" != 0 ] && grep -q REJECTED /tmp/cm.err && ! grep -q 'rdma-ping-' /tmp/cm.out &&
         [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; then
        sleep 0.5; continue
      fi
      break
    done
    [ $tries = 1 ] || echo "  step $id $role | $tries attempts (the server was not listening yet)"
    want="ping data: rdma-ping-"
  fi
  show
  e=$(cut -d' ' -f1 /proc/uptime)
  # rdma-core's rping (Debian's predate rdma-core's fix, pull request
  # #1622) can lose its own teardown race: its CM thread reads the channel
  # main has destroyed and the run that printed every ping exits 255 with
  # this line (cmd/rping's rdmaCoreRpingErr says more)
  if [ "$rc" = 255 ] && [ "$t" = rdma-core ] && grep -q "^$want" /tmp/cm.out &&
     [ "$(tail -n 1 /tmp/cm.err)" = "rdma_get_cm_event: Bad file descriptor" ]; then
    echo "  step $id $role | rdma-core rping exited 255 at its own teardown (rdma-core #1622): counted as 0"
    rc=0
  fi
  # every ping printed, the last one too, and no data mismatch
  pings=$(grep -c "^$want" /tmp/cm.out)
  if [ "$rc" = 0 ] && [ "$pings" = "$C" ] && grep -q "^${want}$((C - 1)): " /tmp/cm.out &&
     ! grep -qi mismatch /tmp/cm.out /tmp/cm.err; then
    r=PASS
  else
    r=FAIL failed=$((failed + 1))
    echo "  step $id $role | FAIL: exit $rc, $pings of $C pings printed"
  fi
  echo "PAIR-STEP: $id $name $role $r $rc $(awk "BEGIN{printf \"%.1f\", $e - $s}")"
done <<STEPS
c1 rping goverbs A rdma-core B 64
c2 rping rdma-core A goverbs B 4000
c3 rping goverbs B rdma-core A 65535
c4 rping rdma-core B goverbs A 26
c5 rping goverbs A goverbs B 1024
c6 rping goverbs B goverbs A 65535
c7 ucmatose ucmatose A goverbs B -
c8 ucmatose goverbs A ucmatose B -
c9 udaddy udaddy A goverbs B -
c10 udaddy goverbs A udaddy B -
c11 mckey mckey A goverbs B -
c12 mckey goverbs B mckey A -
c13 rdma rdma_server A goverbs B -
c14 rdma goverbs A rdma_client B -
c15 perftest perftest A goverbs B send_lat
c16 perftest goverbs A perftest B send_lat
c17 perftest perftest B goverbs A write_bw
c18 perftest goverbs B perftest A write_bw
c19 rstream rdma-core A goverbs B 1
c20 rstream goverbs A rdma-core B 4096
c21 rstream rdma-core B goverbs A 1048576
c22 rstream goverbs B rdma-core A 16777216
c23 rstream goverbs A goverbs B 65536
STEPS
[ $failed = 0 ]
