#!/usr/bin/env bash
# pair.sh: two machines. Boots two guests, each its own kernel, joined by a
# QEMU socket network (guest A listens on a TCP port of 127.0.0.1, guest B
# connects: an Ethernet between two QEMUs, no shared memory), each with its
# own rxe (rxe1) on its own NIC there, runs a command on each and collects
# both results.
#   test/rig/pair.sh [--kernels "A B"] [--bin DIR] [--go PKGS] [--timeout S] -- 'command on A' 'command on B'
#   test/rig/pair.sh --pingpong [--cm] [--kernels "A B"]
#     --kernels "A B"  the two guests' kernels, any of the matrix (default "6.1 6.12",
#                      or $PAIR_KERNELS); the same one twice is fine
#     --bin DIR        copy DIR's files into both guests' PATH; repeatable
#     --go PKGS        build Go main packages into both guests' PATH (for each
#                      guest's architecture); repeatable
#     --timeout S      host timeout per guest (default 1800, or $RIG_TIMEOUT)
#     --pingpong       the interop schedule (guest/pair-pingpong.sh): goverbs'
#                      pingpong and ibv_rc_pingpong between the guests, every
#                      pairing, both roles, both directions; prints one line per
#                      step and a summary line
#     --cm             the rdma_cm schedule (guest/pair-cm.sh): goverbs' rping
#                      and rdma-core's rping connecting through each guest's
#                      kernel CM, every pairing, both roles, both directions,
#                      data verified; then ucmatose, udaddy, mckey and
#                      rdma_server/rdma_client against goverbs' rdmacm in both
#                      roles; after --pingpong's steps when both are given
# In each guest, before the command: guest/pair-net.sh has set up the NIC
# 10.77.0.1 (A) / 10.77.0.2 (B) and rxe1 on it, and exported PAIR_SELF (1|2),
# PAIR_IP, PAIR_PEER, PAIR_NET and PAIR_DEV. The guests are watched like every
# rig boot (lib.sh rig_qemu: host timeout, RIG_STALL console silence (default
# PAIR_STEP_WAIT + PAIR_STEP_TIMEOUT + 120), RIG_LOCKUP soft lockups); when one
# guest hangs or dies the other gets PAIR_GRACE s (default 60) to finish, then
# it is stopped too. Exit status: 0 if both
# commands succeeded; consoles in $RIG_OUT/pair-{A,B}-<kernel>.log.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

kernels=${PAIR_KERNELS:-6.1 6.12}; bins=(); gos=(); tmo=${RIG_TIMEOUT:-1800}; pingpong=; cm=
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) kernels=$2; shift ;;
    --bin) bins+=("$2"); shift ;;
    --go) gos+=("$2"); shift ;;
    --timeout) tmo=$2; shift ;;
    --pingpong) pingpong=1 ;;
    --cm) cm=1 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    *) usage ;;
  esac
  shift
done
read -ra ks <<<"$kernels"
[ ${#ks[@]} = 2 ] || die "--kernels needs two kernels, got '$kernels'"
if [ -n "$pingpong" ] && [ -z "$cm" ]; then
  [ $# = 0 ] || usage
  gos+=(./cmd/pingpong)
  set -- 'bash /rig/pair-pingpong.sh' 'bash /rig/pair-pingpong.sh'
elif [ -n "$cm" ]; then
  [ $# = 0 ] || usage
  gos+=(./cmd/rping ./cmd/perftest ./cmd/rstream)
  c='bash /rig/pair-cm.sh'
  # shellcheck disable=SC2016 # expanded in the guest
  [ -z "$pingpong" ] || { gos+=(./cmd/pingpong); c='bash /rig/pair-pingpong.sh; pp=$?; bash /rig/pair-cm.sh && [ $pp = 0 ]'; }
  set -- "$c" "$c"
fi
[ $# = 2 ] || usage
t_all=$(now)
"$RIG_DIR/setup.sh"
envs=(); builds=()
for k in "${ks[@]}"; do
  tb=$(now)
  envs+=("$(rig_build "$k")") || die "could not build kernel $k"
  builds+=("$(since "$tb")")
done

mkdir -p "$RIG_OUT"
work=$(mktemp -d "$RIG_OUT/pair.XXXXXX")
pids=()
# shellcheck disable=SC2317 # called by the trap
cleanup() { local p; for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- one overlay per guest: its side, the network setup, its command, tools
# built for its architecture ----
cmds=("$1" "$2")
for i in 0 1; do
  side=$((i + 1)) ov=$work/ov$i
  # shellcheck disable=SC1090
  arch=$(ARCH=amd64; . "${envs[$i]}"; echo "$ARCH")
  printf '#!/bin/sh\nexport PAIR_SELF=%d\n. /rig/pair-net.sh || exit 97\n%s\n' "$side" "${cmds[$i]}" > "$work/cmd$i"
  make_overlay "$ov" "$work/cmd$i"
  cp "$RIG_DIR/guest/pair-net.sh" "$RIG_DIR/guest/pair-pingpong.sh" "$RIG_DIR/guest/pair-cm.sh" "$RIG_DIR/guest/pair-mckey.sh" "$ov/rig/"
  write_env "$ov/rig/env" PAIR_ITERS PAIR_STEP_WAIT PAIR_STEP_TIMEOUT PAIR_STALL PAIR_CM_COUNT PAIR_CM_STEPS
  for d in ${bins[@]+"${bins[@]}"}; do cp -a "$d"/. "$ov/rig/bin/"; done
  for p in ${gos[@]+"${gos[@]}"}; do
    ( cd "$TOP" && GOARCH=$arch CGO_ENABLED=0 go build -o "$ov/rig/bin/" "$p" ) || die "go build $p ($arch) failed"
  done
  # --cm: goverbs' side of the ucmatose/udaddy/mckey/rdma_server steps (rdmacm's TestRigPairPeer)
  if [ -n "$cm" ]; then
    ( cd "$TOP" && GOARCH=$arch CGO_ENABLED=0 go test -c -o "$ov/rig/bin/rdmacm.test" ./rdmacm ) || die "go test -c ./rdmacm ($arch) failed"
  fi
done

# ---- the socket network: A listens on a free port of 127.0.0.1, B connects ----
port=
free_port() {
  local p; port=
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { port=$p; break; }
  done
  [ -n "$port" ] || die "no free TCP port for the socket network"
}
net() { printf -- '-netdev socket,id=pair,%s=127.0.0.1:%s -device virtio-net-pci,netdev=pair,mac=52:54:00:77:00:0%s' "$1" "$port" "$2"; }

# A guest silent for longer than a pingpong client may wait and run is hung.
export RIG_STALL=${RIG_STALL:-$(( ${PAIR_STEP_WAIT:-600} + ${PAIR_STEP_TIMEOUT:-600} + 120 ))}
# boot I: guest I (0 = A, 1 = B) in the background; its result in $work/rc$I.
export RIG_QUIET=1
# A guest whose boot failed before its command started is not booted again
# alone (its partner's socket network went with it): both are, once (below).
export RIG_BOOT_RETRY=0
boot() {
  local i=$1 name k logf rc=0; name=$([ "$i" = 0 ] && echo A || echo B)
  k=${ks[$i]} logf=$RIG_OUT/pair-$name-${ks[$i]}.log
  : > "$logf"
  # the console, prefixed, until this boot's subshell ends
  local me=$BASHPID   # (in the pipeline $BASHPID would be tail's own)
  tail -n +1 -F --pid="$me" "$logf" 2>/dev/null | sed -u "s/^/[$name $k] /" &
  # shellcheck disable=SC2046 # net's words are qemu arguments
  rig_boot "${envs[$i]}" "$work/ov$i" "$logf" "$tmo" $(net "$2" $((i + 1))) || rc=$?
  printf 'rc=%q why=%q secs=%q accel=%q note=%q started=%q\n' "$rc" "$RIG_BOOT_WHY" "$RIG_BOOT_SECS" \
    "$RIG_BOOT_ACCEL" "$RIG_BOOT_NOTE" "$RIG_BOOT_STARTED" > "$work/rc$i"
}
# boot_pair: boot both guests on a new socket network and wait for both.
boot_pair() {
pids=(); rm -f "$work/rc0" "$work/rc1"
free_port
log "two machines: A ${ks[0]} (listens on 127.0.0.1:$port), B ${ks[1]} (connects)"
boot 0 listen & pids+=($!)
# B may connect only once A's QEMU listens (A packs its initramfs first).
end=$(( $(date +%s) + 300 ))
until ss -Htln "sport = :$port" | grep -q .; do
  [ -e "$work/rc0" ] && break
  [ "$(date +%s)" -lt $end ] || die "guest A's QEMU did not listen on 127.0.0.1:$port within 300 s"
  sleep 0.2
done
[ -e "$work/rc0" ] || { boot 1 connect & pids+=($!); }

# Wait for both; when one ends hung or dead (124/125), stop the other after
# PAIR_GRACE s: its partner is gone.
grace=${PAIR_GRACE:-60} gone=
while :; do
  n=0; for i in 0 1; do [ -e "$work/rc$i" ] && n=$((n + 1)); done
  [ $n = ${#pids[@]} ] && break
  if [ -z "$gone" ]; then
    for i in 0 1; do
      [ -e "$work/rc$i" ] || continue
      # shellcheck disable=SC1090
      case $(. "$work/rc$i"; echo "$rc") in 124|125) gone=$(date +%s) ;; esac
    done
  elif [ $(( $(date +%s) - gone )) -gt "$grace" ]; then
    log "one guest hung or died ${grace}s ago: stopping the other"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 3; break
  fi
  sleep 1
done
wait 2>/dev/null || true
}
boot_pair
# A guest that panicked, stalled or ended before its command started (a
# boot-time fault of the kernel under TCG: lib.sh's rig_qemu, "Boot retry")
# ran nothing: both guests boot once more, saying so. After a command
# started, only a guest kernel's panic is retried (once, both guests, the
# panic kept in pair-*.log.panicked and named in the summary): a user
# program cannot make a correct kernel panic, and 6.12's rxe has panicked
# under TCG mid-run on a corrupt slab (test/rig/README.md); a second panic
# fails the run. Any other failure after a command started is never retried.
# kind: boot-failed if a guest's boot failed (either guest), else panicked.
retry= kind=
for i in 0 1; do
  [ -e "$work/rc$i" ] || continue
  # shellcheck disable=SC1090
  r=$(rc=0 why= started=1; . "$work/rc$i"
    if [ -z "$started" ] && { [ "$rc" = 124 ] || [ "$rc" = 125 ]; }; then echo "boot-failed $why"
    elif [ "$rc" = 125 ]; then case $why in "Kernel panic"*) echo "panicked $why" ;; esac; fi)
  [ -n "$r" ] || continue
  retry="${retry:+$retry; }guest $([ "$i" = 0 ] && echo A || echo B) ${ks[$i]}: ${r#* }"
  [ "$kind" = boot-failed ] || kind=${r%% *}
done
if [ -n "$retry" ]; then
  for n in "A-${ks[0]}" "B-${ks[1]}"; do mv -f "$RIG_OUT/pair-$n.log" "$RIG_OUT/pair-$n.log.$kind" 2>/dev/null || true; done
  case $kind in
    boot-failed) log "a guest's boot failed before its command started ($retry; consoles in $RIG_OUT/pair-*.log.boot-failed): retrying both boots once" ;;
    *) log "a guest's kernel panicked after its command started ($retry; consoles in $RIG_OUT/pair-*.log.panicked): retrying both boots once" ;;
  esac
  boot_pair
fi

# ---- both results ----
fail=0; lines=(); steps=()
for i in 0 1; do
  name=$([ "$i" = 0 ] && echo A || echo B) k=${ks[$i]}
  logf=$RIG_OUT/pair-$name-$k.log
  rc=125 why="stopped: its partner hung or died" secs='' accel='' note=''
  # shellcheck disable=SC1090
  [ -e "$work/rc$i" ] && . "$work/rc$i"
  [ "$rc" = 0 ] || fail=1
  if [ -n "$why" ] || [ "$rc" != 0 ]; then console_tail "$logf"; fi
  ready=$(tr -d '\r' < "$logf" | sed -n 's/^\[rig \([0-9.]*\)s\] pair: .*/\1/p' | tail -1)
  case $kind in
    boot-failed) note="${note:+$note; }both boots retried once: a boot failed before its command started ($retry)" ;;
    panicked) note="${note:+$note; }both boots retried once: a guest kernel panicked after its command started ($retry)" ;;
  esac
  lines+=("$(printf 'guest %s %-10s exit %s; build %ss; rxe1 ready at %ss guest time; boot+command %ss wall (%s)%s' \
    "$name" "$k" "$rc" "${builds[$i]}" "${ready:-?}" "${secs:-?}" "${accel:-no boot}" "${why:+; $why}${note:+; $note}")")
  while read -r _ n pair role r st s; do steps+=("$n $pair $role $r $st $s"); done < <(tr -d '\r' < "$logf" | grep '^PAIR-STEP: ')
done
ids=()
[ -z "$pingpong" ] || ids+=(1 2 3 4 5 6)
# --cm: the ids of pair-cm.sh's step table (its STEPS here-document), or PAIR_CM_STEPS
if [ -n "$cm" ]; then
  # shellcheck disable=SC2207 # one id a word
  ids+=($(awk '/^STEPS$/ {f = 0} f {print $1} /<<STEPS$/ {f = 1}' "$RIG_DIR/guest/pair-cm.sh" |
          awk -v only=" ${PAIR_CM_STEPS:-} " 'only == "  " || index(only, " " $1 " ")'))
fi
if [ ${#ids[@]} != 0 ]; then
  pass=0 bad=0
  for n in "${ids[@]}"; do
    both=$(printf '%s\n' "${steps[@]}" | awk -v n="$n" '$1==n' | sort -k3,3r)   # server first
    pair=$(awk 'NR==1{print $2}' <<<"$both")
    if [ "$(grep -c ' PASS ' <<<"$both")" = 2 ]; then r=PASS pass=$((pass + 1)); else r=FAIL bad=$((bad + 1)); fi
    printf 'pair: %-4s step %s %-28s %s\n' "$r" "$n" "${pair:-?}" "$(awk '{printf "%s %s(%s) %ss  ", $3, $4, $5, $6}' <<<"$both")"
  done
  [ $bad = 0 ] || fail=1
fi
echo "pair: ==== two machines: ${ks[0]} <-> ${ks[1]} ($(since "$t_all")s) ===="
printf 'pair: %s\n' "${lines[@]}"
[ ${#ids[@]} = 0 ] || echo "pair: $([ -n "$pingpong" ] && echo pingpong)$([ -n "$pingpong" ] && [ -n "$cm" ] && echo ' and ')$([ -n "$cm" ] && echo 'rdma_cm') ${ks[0]} <-> ${ks[1]}: $pass passed, $bad failed"
exit "$fail"
