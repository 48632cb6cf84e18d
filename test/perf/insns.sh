#!/usr/bin/env bash
# insns.sh: guest instructions per operation, goverbs' tools beside
# rdma-core's, counted by QEMU itself (a TCG plugin, test/perf/insns/): the
# kernel's, goverbs' (static Go, at 0x400000) and rdma-core's (its program
# plus libibverbs, the provider and libc) apart. A count, not a timing: the
# figures do not depend on a quiet host, and under TCG, where every guest
# instruction is dear, they are where the time goes.
#   test/perf/insns.sh                                  # the default cases
#   CASES="write_bw:-l,16:4096 rstream:lat:64" test/perf/insns.sh
# A case is test:flags:size, flags comma-separated: a perftest test
# (send_lat, write_bw, ...; rxe0 loopback, -x 1 -F; the op is one iteration
# of -n), or rstream:lat:SIZE / rstream:bw:SIZE (rdma-core's rstream beside
# cmd/rstream on rxe0's address; lat is -C 1 -I N, one op a round trip; bw
# -C N -I 1, one op a transfer; rstream:lat,b:SIZE adds -T b to both
# sides: rdma-core's rstream then blocks after rsocket's 10 us poll
# instead of spinning in rpoll). Each program runs each case twice, with N1
# and N2 ops (default 2000 and 12000), server and client both in the guest
# and both counted; a marker program (mark.c) between the runs makes the
# plugin print its totals, and the difference of the two runs over N2-N1 is
# one op (the set-up, the same in both, cancels). Columns: instructions per
# op in the kernel, in goverbs' Go code, in rdma-core's user code (program
# and libraries), and in all user code; ratio = goverbs/rdma-core of the
# user and of the total (kernel included). Read the user columns with care:
# a program that busy-polls runs instructions while it waits, so its user
# count per op is its cost plus its spin (time, not work); the kernel column
# is the comparable one there. TCG only (KVM runs no plugin):
# the script forces RIG_ACCEL=tcg. Needs gcc (the plugin and the marker).
# SAMPLE=US (e.g. 200) also samples where the host's time went, every US
# microseconds of host time per vCPU (plugin.c): per case and side, the
# microseconds per op idle, in the kernel, in goverbs' code and in
# rdma-core's (from the N2-N1 difference, as above), then the TOP (default
# 12) sampled functions of the N2 run, named from the guest's kallsyms and
# the Go binary's symbols (rdma-core's user code stays unnamed: PIE). The
# per-op figures are a difference of two timed runs: where the set-up's
# time varies as much as the ops take (short runs), they can come out
# negative; the profile of one run is the steadier reading.
set -euo pipefail
if [ "${1:-}" = --guest ]; then
  port=19900 seq=0
  listening() { netstat -ltn 2>/dev/null | grep -q ":$1 "; }
  addr=${ADDR:-10.0.2.15} # rxe0's netdev (eth0)
  mark() { icmark; seq=$((seq + 1)); }
  # pair SERVER CLIENT ARGS...: a server and its client to completion.
  pair() {
    local srv=$1 cli=$2; shift 2
    local i=0 out
    port=$((port + 1))
    if [ "$kind" = rstream ]; then
      $srv -b "$addr" -p $port "$@" > /tmp/is.out 2>&1 &
    else
      $srv -d rxe0 -x 1 -F -p $port "$@" > /tmp/is.out 2>&1 &
    fi
    local spid=$!
    if [ "$kind" = rstream ]; then
      # an rsocket listener has no TCP port to wait for: retry the client
      # until it connects (figures.sh does the same)
      until out=$(timeout 600 "$cli" -s "$addr" -p $port "$@" 2>&1); do
        i=$((i + 1)); [ $i -le 50 ] || { echo "$cli $* failed: $out" >&2; cat /tmp/is.out >&2; exit 1; }
        sleep 0.2
      done
    else
      until listening $port; do
        i=$((i + 1)); [ $i -le 600 ] || { echo "server never listened" >&2; cat /tmp/is.out >&2; exit 1; }
        sleep 0.05
      done
      out=$(timeout 600 "$cli" -d rxe0 -x 1 -F -p $port "$@" 127.0.0.1 2>&1) || { echo "$cli $* failed: $out" >&2; cat /tmp/is.out >&2; exit 1; }
    fi
    wait $spid || { echo "$srv $* failed:" >&2; cat /tmp/is.out >&2; exit 1; }
  }
  echo "insns: kernel $(uname -r), $(nproc) CPUs, rxe0 (address $addr)"
  if [ -n "${SAMPLE:-}" ]; then # the kernel's text symbols, for the host to name samples
    echo KALLSYMS-BEGIN; grep -i ' t ' /proc/kallsyms | gzip -c | base64; echo KALLSYMS-END
  fi
  for cs in ${CASES:-write_bw::64 send_bw::64 send_lat::64 rstream:lat:64 rstream:bw:64}; do
    IFS=: read -r t fl size <<<"$cs"
    fl=${fl//,/ }
    kind=perftest
    [ "$t" = rstream ] && kind=rstream
    for side in goverbs rdma-core; do
      for n in "${N1:-2000}" "${N2:-12000}"; do
        if [ $kind = rstream ]; then
          prog=rstream; [ $side = goverbs ] && prog=grstream
          case " $fl " in *" lat "*) set -- -S "$size" -C 1 -I "$n" ;; *) set -- -S "$size" -C "$n" -I 1 ;; esac
          case " $fl " in *" b "*) set -- "$@" -T b ;; esac # blocking: rdma-core's rstream parks after 10 us
        else
          prog=ib_$t; [ $side = goverbs ] && prog=gv_ib_$t
          # shellcheck disable=SC2086 # fl is flags or nothing
          set -- -s "$size" -n "$n" $fl
        fi
        mark
        pair "$prog" "$prog" "$@"
        mark
        echo "ILABEL $((seq - 1)) $seq $cs $side $n"
      done
    done
  done
  exit 0
fi

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
command -v gcc >/dev/null || { echo "insns.sh: needs gcc (apt-get install gcc)" >&2; exit 1; }
gcc -O2 -shared -fPIC -pthread -fvisibility=hidden -Wall -Wextra -o "$bin/insns.so" "$top/test/perf/insns/plugin.c"
gcc -O2 -static -nostdlib -Wl,-Ttext-segment=0x13370000 -o "$bin/icmark" "$top/test/perf/insns/mark.c"
cp "$0" "$bin/insns.sh"
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/perftest" ./cmd/perftest && CGO_ENABLED=0 go build -o "$bin/grstream" ./cmd/rstream )
for t in send_lat write_lat read_lat atomic_lat send_bw write_bw read_bw atomic_bw; do ln -s perftest "$bin/gv_ib_$t"; done
echo "insns: goverbs at $(cd "$top" && git describe --always --dirty)"
env=()
for v in CASES N1 N2 ADDR SAMPLE GOMAXPROCS GODEBUG GOVERBS_WAIT_SPIN; do [ -n "${!v:-}" ] && env+=("$v='${!v}'"); done
log=$(mktemp); syms=$(mktemp -d); trap 'rm -rf "$bin" "$log" "$syms"' EXIT
plugin=$bin/insns.so
[ -z "${SAMPLE:-}" ] || plugin+=",sample=$SAMPLE"
rc=0
RIG_ACCEL=tcg RIG_TIMEOUT=${RIG_TIMEOUT:-3600} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" \
  --qemu -plugin --qemu "$plugin" --qemu -d --qemu plugin -- "${env[*]} insns.sh --guest" > "$log" 2>&1 || rc=$?
tr -d '\r' < "$log" | grep -a -E '^(insns|ILABEL)' || true
[ $rc = 0 ] || { tail -n 30 "$log"; echo "insns.sh: the guest failed (exit $rc)" >&2; exit "$rc"; }
echo
tr -d '\r' < "$log" | awk -f "$top/test/perf/insns/table.awk"
[ -n "${SAMPLE:-}" ] || exit 0
echo
# symbols: "address kind name" sorted by address: the kernel's from the
# guest, each Go binary's (perftest, grstream) from go tool nm.
for b in perftest grstream; do
  go tool nm -n "$bin/$b" | awk -v b="$b" '$2 ~ /^[Tt]$/ { printf "%s %s %s\n", b, $1, $3 }'
done > "$syms/go"
tr -d '\r' < "$log" | sed -n '/^KALLSYMS-BEGIN$/,/^KALLSYMS-END$/p' | sed '1d;$d' | base64 -d | gunzip | sort > "$syms/kernel" || true
tr -d '\r' < "$log" | awk -v period="$SAMPLE" -v top="${TOP:-12}" -v ksyms="$syms/kernel" -v gsyms="$syms/go" '
  function hex(h,   i, v, c) { v = 0; h = tolower(h); sub(/^0x/, "", h)
    for (i = 1; i <= length(h); i++) { c = index("0123456789abcdef", substr(h, i, 1)) - 1; v = v * 16 + c }
    return v }
  function find(tab, n, va,   lo, hi, mid) { lo = 1; hi = n; if (n == 0 || va < A[tab, 1]) return ""
    while (lo < hi) { mid = int((lo + hi + 1) / 2); if (A[tab, mid] <= va) lo = mid; else hi = mid - 1 }
    return N[tab, lo] }
  BEGIN {
    # kernel addresses above 2^53 lose their low bits in awk doubles: key
    # them by their low 44 bits, the same for the samples.
    while ((getline l < ksyms) > 0) { split(l, f, " "); nk++; A["k", nk] = hex(substr(f[1], 5)); N["k", nk] = f[3] }
    while ((getline l < gsyms) > 0) { split(l, f, " "); t = f[1]; ng[t]++; A[t, ng[t]] = hex(f[2]); N[t, ng[t]] = f[3] }
    if (nk == 0) print "insns.sh: no kernel symbols from the guest" > "/dev/stderr"
  }
  /^SAMPLES / { for (i = 3; i <= NF; i++) { split($i, kv, "="); S[$2, kv[1]] = kv[2] } }
  /^SAMPLE / { top_n[$2]++; TA[$2, top_n[$2]] = $3; TC[$2, top_n[$2]] = $4 }
  /^ILABEL / { k = $4 SUBSEP $5; if (!(k in n1)) { n1[k] = $6; r1[k] = $3 } else { n2[k] = $6; r2[k] = $3 }
               if (!($4 in seen)) { seen[$4] = 1; order[++nc] = $4 } }
  function per(k, f) { return (S[r2[k], f] - S[r1[k], f]) * period / (n2[k] - n1[k]) }
  END {
    printf "%-22s %-9s %9s %9s %9s %9s %9s  (host microseconds per op, sampled every %d us)\n", "case", "side", "idle", "kernel", "go", "rdma-core", "busy", period
    for (i = 1; i <= nc; i++) for (s = 1; s <= 2; s++) {
      side = (s == 1) ? "goverbs" : "rdma-core"; k = order[i] SUBSEP side
      if (!(k in n2)) continue
      kern = per(k, "kernel"); g = per(k, "go"); r = per(k, "exe") + per(k, "lib")
      printf "%-22s %-9s %9.1f %9.1f %9.1f %9.1f %9.1f\n", order[i], side, per(k, "idle"), kern, g, r, kern + g + r + per(k, "other")
    }
    for (i = 1; i <= nc; i++) for (s = 1; s <= 2; s++) {
      side = (s == 1) ? "goverbs" : "rdma-core"; k = order[i] SUBSEP side
      if (!(k in n2)) continue
      q = r2[k]; tab = (order[i] ~ /^rstream/) ? "grstream" : "perftest"
      tot = S[q, "kernel"] + S[q, "go"] + S[q, "exe"] + S[q, "lib"] + S[q, "other"]
      printf "\n%s, %s, %d-op run: %d busy samples, %d idle; the most sampled:\n", order[i], side, n2[k], tot, S[q, "idle"]
      delete F
      for (j = 1; j <= top_n[q]; j++) {
        a = TA[q, j]; c = TC[q, j]
        if (a ~ /^0xffff/) name = "[k] " find("k", nk, hex(substr(a, 7)))
        else if (hex(a) < 268435456) name = "[go] " find(tab, ng[tab], hex(a))
        else if (a ~ /^0x7f/) name = "[lib]"
        else if (a ~ /^0x5/) name = "[exe]"
        else name = "[other]"
        F[name] += c
      }
      m = 0; for (nm in F) { m++; FN[m] = nm; FC[m] = F[nm] }
      for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (FC[y] > FC[x]) { t = FC[x]; FC[x] = FC[y]; FC[y] = t; t = FN[x]; FN[x] = FN[y]; FN[y] = t }
      for (x = 1; x <= m && x <= top; x++) printf "  %6d %5.1f%%  %s\n", FC[x], tot ? 100 * FC[x] / tot : 0, FN[x]
      delete FN; delete FC
    }
  }'
