#!/usr/bin/env bash
# figures.sh: cmd/rstream/figures.sh (goverbs' rstream beside rdma-core's
# rstream, its blocking mode and TCP, at 64 B to 1 MiB) in one boot of the
# measurement rig: it builds cmd/rstream as the guest's grstream and boots
# with lib.sh's kernel command line, as the other comparisons here do.
#   test/perf/figures.sh                        # 6.1, rxe0 (10.0.2.15)
#   KERNEL=newest ADDR=10.0.3.15 test/perf/figures.sh   # siw0 on 7.x
#   ROUNDS=7 SIZES="64 4096" PAIRS="0 1" test/perf/figures.sh
# ROUNDS, SIZES, PAIRS, GENV, GSPIN and PAIR_TIMEOUT go to the guest's
# script (see its header); RIG_TIMEOUT bounds the boot (default 3600 s).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$top/cmd/rstream/figures.sh" "$work/figures.sh"
env=$(guest_env ROUNDS SIZES PAIRS GENV GSPIN PAIR_TIMEOUT)
# run.sh --go builds cmd/rstream for the guest's architecture (6.12-arm64
# too) as /rig/bin/rstream; the guest script runs it as grstream.
"$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$work" --go ./cmd/rstream --timeout "${RIG_TIMEOUT:-3600}" -- \
  "ln -sf rstream /rig/bin/grstream && $env sh /rig/bin/figures.sh ${ADDR:-10.0.2.15}"
