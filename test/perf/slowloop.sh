#!/usr/bin/env bash
# slowloop.sh: guest instructions per slow-path command, goverbs beside
# rdma-core, counted by QEMU's TCG plugin (test/perf/insns/plugin.c) as
# insns.sh counts the fast path: the kernel's, goverbs' Go code and
# rdma-core's user code (program, libibverbs, provider, libc) apart.
#   test/perf/slowloop.sh                       # VERBS: query_device query_port query_gid pd open
#   VERBS="pd query_gid" SAMPLE=100 test/perf/slowloop.sh
# Each side runs its loop (test/perf/slowloop, test/perf/insns/slowloop.c)
# with N1 and N2 calls (default 2000 and 6000) between marks; the
# difference over N2-N1 is one call (open, set-up and exit cancel). "pd" is
# an alloc and a dealloc, "open" an open and a close of a context. SAMPLE=US
# also samples where the host's time went, as insns.sh does. TCG only.
set -euo pipefail
if [ "${1:-}" = --guest ]; then
  seq=0
  mark() { icmark; seq=$((seq + 1)); }
  echo "slowloop: kernel $(uname -r), $(nproc) CPUs"
  if [ -n "${SAMPLE:-}" ]; then
    echo KALLSYMS-BEGIN; grep -i ' t ' /proc/kallsyms | gzip -c | base64; echo KALLSYMS-END
  fi
  for v in ${VERBS:-query_device query_port query_gid pd open}; do
    for side in goverbs rdma-core; do
      prog=slowloop; [ $side = rdma-core ] && prog=slowloop-c
      for n in "${N1:-2000}" "${N2:-6000}"; do
        mark
        $prog rxe0 "$v" "$n" || { echo "$prog $v $n failed" >&2; exit 1; }
        mark
        echo "ILABEL $((seq - 1)) $seq $v $side $n"
      done
    done
  done
  exit 0
fi

top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
command -v gcc >/dev/null || { echo "slowloop.sh: needs gcc (apt-get install gcc)" >&2; exit 1; }
[ -f /usr/include/infiniband/verbs.h ] || apt-get install -y -q libibverbs-dev >/dev/null
gcc -O2 -shared -fPIC -pthread -fvisibility=hidden -Wall -Wextra -o "$bin/insns.so" "$top/test/perf/insns/plugin.c"
gcc -O2 -static -nostdlib -Wl,-Ttext-segment=0x13370000 -o "$bin/icmark" "$top/test/perf/insns/mark.c"
gcc -O2 -Wall -o "$bin/slowloop-c" "$top/test/perf/insns/slowloop.c" -libverbs
cp "$0" "$bin/slowloop.sh"
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/slowloop" ./test/perf/slowloop )
echo "slowloop: goverbs at $(cd "$top" && git describe --always --dirty)"
env=()
for v in VERBS N1 N2 SAMPLE GOMAXPROCS GODEBUG; do [ -n "${!v:-}" ] && env+=("$v='${!v}'"); done
log=$(mktemp); syms=$(mktemp -d); trap 'rm -rf "$bin" "$log" "$syms"' EXIT
plugin=$bin/insns.so
[ -z "${SAMPLE:-}" ] || plugin+=",sample=$SAMPLE"
rc=0
RIG_ACCEL=tcg RIG_TIMEOUT=${RIG_TIMEOUT:-3600} "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" \
  --qemu -plugin --qemu "$plugin" --qemu -d --qemu plugin -- "${env[*]} slowloop.sh --guest" > "$log" 2>&1 || rc=$?
tr -d '\r' < "$log" | grep -a -E '^(slowloop|ILABEL)' || true
[ $rc = 0 ] || { tail -n 30 "$log"; echo "slowloop.sh: the guest failed (exit $rc)" >&2; exit "$rc"; }
echo
tr -d '\r' < "$log" | awk -f "$top/test/perf/insns/table.awk"
[ -n "${SAMPLE:-}" ] || exit 0
echo
go tool nm -n "$bin/slowloop" | awk '$2 ~ /^[Tt]$/ { printf "slowloop %s %s\n", $1, $3 }' > "$syms/go"
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
      q = r2[k]; tab = "slowloop"
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
