#!/usr/bin/env bash
# perftestcg.sh: user instructions a message of a perftest client, goverbs'
# (cmd/perftest) beside perftest 4.5's, counted by callgrind inside a rig
# guest against perftest's own server on rxe0 loopback. Deterministic where
# wall-clock figures under TCG are not: it says how much user code a
# message costs each program, not how long it takes.
#   test/perf/perftestcg.sh                                # write_bw -s 64
#   TEST=send_bw ARGS="-s 4096" test/perf/perftestcg.sh
#   TOP=40 OUT=/tmp/cg KERNEL=newest test/perf/perftestcg.sh
# For each client (gv: goverbs, pt: perftest) it runs `-n N1` and `-n N2`
# (default 2000 and 12000) under callgrind and prints the difference over
# N2-N1: user instructions a message, set-up and exit cancelled. Then the
# TOP (default 20) functions of each N2 profile by their own instructions a
# message (the N2 profile over N2: set-up included), read on the host with
# callgrind_annotate; the profiles come out of the guest on its console
# (gzip, base64) and stay in OUT (default: a temporary folder, removed).
# Under callgrind a client's user code runs ~50x slower while rxe's kernel
# work (inside the doorbell write, on loopback) does not, so the profiled
# client seldom finds its send queue full and spins: its counts are its
# work, posting and polling. A latency test's client still spins for each
# of its peer's messages (write_lat 64 B: ~335 of its 818 instructions a
# message in the poll loop), so its counts do not compare. Needs valgrind
# on the host (installed if missing); the guest runs the host's static
# callgrind tool.
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
( cd "$top" && CGO_ENABLED=0 go build -o "$work/bin/perftest" ./cmd/perftest )
test=${TEST:-write_bw} args=${ARGS:--s 64} n1=${N1:-2000} n2=${N2:-12000}
ln -s perftest "$work/bin/gv_ib_$test"
cat > "$work/bin/guest.sh" <<GUEST
export VALGRIND_LIB=/rig/bin/vg
p=19700
listening() { i=0; while [ \$i -lt 600 ] && ! netstat -ltn 2>/dev/null | grep -q ":\$1 "; do sleep 0.05; i=\$((i + 1)); done; }
cg() { GODEBUG=asyncpreemptoff=1 timeout 900 /rig/bin/valgrind --tool=callgrind --callgrind-out-file="\$@"; }
for n in $n1 $n2; do
  for c in gv pt; do
    prog=ib_$test; [ \$c = pt ] || prog=/rig/bin/gv_ib_$test
    p=\$((p + 1))
    timeout 900 ib_$test -d rxe0 -x 1 -F -p \$p $args -n \$n >/dev/null 2>&1 & listening \$p
    cg /tmp/cg.\$c.\$n \$(command -v \$prog) -d rxe0 -x 1 -F -p \$p $args -n \$n 127.0.0.1 2>&1 | grep -E '^ [0-9]+ +[0-9]+ ' | sed "s/^/\$c \$n: /"
    wait
  done
done
for f in /tmp/cg.*; do echo "BEGIN-FILE \$(basename \$f)"; gzip -c \$f | base64 -w 0; echo; echo END-FILE; done
GUEST
log=$work/guest.log
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$work/bin" --timeout "${RIG_TIMEOUT:-2400}" -- 'sh /rig/bin/guest.sh' > "$log" 2>&1 ||
  { tail -40 "$log"; echo "perftestcg: the guest failed (above)"; exit 1; }
echo "perftestcg: goverbs at $(cd "$top" && git describe --always --dirty), $test $args, client under callgrind, perftest's server"
grep -a -E '^(gv|pt) ' "$log" | tr -d '\r' || true
cg_files "$log" "$out"
for c in gv pt; do
  a=$(awk '/^summary:/ {print $2}' "$out/cg.$c.$n1") b=$(awk '/^summary:/ {print $2}' "$out/cg.$c.$n2")
  echo "$c: $(( (b - a) / (n2 - n1) )) user instructions a message ($test $args)"
  cg_top "$out/cg.$c.$n2" "$n2" "${TOP:-20}"
done
[ -n "${OUT:-}" ] && echo "perftestcg: profiles in $out"
exit 0
