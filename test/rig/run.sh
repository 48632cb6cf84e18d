#!/usr/bin/env bash
# run.sh: boot one rig kernel and run a shell command in it.
#   test/rig/run.sh [--kernel 5.10|6.1|6.12|newest|6.12-arm64] [--bin DIR] [--go PKGS] [--share DIR] [--timeout S] [--qemu ARG] -- 'command'
#     --kernel S    kernel series (default 6.1, or $KERNEL)
#     --bin DIR     copy DIR's files into the guest's PATH (/rig/bin); repeatable
#     --go PKGS     build Go main packages (CGO_ENABLED=0, the guest's GOARCH) into its PATH; repeatable,
#                   e.g. --go ./cmd/...
#     --share DIR   mount DIR read-write at /mnt/host over 9p (results come back)
#     --timeout S   host timeout for the whole boot (default 600, or $RIG_TIMEOUT)
#     --qemu ARG    one more QEMU argument; repeatable (test/perf/insns.sh loads its plugin so)
# The guest has rxe0, rxea, rxeb, siw0, rdma-core's tools and perftest; the
# command runs as root in /tmp with `ulimit -l unlimited`, GOVERBS_RIG=1 and
# GOVERBS_RIG_KERNEL set. Exit status: the command's; 124 if the guest hung,
# 125 if it died (panic) — both with the console's last lines.
# Examples:
#   test/rig/run.sh -- 'ibv_devinfo -v'
#   test/rig/run.sh --kernel 6.12 --go ./cmd/... -- 'ibvinfo'
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

series=${KERNEL:-6.1}; bins=(); gos=(); qargs=(); share=; tmo=${RIG_TIMEOUT:-600}
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case $1 in
    --kernel) series=$2; shift ;;
    --bin) bins+=("$2"); shift ;;
    --go) gos+=("$2"); shift ;;
    --share) share=$(cd "$2" && pwd); shift ;;
    --timeout) tmo=$2; shift ;;
    --qemu) qargs+=("$2"); shift ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
  shift
done
[ $# -gt 0 ] || usage

"$RIG_DIR/setup.sh"
envf=$(rig_build "$series")
mkdir -p "$RIG_OUT"
ov=$(mktemp -d "$RIG_OUT/overlay.XXXXXX")
trap 'rm -rf "$ov"' EXIT
printf '#!/bin/sh\n%s\n' "$*" > "$ov/cmd"
make_overlay "$ov" "$ov/cmd"
rm "$ov/cmd"
for d in ${bins[@]+"${bins[@]}"}; do cp -a "$d"/. "$ov/rig/bin/"; done
# shellcheck disable=SC1090 # the guest's architecture (6.12-arm64: arm64)
arch=$(ARCH=amd64; . "$envf"; echo "$ARCH")
for p in ${gos[@]+"${gos[@]}"}; do
  ( cd "$TOP" && GOARCH=$arch CGO_ENABLED=0 go build -o "$ov/rig/bin/" "$p" ) || die "go build $p failed"
done
extra=(${qargs[@]+"${qargs[@]}"})
[ -n "$share" ] && extra+=(-virtfs "local,path=$share,mount_tag=host0,security_model=none,id=host0")
# The console log is run-SERIES.log, unless another run of the same kernel
# holds it (a comparison script beside an A/B): then a log of its own, or
# each would read the other's guest output and exit status.
logf=$RIG_OUT/run-$series.log
exec 9>>"$logf.lock"
if command -v flock >/dev/null && ! flock -n 9; then
  logf=$(mktemp "$RIG_OUT/run-$series.XXXXXX.log")
fi
rc=0
rig_boot "$envf" "$ov" "$logf" "$tmo" ${extra[@]+"${extra[@]}"} || rc=$?
if [ -n "$RIG_BOOT_WHY" ]; then
  log "kernel $series: $RIG_BOOT_WHY"
  console_tail "$logf" >&2
fi
[ -z "$RIG_BOOT_NOTE" ] || log "kernel $series: $RIG_BOOT_NOTE"
log "kernel $series: exit $rc after ${RIG_BOOT_SECS}s ($RIG_BOOT_ACCEL); console in $logf"
exit "$rc"
