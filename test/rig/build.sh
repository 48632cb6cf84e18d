#!/usr/bin/env bash
# build.sh SERIES: make sure the rig has a bootable kernel of SERIES and prints
# the path of its description, $RIG_CACHE/SERIES.env. The series:
#   5.10    Debian 11 (bullseye, + bullseye-security): linux-image-amd64 there
#   6.1     Debian 12 (the host's bookworm): linux-image-amd64
#   6.12    Debian 12: linux-image-6.12-amd64
#   newest  the newest kernel Debian publishes: the highest linux-image-amd64
#           of trixie, trixie-backports and sid
# Suites the host does not list are read through a private apt configuration
# under $RIG_CACHE/apt/ (lib.sh: APT_SET), never the host's sources. The
# .env holds:
#   KPKG KVER KDEBVER USERLAND  what it was built from (Debian package versions)
#   VMLINUX                     the uncompressed kernel, booted through PVH
#   INITRD                      the base initramfs: busybox, bash, iproute2,
#                               rdma-core userland, modules incl. an out-of-tree siw.ko
# Warm path: if the artifacts the .env names exist and were built by this very
# script, nothing else happens (no apt, no network). RIG_REFRESH=1 looks up the
# newest Debian upload again. Everything lives under $RIG_CACHE, keyed by version:
#   debs/                         downloaded .debs (linux-source is dropped once siw.ko is built)
#   <kver>_<debversion>/vmlinux, siw.ko, initramfs-<key>.cpio
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

SERIES=${1:?usage: build.sh 5.10|6.1|6.12|newest}
KSET=$(set_of "$SERIES") || die "unknown kernel series $SERIES: the rig has 5.10, 6.1, 6.12 and newest"
ENVF=$RIG_CACHE/$SERIES.env
# Guest userland, unpacked into the initramfs (never installed on the host).
USERLAND_PKGS=(ibverbs-utils perftest rdmacm-utils ibverbs-providers libibverbs1 librdmacm1
               libibumad3 libpci3 libnl-3-200 libnl-route-3-200)
# Kernel modules the guest loads. rdma_rxe needs the "crc32" shash and siw the
# "crc32c" one at run time, which modules.dep does not list.
MODULES=(virtio_pci virtio_net 9pnet_virtio 9p veth dummy ib_core ib_uverbs ib_umad rdma_ucm
         rdma_rxe siw)
# Those shash modules' names differ between kernels (7.x: crc32-cryptoapi):
# each one the kernel has goes in.
OPT_MODULES=(crc32_generic crc32-pclmul crc32c_generic crc32-cryptoapi crc32c-cryptoapi)

# The base initramfs is keyed by what went into it: this script, lib.sh's
# rig_initramfs and the versions.
key() { { cat "$RIG_DIR/build.sh"; declare -f rig_initramfs; echo "$KVER $KDEBVER $USERLAND"; } | sha256sum | cut -c1-16; }
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

# ---- which packages: the meta-package's dependency, all from one upload ----
# The kernel comes from the series' apt set, the userland from the host's.
resolve() {
  APT_SET=$KSET
  resolve_kernel "$SERIES" || return 1
  # linux-headers-<kver> needs its -common half (the same upload) and the
  # kbuild tools (that upload's or a later one: dep_version): HDRS is
  # "pkg=version ...".
  local name op ver v
  HDRS=''
  while read -r name op ver; do
    v=$(dep_version "$name" "$op" "$ver") || return 1
    HDRS+="$name=$v "
  done < <(headers_deps "$KVER" "$KDEBVER")
  [ -n "$HDRS" ] || return 1
  SRCSER=$(echo "$KVER" | cut -d. -f1,2)        # 6.1.0-56-amd64 -> 6.1
  APT_SET=host
  USERLAND=$(candidates "${USERLAND_PKGS[@]}") || return 1
}
if ! resolve; then
  APT_SET=$KSET; apt_update
  [ "$KSET" = host ] || { APT_SET=host; candidates "${USERLAND_PKGS[@]}" >/dev/null || apt_update; }
  resolve || die "no kernel for series $SERIES in the apt lists (apt set $KSET): the rig needs a
  Debian 12 (bookworm) host with bookworm-security enabled (packages $(meta_of "$SERIES"),
  linux-headers-*, linux-source-*, rdma-core's userland)"
fi
KDIR=$(kdir)
mkdir -p "$KDIR"
log "kernel $SERIES: $KPKG $KDEBVER (apt set $KSET)"

read -ra userland <<<"$USERLAND"
kneed=()
for p in $KIMG; do kneed+=("$p=$KDEBVER"); done
# fetch_all: the kernel's packages from its set, the userland from the host's.
fetch_all() {
  APT_SET=$KSET; fetch "${kneed[@]}" || return 1
  APT_SET=host; fetch "${userland[@]}"
}
fetch_or_update() {
  fetch_all && return 0
  # stale lists name versions the mirror no longer has
  APT_SET=$KSET; apt_update
  [ "$KSET" = host ] || { APT_SET=host; apt_update; }
  resolve || die "kernel series $SERIES vanished from the apt lists"
  fetch_all || die "could not download ${kneed[*]} ${userland[*]}: image, headers and source must be
  the same Debian upload ($KDEBVER); see apt-cache policy linux-source-$SRCSER"
}
fetch_or_update
# Newer Debian kernels may ship siw; the others get one built out of tree.
SIW_DEBIAN=
for p in $KIMG; do
  if dpkg-deb -c "$(deb_of "$p" "$KDEBVER")" | grep -qE '/siw\.ko(\.[a-z]+)?$'; then SIW_DEBIAN=$p; fi
done
if [ -z "$SIW_DEBIAN" ] && [ ! -f "$KDIR/siw.ko" ]; then
  kneed+=("linux-headers-$KVER=$KDEBVER" "linux-source-$SRCSER=$KDEBVER")
  for h in $HDRS; do kneed+=("$h"); done
  fetch_or_update
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rig-build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# kbuild_tools_run DIR: the kbuild host tools under DIR (modpost, objtool, ...)
# of a newer Debian than the host (newest: trixie's, which need glibc 2.38)
# run through that suite's own loader and libraries, unpacked beside them:
# each such binary becomes a script that starts it with the suite's ld.so.
kbuild_tools_run() {
  local f need=() sr=$TMP/sysroot ld libs pv out
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || continue
    # Module signing runs at modules_install, which the rig never does:
    # bullseye's sign-file and extract-cert need libcrypto.so.1.1, which a
    # bookworm host lacks, and nothing here runs them.
    case ${f##*/} in sign-file|extract-cert) continue ;; esac
    # ldd's whole output, not a pipe into grep -q: grep quitting at the first
    # match could SIGPIPE ldd, and pipefail then hid the match (a tool left
    # unwrapped at random: newest's modpost.real-lsb-64 once).
    out=$(ldd "$f" 2>&1 || true)
    case $out in *'not found'*) need+=("$f") ;; esac
  done < <(find "$1/usr/lib" -type f -print0)
  [ ${#need[@]} -gt 0 ] || return 0
  [ "$KSET" != host ] || die "kbuild tools of $KVER do not run on this host: $(ldd "${need[0]}" 2>&1 | grep -m1 'not found')"
  APT_SET=$KSET
  libs=$(candidates libc6 libelf1t64 zlib1g libzstd1) || die "no libc6/libelf1t64/zlib1g/libzstd1 in apt set $KSET"
  read -ra libs <<<"$libs"
  fetch "${libs[@]}" || die "could not download ${libs[*]}"
  for pv in "${libs[@]}"; do dpkg-deb -x "$(deb_of "${pv%%=*}" "${pv#*=}")" "$sr"; done
  ld=$(find "$sr" -name 'ld-linux-x86-64.so.2' | head -1)
  [ -n "$ld" ] || die "no ld-linux-x86-64.so.2 in ${libs[*]}"
  for f in "${need[@]}"; do
    mv "$f" "$f.bin"
    printf '#!/bin/sh\nexec %q --library-path %q %q "$@"\n' "$ld" \
      "$sr/usr/lib/x86_64-linux-gnu:$sr/lib/x86_64-linux-gnu" "$f.bin" > "$f"
    chmod 755 "$f"
  done
  log "siw.ko for $KVER: ${#need[@]} kbuild tools run with ${libs[*]}"
}

# ---- siw.ko: Debian builds without CONFIG_RDMA_SIW, so build it out of tree ----
if [ -z "$SIW_DEBIAN" ] && [ ! -f "$KDIR/siw.ko" ]; then
  ts=$(now)
  H=$TMP/hdr
  for p in "linux-headers-$KVER=$KDEBVER" $HDRS; do dpkg-deb -x "$(deb_of "${p%%=*}" "${p#*=}")" "$H"; done
  # The flavour's Makefile names the -common one (and, on newer kernels, its
  # own KBUILD_OUTPUT) by absolute path: point them here.
  sed -i "s|/usr/src/|$H/usr/src/|g" "$H/usr/src/linux-headers-$KVER/Makefile"
  kbuild_tools_run "$H"
  src=$(deb_of "linux-source-$SRCSER" "$KDEBVER")
  dpkg-deb --fsys-tarfile "$src" | tar -xO "./usr/src/linux-source-$SRCSER.tar.xz" | xz -dc |
    tar -x -C "$TMP" --wildcards "linux-source-$SRCSER/drivers/infiniband/sw/siw/*"
  M=$TMP/linux-source-$SRCSER/drivers/infiniband/sw/siw
  # CONFIG_DEBUG_INFO_BTF_MODULES= : 6.12's headers ship vmlinux, so kbuild would
  # want pahole for module BTF, which nothing here needs.
  # The compiler the kernel was built with if the host has it (6.1, 6.12:
  # gcc-12), else the host's gcc-12 (5.10 was built with gcc-10, newer kernels
  # with gcc-14): kbuild picks its flags by asking the compiler (cc-option).
  kcc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\([^ ]*\).*/\1/p' "$H/usr/src/linux-headers-$KVER/.config")
  cc=${RIG_KCC:-$kcc}
  command -v "$cc" >/dev/null || cc=gcc-12
  ccopts=()
  if [ "$cc" != "$kcc" ]; then
    log "siw.ko for $KVER: the kernel was built by $kcc, building with $cc"
    # gcc-14's -fmin-function-alignment=N (newest) is unknown to gcc-12;
    # without the flag kbuild uses -falign-functions=N: the same alignment.
    ccopts+=(CONFIG_CC_HAS_MIN_FUNCTION_ALIGNMENT=)
  fi
  make -s -C "$H/usr/src/linux-headers-$KVER" M="$M" CC="$cc" HOSTCC="$cc" CONFIG_RDMA_SIW=m \
    CONFIG_DEBUG_INFO_BTF_MODULES= ${ccopts[@]+"${ccopts[@]}"} modules -j"$(nproc)" 2>&1 |
    grep -v 'Skipping BTF' >&2 || true
  [ -f "$M/siw.ko" ] || die "building siw.ko for $KVER failed (see the make output above)"
  vm=$(modinfo -F vermagic "$M/siw.ko")
  [ "${vm%% *}" = "$KVER" ] || die "siw.ko vermagic '$vm' does not match $KVER"
  strip --strip-debug -o "$KDIR/siw.ko.tmp" "$M/siw.ko" && mv "$KDIR/siw.ko.tmp" "$KDIR/siw.ko"
  # The source .deb (~140 MB) only ever serves this build.
  rm -f "$src" "$TMP/hdr" -r
  log "siw.ko for $KVER built in $(since "$ts")s"
fi

# ---- unpack the image and the userland ----
ts=$(now)
K=$TMP/k U=$TMP/u ROOT=$TMP/root
for p in $KIMG; do dpkg-deb -x "$(deb_of "$p" "$KDEBVER")" "$K"; done
for pv in "${userland[@]}"; do dpkg-deb -x "$(deb_of "${pv%%=*}" "${pv#*=}")" "$U"; done
# Newer packages are usrmerged (usr/lib/modules); depmod and modprobe -d look in lib/modules.
[ -e "$K/lib" ] || { [ -d "$K/usr/lib" ] && ln -s usr/lib "$K/lib"; }
MODDIR=$K/lib/modules/$KVER
[ -n "$SIW_DEBIAN" ] || { mkdir -p "$MODDIR/extra" && cp "$KDIR/siw.ko" "$MODDIR/extra/"; }
depmod -b "$K" "$KVER"

# ---- vmlinux: the ELF inside the bzImage, found through the boot header ----
if [ ! -f "$KDIR/vmlinux" ]; then
  bz=$K/boot/vmlinuz-$KVER
  [ -f "$bz" ] || bz=$MODDIR/vmlinuz    # linux-binary-* (newer kernels)
  u32() { od -An -tu4 -j "$1" -N4 "$bz" | tr -d ' '; }
  setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
  start=$(( (setup_sects + 1) * 512 + $(u32 $((0x248))) ))   # payload_offset
  len=$(( $(u32 $((0x24c))) - 4 ))                           # payload_length minus the appended size
  payload() { dd if="$bz" bs=64K iflag=skip_bytes,count_bytes skip="$start" count="$1" status=none; }
  case $(payload 4 | od -An -tx1 | tr -d ' ') in
    fd377a58) unz=(xz -dc) ;;          # 6.1
    28b52ffd) unz=(zstd -dc) ;;        # 6.12
    1f8b*) unz=(gzip -dc) ;;
    *) die "$bz: unknown compression of the kernel payload" ;;
  esac
  payload "$len" | "${unz[@]}" > "$KDIR/vmlinux.tmp"
  [ "$(head -c 4 "$KDIR/vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
    die "$bz: extracted payload is not an ELF vmlinux"
  mv "$KDIR/vmlinux.tmp" "$KDIR/vmlinux"
fi

# ---- the guest root: usrmerged like the host, so ldd's paths fit ----
mkdir -p "$ROOT"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,run,tmp,mnt/host,root,var}
ln -s usr/bin "$ROOT/bin"; ln -s usr/sbin "$ROOT/sbin"; ln -s usr/lib "$ROOT/lib"; ln -s usr/lib64 "$ROOT/lib64"
ln -s /run "$ROOT/var/run"

# busybox for the basics (mount, modprobe, timeout, poweroff ...)
cp "$(readlink -f "$(command -v busybox)")" "$ROOT/usr/bin/busybox"
for a in $("$ROOT/usr/bin/busybox" --list); do
  [ -e "$ROOT/usr/bin/$a" ] || ln -s busybox "$ROOT/usr/bin/$a"
done

# rdma-core userland as packaged (bins, libs, provider plugins, /etc/libibverbs.d)
rm -rf "${U:?}/usr/share"
tar -C "$U" -cf - . | tar -C "$ROOT" -xf - --keep-directory-symlink

dest_of() {   # host or stage path -> path in the guest root (/lib -> /usr/lib)
  local p=${1#"$U"}
  case $p in /lib/*|/lib64/*|/bin/*|/sbin/*) p=/usr$p ;; esac
  echo "$p"
}
copy_file() {  # SRC [DEST-in-root]
  local d=${2:-$(dest_of "$1")}
  [ -e "$ROOT$d" ] && return 0
  mkdir -p "$ROOT$(dirname "$d")"
  cp -L "$1" "$ROOT$d"
}
LDP=$U/usr/lib/x86_64-linux-gnu:$U/lib/x86_64-linux-gnu
copy_libs() {  # the shared libraries an ELF needs, from the stage or the host
  { LD_LIBRARY_PATH=$LDP ldd "$1" 2>/dev/null || true; } |   # static ELFs: ldd says no
    awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' |
    while read -r lib; do copy_file "$lib"; done
}
# bash as /bin/sh: busybox-static's ash runs its own applets even when PATH has
# a better one, so `ip` would be busybox's, which has no veth.
rm -f "$ROOT/usr/bin/sh" "$ROOT/usr/bin/ip"
copy_file "$(readlink -f /bin/bash)" /usr/bin/bash; ln -s bash "$ROOT/usr/bin/sh"
copy_file "$(readlink -f /bin/ip)" /usr/sbin/ip
copy_file /usr/bin/rdma /usr/sbin/rdma
# glibc dlopen()s libgcc_s to unwind threads (rping aborts without it)
copy_file "$(readlink -f /usr/lib/x86_64-linux-gnu/libgcc_s.so.1)" /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
find "$ROOT/usr" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
  while IFS= read -r -d '' f; do
    if [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then copy_libs "$f"; fi
  done
rig_initramfs "$(key)"
VMLINUX=$KDIR/vmlinux
{
  printf 'KPKG=%q\nKVER=%q\nKDEBVER=%q\nUSERLAND=%q\n' "$KPKG" "$KVER" "$KDEBVER" "$USERLAND"
  printf 'VMLINUX=%q\nINITRD=%q\n' "$VMLINUX" "$INITRD"
} > "$ENVF.tmp"
mv "$ENVF.tmp" "$ENVF"
log "kernel $SERIES: initramfs $(du -h "$INITRD" | cut -f1) built in $(since "$ts")s (total $(since "$t0")s)"
echo "$ENVF"
