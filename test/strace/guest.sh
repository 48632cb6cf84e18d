#!/bin/bash
# guest.sh DEVICE: the in-guest half of compare.sh (runs from /rig/bin).
set -euo pipefail
dev=$1
cd /tmp
strace -f -qq -o /tmp/rc.trace verbs-rdmacore "$dev"
strace -f -qq -o /tmp/go.trace verbs-goverbs "$dev"
awk -f /rig/bin/split.awk /tmp/rc.trace | sort > /tmp/rc.count
awk -f /rig/bin/split.awk /tmp/go.trace | sort > /tmp/go.count
printf '%-19s %-44s %s\n' verb "rdma-core 44 (libibverbs)" goverbs
join -t'|' -a1 -a2 -e- -o 0,1.2,2.2 /tmp/rc.count /tmp/go.count |
  awk -F'|' '$1 != "end" {printf "%-19s %-44s %s\n", $1, $2, $3}'
