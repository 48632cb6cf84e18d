#!/usr/bin/env bash
# compare.sh: count the syscalls each slow-path verb makes, goverbs beside
# rdma-core, under strace in the rig (6.1 by default; KERNEL=6.12).
#   test/strace/compare.sh [device]     (default rxe0)
# Builds verbs.c against Debian's libibverbs-dev and goverbs/ as a static Go
# binary, copies the host's strace (and its libraries) into the guest, runs
# both under `strace -f`, and prints one row per verb: the syscalls between
# its marker and the next, by name, for each. Go runtime syscalls (signal
# handling, futex, thread creation) are listed apart: they are not the verb's.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
dev=${1:-rxe0}
command -v strace >/dev/null || apt-get install -y -q strace >/dev/null
[ -f /usr/include/infiniband/verbs.h ] || apt-get install -y -q libibverbs-dev >/dev/null
command -v gcc >/dev/null || apt-get install -y -q gcc >/dev/null
bin=$(mktemp -d); trap 'rm -rf "$bin"' EXIT
gcc -O2 -o "$bin/verbs-rdmacore" "$top/test/strace/verbs.c" -libverbs
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/verbs-goverbs" ./test/strace/goverbs )
mkdir -p "$bin/stlib"
cp /usr/bin/strace "$bin/strace.real"
ldd /usr/bin/strace | awk '/=> \//{print $3}' | grep -v 'libc.so' | xargs -I{} cp -L {} "$bin/stlib/"
printf '#!/bin/sh\nLD_LIBRARY_PATH=/rig/bin/stlib exec /rig/bin/strace.real "$@"\n' > "$bin/strace"
chmod +x "$bin/strace"
cp "$top/test/strace/split.awk" "$top/test/strace/guest.sh" "$bin/"
"$top/test/rig/run.sh" --bin "$bin" -- "guest.sh $dev"
