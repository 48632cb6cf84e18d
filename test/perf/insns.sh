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
# PIN=1 runs each server on CPU 1 and each client on CPU 0 (taskset);
# VCPU=N counts vCPU N apart as well (a second table) and, with SAMPLE,
# samples it alone: PIN=1 VCPU=0 is the clients' CPU, VCPU=1 the servers'.
set -euo pipefail
if [ "${1:-}" = --guest ]; then
  port=19900 seq=0 pin_s="" pin_c=""
  [ -z "${PIN:-}" ] || pin_s="taskset -c 1" pin_c="taskset -c 0"
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
      # shellcheck disable=SC2086 # the pin is a word list
      $pin_s $srv -d rxe0 -x 1 -F -p $port "$@" > /tmp/is.out 2>&1 &
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
      # shellcheck disable=SC2086
      out=$(timeout 600 $pin_c "$cli" -d rxe0 -x 1 -F -p $port "$@" 127.0.0.1 2>&1) || { echo "$cli $* failed: $out" >&2; cat /tmp/is.out >&2; exit 1; }
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
# shellcheck source=lib.sh
( . "$top/test/perf/lib.sh" && amd64_only ) || exit 2 # a subshell: lib.sh's RIG_APPEND is not this script's
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
command -v gcc >/dev/null || { echo "insns.sh: needs gcc (apt-get install gcc)" >&2; exit 1; }
gcc -O2 -shared -fPIC -pthread -fvisibility=hidden -Wall -Wextra -o "$bin/insns.so" "$top/test/perf/insns/plugin.c"
gcc -O2 -static -nostdlib -Wl,-Ttext-segment=0x13370000 -o "$bin/icmark" "$top/test/perf/insns/mark.c"
cp "$0" "$bin/insns.sh"
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/perftest" ./cmd/perftest && CGO_ENABLED=0 go build -o "$bin/grstream" ./cmd/rstream )
for t in send_lat write_lat read_lat atomic_lat send_bw write_bw read_bw atomic_bw; do ln -s perftest "$bin/gv_ib_$t"; done
echo "insns: goverbs at $(cd "$top" && git describe --always --dirty)"
env=()
for v in CASES N1 N2 ADDR SAMPLE PIN GOMAXPROCS GODEBUG GOVERBS_WAIT_SPIN; do [ -n "${!v:-}" ] && env+=("$v='${!v}'"); done
log=$(mktemp); syms=$(mktemp -d); trap 'rm -rf "$bin" "$log" "$syms"' EXIT
plugin=$bin/insns.so
[ -z "${SAMPLE:-}" ] || plugin+=",sample=$SAMPLE"
[ -z "${VCPU:-}" ] || plugin+=",vcpu=$VCPU"
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
tr -d '\r' < "$log" | awk -v period="$SAMPLE" -v top="${TOP:-12}" -v ksyms="$syms/kernel" -v gsyms="$syms/go" \
  -v gotab=perftest -v rstab=grstream -f "$top/test/perf/insns/samples.awk"
