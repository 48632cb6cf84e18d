#!/usr/bin/env bash
# build-arm64.sh SERIES: build.sh's twin for arm64 guests (lib.sh's rig_build
# hands every *-arm64 series to it). Makes sure the rig has a bootable arm64 kernel
# and prints the path of its description, $RIG_CACHE/SERIES.env. The series:
#   6.12-arm64  Debian 12's linux-image-6.12-arm64: the same upload as the
#               amd64 6.12 (both come from bookworm/bookworm-security)
# Everything arm64 (kernel, modules, rdma-core's tools, busybox, bash,
# iproute2 and the libraries they need) comes from the private apt set
# "bookworm-arm64" under $RIG_CACHE/apt/ (APT::Architecture=arm64): the host's
# apt sources and architectures are never changed and nothing is installed.
# Nothing runs the arm64 binaries on the host: the guest root is the packages
# unpacked (the dependency closure apt computes for an empty system), not
# ldd's view as on amd64. Debian ships no siw.ko for arm64 either: it is
# cross-built here as build.sh builds it for amd64 (linux-source-6.12's
# drivers/infiniband/sw/siw against linux-headers-<kver>-arm64 + -common, the
# host's amd64 linux-kbuild of the same upload, ARCH=arm64 with Debian's
# aarch64-linux-gnu-gcc-12, the compiler the kernel names in its .config;
# vermagic and ELF machine checked), cached as KDIR/siw.ko: the guest has
# rxe0 and siw0 as on amd64.
# The .env holds KPKG KVER KDEBVER USERLAND, ARCH=arm64, VMLINUX (the
# uncompressed arm64 Image, booted by qemu-system-aarch64 -machine virt) and
# INITRD. Warm path as build.sh: the files the .env names, built by this very
# script, mean no apt and no network.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

SERIES=${1:?usage: build-arm64.sh 6.12-arm64}
KSET=$(set_of "$SERIES") || die "unknown arm64 kernel series $SERIES: the rig has 6.12-arm64"
ENVF=$RIG_CACHE/$SERIES.env
# What the guest runs; apt adds their dependencies.
ROOT_PKGS=(ibverbs-utils perftest rdmacm-utils ibverbs-providers libibverbs1 librdmacm1 libibumad3
           busybox-static bash iproute2)
# Dependencies of those that matter only to an installed system (maintainer
# scripts, accounts, PAM, data): not unpacked.
SKIP_PKGS=" base-files debianutils mawk debconf passwd adduser libpam0g libpam-modules
  libpam-modules-bin libsemanage-common libsemanage2 libsepol2 libcap2-bin pci.ids "
MODULES=(virtio_pci virtio_net 9pnet_virtio 9p veth dummy ib_core ib_uverbs ib_umad rdma_ucm rdma_rxe siw)
OPT_MODULES=(crc32_generic crc32c_generic crc32-cryptoapi crc32c-cryptoapi)

key() { { cat "$RIG_DIR/build-arm64.sh"; declare -f rig_initramfs; echo "$KVER $KDEBVER $USERLAND"; } | sha256sum | cut -c1-16; }
kdir() { echo "$RIG_CACHE/${KVER}_${KDEBVER//:/_}"; }

if [ -z "${RIG_REFRESH:-}" ] && [ -f "$ENVF" ]; then
  # shellcheck disable=SC1090
  . "$ENVF"
  if [ -f "$VMLINUX" ] && [ "$INITRD" = "$(kdir)/initramfs-$(key).cpio" ] && [ -f "$INITRD" ]; then
    echo "$ENVF"; exit 0
  fi
fi

need_debian
t0=$(now)
# shellcheck disable=SC2034 # lib.sh's apt helpers read it
APT_SET=$KSET
# resolve: KPKG KVER KDEBVER KIMG and USERLAND (pkg=version of the closure).
resolve() {
  resolve_kernel "$SERIES" || return 1
  # shellcheck disable=SC2086 # SKIP_PKGS is a list of names
  USERLAND=$(apt_get -s -q install --no-install-recommends "${ROOT_PKGS[@]}" 2>/dev/null |
    awk -v skip="$(printf ' %s' $SKIP_PKGS) " '$1=="Inst" && index(skip, " "$2" ")==0 {v=$3; gsub(/[()]/, "", v); printf "%s%s=%s", sep, $2, v; sep=" "}')
  [ -n "$USERLAND" ]
}
if ! resolve; then
  apt_update
  resolve || die "no $SERIES kernel or arm64 userland in the private apt set $KSET ($RIG_CACHE/apt/$KSET)"
fi
KDIR=$(kdir)
mkdir -p "$KDIR"
log "kernel $SERIES: $KPKG $KDEBVER (apt set $KSET)"
read -ra userland <<<"$USERLAND"
kneed=()
for p in $KIMG; do kneed+=("$p=$KDEBVER"); done
fetch "${kneed[@]}" "${userland[@]}" || {
  apt_update; resolve || die "kernel series $SERIES vanished from the apt lists"
  read -ra userland <<<"$USERLAND"
  fetch "${kneed[@]}" "${userland[@]}" || die "could not download ${kneed[*]} ${userland[*]}"
}

# siw.ko: Debian builds without CONFIG_RDMA_SIW (on arm64 too), so build it out
# of tree as build.sh does, cross-compiled: linux-source's siw sources against
# the arm64 linux-headers (+ -common), with the host-arch linux-kbuild of the
# same upload (modpost, fixdep, ... run here) and Debian's cross gcc
# (gcc-12-aarch64-linux-gnu, setup.sh; the arm64 kernel was built by gcc-12).
SIW_DEBIAN=
for p in $KIMG; do
  if dpkg-deb -c "$(deb_of "$p" "$KDEBVER")" | grep -qE '/siw\.ko(\.[a-z]+)?$'; then SIW_DEBIAN=$p; fi
done
if [ -z "$SIW_DEBIAN" ] && [ ! -f "$KDIR/siw.ko" ]; then
  SRCSER=$(echo "$KVER" | cut -d. -f1,2)        # 6.12.117+deb12-arm64 -> 6.12
  # the arm64 headers need their -common half (arch all); the kbuild tools
  # they name (linux-kbuild-<ver>) must be the host's arch: they run here.
  # (at the versions the headers' Depends allow: dep_version in lib.sh)
  HDRS='' KBUILD='' KBUILD_REL=()
  while read -r name op ver; do
    case $name in
      linux-kbuild-*) KBUILD=$name KBUILD_REL=("$op" "$ver") ;;
      *) HDRS+="$name=$(dep_version "$name" "$op" "$ver") " ;;
    esac
  done < <(headers_deps "$KVER" "$KDEBVER")
  if [ -z "$HDRS" ] || [ -z "$KBUILD" ]; then
    die "no linux-headers-$KVER=$KDEBVER (or its -common/kbuild) in apt set $KSET"
  fi
  hneed=("linux-headers-$KVER=$KDEBVER" "linux-source-$SRCSER=$KDEBVER")
  for h in $HDRS; do hneed+=("$h"); done
  fetch "${hneed[@]}" || { apt_update; fetch "${hneed[@]}"; } ||
    die "could not download ${hneed[*]}: headers and source must be the kernel's upload ($KDEBVER)"
  APT_SET=host
  kbv=$(dep_version "$KBUILD" "${KBUILD_REL[@]}") || { apt_update; kbv=$(dep_version "$KBUILD" "${KBUILD_REL[@]}"); } ||
    die "no $KBUILD ${KBUILD_REL[*]} for the host (the kbuild tools of the arm64 headers)"
  fetch "$KBUILD=$kbv" || { apt_update; fetch "$KBUILD=$kbv"; } ||
    die "could not download the host's $KBUILD=$kbv (the kbuild tools of the arm64 headers)"
  KBUILD_DEB=$(deb_of "$KBUILD" "$kbv")
  APT_SET=$KSET
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rig-build-arm64.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
if [ -z "$SIW_DEBIAN" ] && [ ! -f "$KDIR/siw.ko" ]; then
  ts=$(now)
  H=$TMP/hdr
  for p in "linux-headers-$KVER=$KDEBVER" $HDRS; do dpkg-deb -x "$(deb_of "${p%%=*}" "${p#*=}")" "$H"; done
  dpkg-deb -x "$KBUILD_DEB" "$H"
  sed -i "s|/usr/src/|$H/usr/src/|g" "$H/usr/src/linux-headers-$KVER/Makefile"
  src=$(deb_of "linux-source-$SRCSER" "$KDEBVER")
  dpkg-deb --fsys-tarfile "$src" | tar -xO "./usr/src/linux-source-$SRCSER.tar.xz" | xz -dc |
    tar -x -C "$TMP" --wildcards "linux-source-$SRCSER/drivers/infiniband/sw/siw/*"
  M=$TMP/linux-source-$SRCSER/drivers/infiniband/sw/siw
  # The compiler the kernel was built with: Debian cross-builds its arm64
  # kernels, CONFIG_CC_VERSION_TEXT="aarch64-linux-gnu-gcc-12 (Debian 12.2.0-14) 12.2.0",
  # the very gcc-12-aarch64-linux-gnu the host installs.
  cfg=$H/usr/src/linux-headers-$KVER/.config
  kcc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\([^ ]*\).*/\1/p' "$cfg")
  kccv=$(sed -n 's/^CONFIG_GCC_VERSION=//p' "$cfg")
  case $kcc in aarch64-linux-gnu-*) cc=$kcc ;; *) cc=aarch64-linux-gnu-$kcc ;; esac
  cc=${RIG_KCC:-$cc}
  command -v "$cc" >/dev/null ||
    die "no $cc to build siw.ko for $KVER (built by $kcc): install gcc-12-aarch64-linux-gnu (test/rig/setup.sh)"
  ccv=$("$cc" -dumpfullversion | awk -F. '{printf "%d%02d%02d", $1, $2, $3}')
  [ "$ccv" = "$kccv" ] || log "siw.ko for $KVER: the kernel was built by gcc $kccv, building with $cc ($ccv)"
  # CONFIG_DEBUG_INFO_BTF_MODULES= : as build.sh (no pahole, no module BTF).
  make -s -C "$H/usr/src/linux-headers-$KVER" M="$M" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- \
    CC="$cc" HOSTCC=gcc-12 CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= modules -j"$(nproc)" 2>&1 |
    grep -v 'Skipping BTF' >&2 || true
  [ -f "$M/siw.ko" ] || die "building siw.ko for $KVER failed (see the make output above)"
  vm=$(modinfo -F vermagic "$M/siw.ko")
  [ "${vm%% *}" = "$KVER" ] || die "siw.ko vermagic '$vm' does not match $KVER"
  case $(od -An -tu2 -j 18 -N 2 "$M/siw.ko" | tr -d ' ') in
    183) ;;   # e_machine EM_AARCH64
    *) die "$M/siw.ko is not an aarch64 ELF" ;;
  esac
  aarch64-linux-gnu-strip --strip-debug -o "$KDIR/siw.ko.tmp" "$M/siw.ko" && mv "$KDIR/siw.ko.tmp" "$KDIR/siw.ko"
  # The source .deb (~140 MB) only serves these builds (build.sh drops it too).
  rm -rf "$H" "$src"
  log "siw.ko for $KVER built in $(since "$ts")s (vermagic $vm)"
fi
ts=$(now)
K=$TMP/k ROOT=$TMP/root
for p in $KIMG; do dpkg-deb -x "$(deb_of "$p" "$KDEBVER")" "$K"; done
[ -e "$K/lib" ] || { [ -d "$K/usr/lib" ] && ln -s usr/lib "$K/lib"; }
MODDIR=$K/lib/modules/$KVER
[ -n "$SIW_DEBIAN" ] || { mkdir -p "$MODDIR/extra" && cp "$KDIR/siw.ko" "$MODDIR/extra/"; }
depmod -b "$K" "$KVER"

# ---- the kernel: Debian's arm64 vmlinuz is a gzipped Image; QEMU boots the Image ----
if [ ! -f "$KDIR/Image" ]; then
  bz=$K/boot/vmlinuz-$KVER
  [ -f "$bz" ] || bz=$MODDIR/vmlinuz
  case $(head -c 2 "$bz" | od -An -tx1 | tr -d ' ') in
    1f8b) gzip -dc "$bz" > "$KDIR/Image.tmp" ;;
    *) cp "$bz" "$KDIR/Image.tmp" ;;
  esac
  # arm64 Image header: "ARM\x64" at offset 56
  [ "$(od -An -c -j 56 -N 3 "$KDIR/Image.tmp" | tr -d ' ')" = ARM ] ||
    die "$bz: not an arm64 Image"
  mv "$KDIR/Image.tmp" "$KDIR/Image"
fi

# ---- the guest root: the packages unpacked into a usrmerged tree ----
mkdir -p "$ROOT"/{usr/bin,usr/sbin,usr/lib,etc,proc,sys,dev,run,tmp,mnt/host,root,var}
ln -s usr/bin "$ROOT/bin"; ln -s usr/sbin "$ROOT/sbin"; ln -s usr/lib "$ROOT/lib"
ln -s /run "$ROOT/var/run"
U=$TMP/u
for pv in "${userland[@]}"; do dpkg-deb -x "$(deb_of "${pv%%=*}" "${pv#*=}")" "$U"; done
rm -rf "${U:?}/usr/share" "${U:?}/etc/init.d" "${U:?}/etc/cron"*
tar -C "$U" -cf - . | tar -C "$ROOT" -xf - --keep-directory-symlink
# busybox for the basics; its applet names are the host's busybox's (the
# same Debian package: the arm64 binary cannot run here to list them).
[ -f "$ROOT/usr/bin/busybox" ] || die "busybox-static:arm64 has no /bin/busybox"
for a in $(busybox --list); do
  [ -e "$ROOT/usr/bin/$a" ] || [ -e "$ROOT/usr/sbin/$a" ] || ln -s busybox "$ROOT/usr/bin/$a"
done
# bash as /bin/sh (busybox's ash prefers its own applets, and its ip has no veth)
ln -sf bash "$ROOT/usr/bin/sh"
[ -x "$ROOT/usr/bin/ip" ] || [ -x "$ROOT/usr/sbin/ip" ] || die "iproute2:arm64 has no ip"
[ -e "$ROOT/usr/lib/ld-linux-aarch64.so.1" ] || die "libc6:arm64 has no ld-linux-aarch64.so.1"
# ---- /etc, modules, pack: as on amd64 ----
rig_initramfs "$(key)"
VMLINUX=$KDIR/Image
{
  printf 'KPKG=%q\nKVER=%q\nKDEBVER=%q\nUSERLAND=%q\nARCH=arm64\n' "$KPKG" "$KVER" "$KDEBVER" "$USERLAND"
  printf 'VMLINUX=%q\nINITRD=%q\n' "$VMLINUX" "$INITRD"
} > "$ENVF.tmp"
mv "$ENVF.tmp" "$ENVF"
log "kernel $SERIES: initramfs $(du -h "$INITRD" | cut -f1) built in $(since "$ts")s (total $(since "$t0")s)"
echo "$ENVF"
