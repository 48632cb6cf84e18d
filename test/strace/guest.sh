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
# join the two counts on the verb (busybox has no join(1))
awk -F'|' 'FNR == NR { rc[$1] = $2; order[++n] = $1; next }
  { go[$1] = $2; if (!($1 in rc)) order[++n] = $1 }
  END { for (i = 1; i <= n; i++) { v = order[i]; if (v == "end" || seen[v]++) continue
          printf "%-19s %-44s %s\n", v, (v in rc) ? rc[v] : "-", (v in go) ? go[v] : "-" } }' /tmp/rc.count /tmp/go.count
