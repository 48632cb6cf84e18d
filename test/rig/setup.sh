#!/usr/bin/env bash
# setup.sh: install the host packages the rig (and `go test -race`) needs, if
# any is missing. Quiet and quick when everything is there.
#   qemu-system-x86  boots the guests (qboot firmware comes with qemu-system-data)
#   qemu-system-arm  boots the arm64 guests (6.12-arm64: qemu-system-aarch64)
#   busybox-static cpio kmod xz-utils zstd
#                    build the initramfs: busybox applets, archive, depmod/modprobe,
#                    unpack 6.1 (xz) and 6.12 (zstd) kernels and modules
#   iproute2 bash    copied into the guest (busybox ip has no veth; busybox sh ignores PATH)
#   gcc-12 make binutils
#                    build siw.ko (Debian's kernels are built with gcc-12)
#   gcc-12-aarch64-linux-gnu
#                    cross-build siw.ko for 6.12-arm64 (Debian cross-builds its
#                    arm64 kernels with this very compiler)
#   gcc libc6-dev    cgo, which `go test -race` needs
#   debian-archive-keyring
#                    verifies the suites read through the rig's private apt
#                    configurations (bullseye for 5.10, trixie/sid for newest)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
PKGS=(qemu-system-x86 qemu-system-arm qemu-system-data busybox-static cpio kmod xz-utils zstd iproute2 bash
      gcc-12 gcc-12-aarch64-linux-gnu make binutils gcc libc6-dev git debian-archive-keyring)

need_debian
missing=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
  die "missing host packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})"
fi
log "installing ${missing[*]}"
install() { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
# a fresh machine may have no (or stale) package lists
install || { apt_update; install; } || die "apt-get install ${missing[*]} failed"
