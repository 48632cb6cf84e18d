#!/usr/bin/env bash
# rstreamcg.sh: goverbs' user instructions per rstream transfer, by function,
# counted by callgrind inside a rig guest with rdma-core's rstream as the
# peer. Deterministic where wall-clock figures under TCG are not: it says
# where a message's user code goes, not how long it takes.
#   test/perf/rstreamcg.sh                     # 64 B, rxe0 (10.0.2.15)
#   SIZE=4096 KERNEL=newest test/perf/rstreamcg.sh
#   TOP=40 OUT=/tmp/cg test/perf/rstreamcg.sh  # more functions; keep the profiles
# For each role (snd: cmd/rstream as the client, under callgrind, against
# rdma-core's rstream server; rcv: cmd/rstream as the server against its
# client) it runs `-S SIZE -C N1` and `-S SIZE -C N2` (default 2000 and
# 12000: every transfer goes out and comes back, so a side's transfer is
# one send and one receive) and prints the difference over N2-N1: user
# instructions a transfer, set-up and exit cancelled; the third role (c:
# rdma-core's rstream as the client, under callgrind, against its own
# server) is the same count for librdmacm's rsocket with libibverbs, librxe
# and libc, the figure to hold goverbs' against. Then the TOP (default
# 25) functions of each N2 profile by their own instructions a transfer
# (the N2 profile over N2: set-up included, ~5%), read on the host with
# callgrind_annotate; the profiles come out of the guest on its console
# (gzip, base64) and stay in OUT (default: a temporary folder, removed).
# callgrind runs the Go side ~50x slower, so the native peer waits and
# the profiled side seldom spins: its counts are its work. Needs valgrind
# on the host (installed if missing); the guest runs the host's static
# callgrind tool and its launcher (Debian's libc is in the guest).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
amd64_only
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
work=$(mktemp -d)
out=${OUT:-$work/out}
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cg_tools "$work/bin"
( cd "$top" && CGO_ENABLED=0 go build -o "$work/bin/grstream" ./cmd/rstream )
addr=${ADDR:-10.0.2.15} size=${SIZE:-64} n1=${N1:-2000} n2=${N2:-12000}
cat > "$work/bin/guest.sh" <<GUEST
export VALGRIND_LIB=/rig/bin/vg
p=7700
# a server listens once its rdma_cm ID is in LISTEN on the port
listening() { i=0; while [ \$i -lt 150 ] && ! rdma res show cm_id 2>/dev/null | grep LISTEN | grep -q ":\$1 "; do sleep 0.2; i=\$((i + 1)); done; }
cg() { GODEBUG=asyncpreemptoff=1 timeout 900 /rig/bin/valgrind --tool=callgrind --callgrind-out-file="\$@"; }
for n in $n1 $n2; do
  p=\$((p + 1))
  timeout 900 /usr/bin/rstream -b $addr -p \$p -S $size -C \$n >/dev/null 2>&1 & listening \$p
  cg /tmp/cg.snd.\$n /rig/bin/grstream -s $addr -p \$p -S $size -C \$n 2>&1 | grep '^custom' | sed "s/^/snd \$n: /"
  wait
  p=\$((p + 1))
  cg /tmp/cg.rcv.\$n /rig/bin/grstream -b $addr -p \$p -S $size -C \$n >/dev/null 2>&1 & listening \$p
  timeout 900 /usr/bin/rstream -s $addr -p \$p -S $size -C \$n 2>&1 | grep '^custom' | sed "s/^/rcv \$n (rdma-core's client): /"
  wait
  p=\$((p + 1))
  timeout 900 /usr/bin/rstream -b $addr -p \$p -S $size -C \$n >/dev/null 2>&1 & listening \$p
  cg /tmp/cg.c.\$n /usr/bin/rstream -s $addr -p \$p -S $size -C \$n 2>&1 | grep '^custom' | sed "s/^/c \$n (rdma-core's client, profiled): /"
  wait
done
for f in /tmp/cg.*; do echo "BEGIN-FILE \$(basename \$f)"; gzip -c \$f | base64 -w 0; echo; echo END-FILE; done
GUEST
log=$work/guest.log
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$work/bin" --timeout "${RIG_TIMEOUT:-2400}" -- 'sh /rig/bin/guest.sh' > "$log" 2>&1 ||
  { tail -40 "$log"; echo "rstreamcg: the guest failed (above)"; exit 1; }
grep -E '^(snd|rcv|c) ' "$log" || true
cg_files "$log" "$out"
for r in snd rcv c; do
  a=$(awk '/^summary:/ {print $2}' "$out/cg.$r.$n1") b=$(awk '/^summary:/ {print $2}' "$out/cg.$r.$n2")
  echo "$r: $(( (b - a) / (n2 - n1) )) user instructions a transfer (-S $size)"
  cg_top "$out/cg.$r.$n2" "$n2" "${TOP:-25}"
done
[ -n "${OUT:-}" ] && echo "rstreamcg: profiles in $out"
exit 0
