#!/usr/bin/env bash
# no-kvm.sh: run a command as on a host without /dev/kvm.
#   test/rig/no-kvm.sh COMMAND [ARGS...]      e.g. test/rig/no-kvm.sh make test
# Issue 10 asks make test to pass both where /dev/kvm exists but cannot run
# the guest and where there is none. This host has the first kind; to be the
# second, the command runs in a private mount namespace (unshare -m, root
# only) whose /dev is a fresh tmpfs holding the usual nodes but no kvm. The
# host's /dev is untouched. The rig's own knob RIG_KVM_DEV would test only
# pick_accel; here QEMU, the rig and everything else see no /dev/kvm at all.
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "no-kvm.sh: needs root (a mount namespace and mknod)" >&2; exit 2; }
command -v unshare >/dev/null || { echo "no-kvm.sh: needs unshare (util-linux)" >&2; exit 2; }

# In the new namespace: a tmpfs over /dev with char devices made anew, the
# host's pts and shm bound in, then the command.
exec unshare -m --propagation private bash -euo pipefail -c '
  mount -t tmpfs -o mode=755 nokvm-dev /dev
  while read -r name major minor; do
    mknod -m 666 "/dev/$name" c "$major" "$minor"
  done <<< "null 1 3
zero 1 5
full 1 7
random 1 8
urandom 1 9
tty 5 0"
  mknod -m 600 /dev/console c 5 1
  mkdir -p /dev/pts /dev/shm /dev/net
  mount -t devpts -o newinstance,ptmxmode=666,mode=620 devpts /dev/pts
  ln -s pts/ptmx /dev/ptmx
  mount -t tmpfs -o mode=1777 shm /dev/shm
  mknod -m 666 /dev/net/tun c 10 200
  ln -s /proc/self/fd /dev/fd
  ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout; ln -s /proc/self/fd/2 /dev/stderr
  if [ -e /dev/kvm ]; then echo "no-kvm.sh: /dev/kvm is still there" >&2; exit 2; fi
  echo "no-kvm.sh: /dev has no kvm in this namespace; running: $*" >&2
  exec "$@"
' no-kvm "$@"
