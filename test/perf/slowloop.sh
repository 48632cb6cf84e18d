#!/usr/bin/env bash
# slowloop.sh: guest instructions per slow-path command, goverbs beside
# rdma-core, counted by QEMU's TCG plugin (test/perf/insns/plugin.c) as
# insns.sh counts the fast path: the kernel's, goverbs' Go code and
# rdma-core's user code (program, libibverbs, provider, libc) apart.
#   test/perf/slowloop.sh                       # VERBS: query_device query_port query_gid pd open
#   VERBS="pd query_gid" SAMPLE=100 test/perf/slowloop.sh
#   VERBS=ah N1=500 N2=1500 test/perf/slowloop.sh   # create + destroy an AH (own GID)
#   VERBS="cm_id cm_resolve" test/perf/slowloop.sh   # rdma_cm, goverbs beside librdmacm
# Each side runs its loop (test/perf/slowloop, test/perf/insns/slowloop.c)
# with N1 and N2 calls (default 2000 and 6000) between marks; the
# difference over N2-N1 is one call (open, set-up and exit cancel). "pd" is
# an alloc and a dealloc, "cq" a create (256 entries, no channel) and a
# destroy, "mr" a registration of 4 KiB and its deregistration ("mr:BYTES"
# of an anonymous mapping of BYTES), "modify" an
# RC QP's RESET -> INIT -> RESET, "ah" an address handle to the port's own
# GID created and destroyed, "open" an open and a close of a context; "cm_id" a
# CREATE_ID and a DESTROY_ID on one event channel, "cm_resolve" an ID
# created, resolved (address and route, to ADDR: rxe0's 10.0.2.15) and
# destroyed, each event through the channel (librdmacm's rdma_get_cm_event,
# goverbs' reader goroutine); and two fast-path calls in straight loops:
# "poll_empty" a poll of an empty CQ (16 asked), "post_recv" a receive of
# one SGE into a QP in INIT (its queue holds 16,384: keep N2 at most that),
#   VERBS="poll_empty post_recv" DEV=siw0 N1=2000 N2=14000 test/perf/slowloop.sh
# DEV: the device (default rxe0). SAMPLE=US
# also samples where the host's time went, as insns.sh does. TCG only.
set -euo pipefail
if [ "${1:-}" = --guest ]; then
  seq=0 addr=${ADDR:-10.0.2.15}
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
        $prog "${DEV:-rxe0}" "$v" "$n" "$addr" || { echo "$prog $v $n failed" >&2; exit 1; }
        mark
        echo "ILABEL $((seq - 1)) $seq $v $side $n"
      done
    done
  done
  exit 0
fi

top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh" # slowloop_pair; the measurement rigs' kernel command line
amd64_only
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
command -v gcc >/dev/null || { echo "slowloop.sh: needs gcc (apt-get install gcc)" >&2; exit 1; }
[ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/rdma/rdma_cma.h ] ||
  apt-get install -y -q libibverbs-dev librdmacm-dev >/dev/null
gcc -O2 -shared -fPIC -pthread -fvisibility=hidden -Wall -Wextra -o "$bin/insns.so" "$top/test/perf/insns/plugin.c"
gcc -O2 -static -nostdlib -Wl,-Ttext-segment=0x13370000 -o "$bin/icmark" "$top/test/perf/insns/mark.c"
cp "$0" "$bin/slowloop.sh"
slowloop_pair "$top" "$bin"
echo "slowloop: goverbs at $(cd "$top" && git describe --always --dirty)"
env=()
for v in VERBS N1 N2 DEV ADDR SAMPLE GOMAXPROCS GODEBUG; do [ -n "${!v:-}" ] && env+=("$v='${!v}'"); done
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
tr -d '\r' < "$log" | awk -v period="$SAMPLE" -v top="${TOP:-12}" -v ksyms="$syms/kernel" -v gsyms="$syms/go" \
  -v gotab=slowloop -f "$top/test/perf/insns/samples.awk"
