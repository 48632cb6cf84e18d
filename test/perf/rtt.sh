#!/usr/bin/env bash
# rtt.sh: the distribution of rsocket round trips, goverbs
# (test/perf/rtt/gortt) beside librdmacm's rsocket (test/perf/rtt/crtt.c), in
# one boot of the rig: ROUNDS rounds (default 4), each a crtt pair then a
# gortt pair of N round trips (default 5000) of SIZE bytes (default 64) on
# ADDR (default 10.0.2.15, rxe0's netdev; 10.0.3.15 is siw0's). Both sides of
# both programs spin, and every round trip is timed (three CLOCK_MONOTONIC
# reads: start, after the send, end), so the lines show what rstream's mean
# hides: min, p10, p50, p90, p99, max (µs) and how many round trips took over
# 100 µs; a second line per run splits the run in tenths, in order: each
# tenth's round trips over 100 µs and its time (ms), so a tail at the run's
# start shows apart from one throughout. A "split" line per client gives the
# median and mean of each round trip's two parts: its send (the write call,
# the doorbell's syscall) and the rest (the wait for the reply and its read).
# A "cpu" line per side (the server's labelled "srv") gives the process's CPU
# time a round trip, user and kernel (getrusage over all its threads: both
# sides spin, so the two add up to about the round trip), and its voluntary
# and involuntary context switches over the run: which side, and which half of
# it, a gap is in. The kernel splits a task's run time into user and sys by
# where its ticks land (4 ms apart at HZ 250), so the split of one run is a
# sample of ~60-80 ticks. On 6.1 one side of a pair, either, took ~40 µs of
# sys a round trip and the other ~2-20 (session 52, docs/COST.md: rxe's work
# for both directions can settle into one side's syscalls).
#   test/perf/rtt.sh
#   KERNEL=newest ADDR=10.0.3.15 SIZE=4096 test/perf/rtt.sh
#   BASE=<git revision> test/perf/rtt.sh   # an A/B in one boot: that
#     commit's gortt runs third in each round, its lines labelled "base"
#   BASEBIN=/tmp/gortt-x test/perf/rtt.sh   # the same A/B with a gortt built
#     elsewhere (another toolchain, a patched runtime: GOROOT=... go build
#     ./test/perf/rtt/gortt), labelled "base"
#   WARM=50000 test/perf/rtt.sh   # each client spins 50 ms between its
#     connect and its first timed round trip (crtt and gortt alike)
#   GENV='GOVERBS_WAIT_SPIN=1h' test/perf/rtt.sh   # gortt's environment
#   MIX=1 test/perf/rtt.sh   # each round also runs the mixed pairs (the
#     two speak one protocol): "c-srv/go" is crtt serving gortt's client,
#     "go-srv/c" gortt serving crtt's; which side a gap follows
#   DBTIME=1 test/perf/rtt.sh   # a "doorbell" line per client: the
#     median and mean time of the write(2) each send's doorbell makes, from
#     the clock read just before and just after it (gortt built with the
#     tag goverbs_dbtime, crtt with test/perf/rtt/wtime.c preloaded): the
#     kernel's part of a send, which on 6.1 holds rxe's whole exchange
# Builds crtt with gcc against Debian's librdmacm-dev (installed if missing).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
# The measurement rig's kernel command line (RIG_APPEND's default).
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh"
amd64_only
[ -f /usr/include/rdma/rsocket.h ] || apt-get install -y -q librdmacm-dev >/dev/null
command -v gcc >/dev/null || apt-get install -y -q gcc >/dev/null
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -o "$work/crtt" "$top/test/perf/rtt/crtt.c" -lrdmacm
tags= pre=
if [ "${DBTIME:-}" = 1 ]; then
  tags=goverbs_dbtime pre=LD_PRELOAD=/rig/bin/wtime.so
  gcc -O2 -Wall -shared -fPIC -o "$work/wtime.so" "$top/test/perf/rtt/wtime.c"
fi
( cd "$top" && CGO_ENABLED=0 go build -tags "$tags" -o "$work/gortt" ./test/perf/rtt/gortt )
if [ -n "${BASEBIN:-}" ]; then
  cp "$BASEBIN" "$work/gortt-base"
elif [ -n "${BASE:-}" ]; then
  rev=$(git -C "$top" rev-parse --verify "${BASE}^{commit}")
  src=$(mktemp -d); trap 'rm -rf "$work" "$src"' EXIT
  git -C "$top" archive "$rev" | tar -x -C "$src"
  ( cd "$src" && CGO_ENABLED=0 go build -tags "$tags" -o "$work/gortt-base" ./test/perf/rtt/gortt )
fi
addr=${ADDR:-10.0.2.15} n=${N:-5000} size=${SIZE:-64}
cat > "$work/guest.sh" <<GUEST
p=7700
export RTT_WARM_US=${WARM:-0}
for r in \$(seq ${ROUNDS:-4}); do
  p=\$((p + 1)); /rig/bin/crtt $addr \$p server >/dev/null 2>/tmp/srv & sleep 1
  env $pre /rig/bin/crtt $addr \$p $n $size || echo "crtt failed"; wait; cat /tmp/srv
  p=\$((p + 1)); env ${GENV:-} /rig/bin/gortt $addr:\$p server >/dev/null 2>/tmp/srv & sleep 1
  env ${GENV:-} /rig/bin/gortt $addr:\$p $n $size || echo "gortt failed"; wait; cat /tmp/srv
  if [ "${MIX:-}" = 1 ]; then
    p=\$((p + 1)); /rig/bin/crtt $addr \$p server >/dev/null 2>/tmp/srv & sleep 1
    env ${GENV:-} /rig/bin/gortt $addr:\$p $n $size | sed 's/^goverbs  /c-srv\/go/' || echo "gortt failed"; wait; sed 's/^rdma-core srv/c-srv\/go srv(c)/' /tmp/srv
    p=\$((p + 1)); env ${GENV:-} /rig/bin/gortt $addr:\$p server >/dev/null 2>/tmp/srv & sleep 1
    env $pre /rig/bin/crtt $addr \$p $n $size | sed 's/^rdma-core/go-srv\/c/' || echo "crtt failed"; wait; sed 's/^goverbs   srv/go-srv\/c srv(go)/' /tmp/srv
  fi
  [ -x /rig/bin/gortt-base ] || continue
  p=\$((p + 1)); env ${GENV:-} /rig/bin/gortt-base $addr:\$p server >/dev/null 2>/tmp/srv & sleep 1
  env ${GENV:-} /rig/bin/gortt-base $addr:\$p $n $size | sed 's/^goverbs  /base     /' || echo "gortt-base failed"; wait; sed 's/^goverbs  /base     /' /tmp/srv
done
GUEST
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$work" --timeout "${RIG_TIMEOUT:-1200}" -- 'sh /rig/bin/guest.sh' 2>&1 |
  grep -E '^(rdma-core|goverbs|base|c-srv|go-srv|crtt|gortt|rig:)'
