# shellcheck shell=bash
# Shared by the rig's host scripts (sourced, never run). Knows where things
# live, how to reach Debian's archive, and how to boot a guest.

RIG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(git -C "$RIG_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$RIG_DIR/../.." && pwd))
# Downloads and built images, keyed by package version (git-ignored).
RIG_CACHE=${RIG_CACHE:-$TOP/.cache/rig}
# Console logs and staged payloads of the last run (git-ignored).
RIG_OUT=${RIG_OUT:-$TOP/test/rig/out}

log() { echo "rig: $*" >&2; }
die() { echo "rig: error: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# The rig fetches Debian's kernels and rdma-core with apt-get and unpacks them
# with dpkg-deb; without those there is nothing to boot.
need_debian() {
  local miss=()
  command -v apt-get >/dev/null || miss+=(apt-get)
  command -v apt-cache >/dev/null || miss+=(apt-cache)
  command -v dpkg-deb >/dev/null || miss+=(dpkg-deb)
  [ ${#miss[@]} -eq 0 ] && return 0
  die "the kernel rig needs a Debian 12 (bookworm) host: it downloads Debian's kernels
  (linux-image-amd64, linux-image-6.12-amd64) and rdma-core with apt-get and unpacks them with
  dpkg-deb. Missing here: ${miss[*]}. Run the rig on Debian 12 (a container or VM is fine),
  or run only the host tests with: go test ./..."
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# ---- which apt: the host's for bookworm's kernels and the userland; a
# private configuration per suite set for the others ----
# APT_SET names the set apt_cache/apt_get/apt_update use: "host" (the host's
# own sources: bookworm, for 6.1, 6.12 and rdma-core) or a private set whose
# sources.list, lists and cache live in $RIG_CACHE/apt/SET/ (the host's apt
# configuration is never changed and its lists never read):
#   bullseye  bullseye + bullseye-security (5.10)
#   newest    trixie + trixie-backports + sid (the newest kernel Debian publishes)
# Releases are verified with the host's debian-archive-keyring.
APT_SET=host
RIG_MIRROR=${RIG_MIRROR:-http://deb.debian.org}
APT_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
apt_sources() {
  local o="[signed-by=$APT_KEYRING]" m=$RIG_MIRROR
  case $1 in
    bullseye) printf 'deb %s %s/debian bullseye main\ndeb %s %s/debian-security bullseye-security main\n' "$o" "$m" "$o" "$m" ;;
    newest) printf 'deb %s %s/debian %s main\n' "$o" "$m" trixie "$o" "$m" trixie-backports "$o" "$m" sid ;;
    # arm64 guests (build-arm64.sh): bookworm's arm64 packages, the same uploads as the host's amd64 ones
    bookworm-arm64) printf 'deb %s %s/debian %s main\n' "$o" "$m" bookworm "$o" "$m" bookworm-updates
                    printf 'deb %s %s/debian-security bookworm-security main\n' "$o" "$m" ;;
    *) return 1 ;;
  esac
}
apt_opts() {
  [ "$APT_SET" = host ] && return 0
  local d=$RIG_CACHE/apt/$APT_SET arch=amd64
  case $APT_SET in *-arm64) arch=arm64 ;; esac
  APT_O=(-o "Dir::Etc::SourceList=$d/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::Etc::Parts=$d/apt.conf.d" -o Dir::Etc::Preferences=/dev/null
    -o "Dir::Etc::PreferencesParts=$d/preferences.d" -o "Dir::State=$d/state"
    -o "Dir::State::status=$d/state/status" -o "Dir::Cache=$d/cache"
    -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o Acquire::Languages=none
    -o APT::Sandbox::User=root -o Debug::NoLocking=1)
}
apt_cache() { local APT_O=(); apt_opts; apt-cache ${APT_O[@]+"${APT_O[@]}"} "$@"; }
apt_get() { local APT_O=(); apt_opts; apt-get ${APT_O[@]+"${APT_O[@]}"} "$@"; }
# apt_init: create the private set's directories; its lists need apt_update.
apt_init() {
  [ "$APT_SET" = host ] && return 0
  local d=$RIG_CACHE/apt/$APT_SET
  [ -f "$APT_KEYRING" ] || die "no $APT_KEYRING: install debian-archive-keyring (test/rig/setup.sh does)"
  mkdir -p "$d"/{apt.conf.d,preferences.d,state/lists/partial,cache/archives/partial}
  : >> "$d/state/status"
  apt_sources "$APT_SET" > "$d/sources.list.tmp" && mv "$d/sources.list.tmp" "$d/sources.list"
}
apt_update() {
  log "apt-get update ($APT_SET)"
  if [ "$APT_SET" = host ]; then as_root apt-get update -qq >&2 || die "apt-get update failed"; return; fi
  apt_init
  apt_get update -qq >&2 || die "apt-get update of the private apt set $APT_SET ($RIG_CACHE/apt/$APT_SET) failed"
}

# rig_build SERIES: build.sh, or build-arm64.sh for an arm64 series (its own
# script, so that build.sh's hash, which keys every amd64 initramfs, stays).
rig_build() {
  if rig_arm64 "$1"; then "$RIG_DIR/build-arm64.sh" "$1"; else "$RIG_DIR/build.sh" "$1"; fi
}

# rig_arm64 SERIES: true if SERIES is an arm64 one (6.12-arm64), which
# build-arm64.sh builds and the arm64 payload runs on.
rig_arm64() { case $1 in *-arm64) return 0 ;; esac; return 1; }

# Series -> apt set and meta-package whose dependency is the newest image of
# that series ("newest": of all of the set's uploads, the highest version).
set_of() {
  case $1 in
    5.10) echo bullseye ;;
    newest) echo newest ;;
    6.12-arm64) echo bookworm-arm64 ;;
    6.1|6.12) echo host ;;
    *) return 1 ;;
  esac
}
meta_of() {
  case $1 in
    6.1|5.10|newest) echo linux-image-amd64 ;;
    *-arm64) echo "linux-image-$1" ;;  # 6.12-arm64 -> linux-image-6.12-arm64
    *) echo "linux-image-$1-amd64" ;;   # 6.12 -> linux-image-6.12-amd64
  esac
}

# shellcheck disable=SC2034
# resolve_kernel SERIES: sets KPKG KVER KDEBVER and KIMG (the image package
# and the packages it is split into on newer kernels: linux-binary-*,
# linux-modules-*, linux-base-<kver>: modules.order, modules.builtin) from the apt lists of the series' set (no network).
resolve_kernel() {
  local meta v best=''; meta=$(meta_of "$1")
  for v in $(apt_cache show "$meta" 2>/dev/null | awk '/^Version:/{print $2}'); do
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
  done
  [ -n "$best" ] || return 1
  # the host's set: the candidate (bookworm-security over bookworm), as ever
  [ "$APT_SET" = host ] && best=$(apt_cache policy "$meta" 2>/dev/null | awk '/Candidate:/{print $2}')
  KPKG=$(apt_cache depends "$meta=$best" 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$KPKG" ] || return 1
  KVER=${KPKG#linux-image-}; KVER=${KVER%-unsigned}
  KDEBVER=$(apt_cache show "$KPKG=$best" 2>/dev/null | awk '/^Version:/{print $2; exit}')
  [ -n "$KDEBVER" ] ||
    KDEBVER=$(apt_cache show --no-all-versions "$KPKG" 2>/dev/null | awk '/^Version:/{print $2; exit}')
  [ -n "$KDEBVER" ] || return 1
  KIMG="$KPKG $(apt_cache depends "$KPKG=$KDEBVER" 2>/dev/null |
    awk -v k="$KVER" '$1=="Depends:" && ($2=="linux-binary-"k || $2=="linux-modules-"k || $2=="linux-base-"k) {print $2}' | sort -u | tr '\n' ' ')"
}

# headers_deps KVER KDEBVER: the -common and kbuild packages that
# linux-headers-KVER=KDEBVER depends on (apt set APT_SET), one line each:
# "name op version" (Debian's relation, e.g. "= 6.1.192-2" or ">= 6.1.192-2"),
# or "name" alone for an unversioned dependency.
headers_deps() {
  apt_cache show "linux-headers-$1=$2" 2>/dev/null | awk '
    /^Depends:/ {
      sub(/^Depends: */, ""); n = split($0, d, /, */)
      for (i = 1; i <= n; i++) {
        sub(/ *\|.*/, "", d[i])   # the first of alternatives
        if (d[i] !~ /^linux-(headers-.*-common|kbuild-)/) continue
        if (match(d[i], /\(.*\)/)) {
          rel = substr(d[i], RSTART + 1, RLENGTH - 2); name = substr(d[i], 1, RSTART - 1)
          gsub(/ /, "", name); split(rel, r, / +/); print name, r[1], r[2]
        } else { gsub(/ /, "", d[i]); print d[i] }
      }
      exit
    }'
}

# dep_version NAME [OP VERSION]: the version of NAME that a dependency with
# Debian's relation OP VERSION takes from the apt set APT_SET: VERSION itself
# for "=", else the newest listed version the relation allows. The kbuild
# tools are a ">=" dependency of the headers because a later upload may
# replace them while the image stays: on 2026-11-28 bookworm-security listed
# linux-headers-6.1.0-56-amd64 only at 6.1.192-2 and linux-kbuild-6.1 only at
# 6.1.192-3, and asking for kbuild at the image's version failed the build.
dep_version() {
  local name=$1 op=${2:-} want=${3:-} v best='' cmp
  [ "$op" != = ] || { echo "$want"; return 0; }
  case $op in '') cmp='' ;; '>=') cmp=ge ;; '>>') cmp=gt ;; '<=') cmp=le ;; '<<') cmp=lt ;; *) return 1 ;; esac
  for v in $(apt_cache show "$name" 2>/dev/null | awk '/^Version:/{print $2}'); do
    [ -z "$cmp" ] || dpkg --compare-versions "$v" "$cmp" "$want" || continue
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
  done
  [ -n "$best" ] && echo "$best"
}

# candidates PKG...: "pkg=version ..." of the versions apt-get would fetch.
candidates() {
  local out
  out=$(apt_cache show --no-all-versions "$@" 2>/dev/null |
    awk '/^Package:/{p=$2} /^Version:/{printf "%s%s=%s", sep, p, $2; sep=" "}')
  [ "$(wc -w <<<"$out")" = $# ] && echo "$out"
}

# deb_of PKG VERSION: path of that .deb in the cache ("" if absent).
# apt-get download writes pkg_version_arch.deb with ':' spelled %3a.
# The architecture is the apt set's (an arm64 set's libc6 is not the host's).
deb_of() {
  local f a=amd64
  case $APT_SET in *-arm64) a=arm64 ;; esac
  for f in "$RIG_CACHE/debs/${1}_${2//:/%3a}_"{"$a",all}.deb; do [ -f "$f" ] && echo "$f" && return 0; done
  return 1
}

# fetch PKG=VERSION...: download the packages not yet in the cache.
fetch() {
  local want=() pv
  for pv in "$@"; do deb_of "${pv%%=*}" "${pv#*=}" >/dev/null || want+=("$pv"); done
  [ ${#want[@]} -eq 0 ] && return 0
  mkdir -p "$RIG_CACHE/debs"
  log "downloading ${want[*]}"
  # apt-get download as root warns that the _apt user cannot write here; harmless.
  ( cd "$RIG_CACHE/debs" && apt_get download -q "${want[@]}" 2>&1 ) |
    grep -vE 'Download is performed unsandboxed|^Get:|^Fetched' >&2 || true
  for pv in "${want[@]}"; do deb_of "${pv%%=*}" "${pv#*=}" >/dev/null || return 1; done
}

# rig_initramfs: the part of build.sh and build-arm64.sh that finishes a guest
# root and packs it. Reads ROOT (the guest root, its binaries and libraries
# in place), K (the kernel packages unpacked), KVER, MODDIR, MODULES and
# OPT_MODULES (modules the guest loads; the optional ones where the kernel
# has them), TMP and KDIR; writes the small /etc files, copies the modules and
# their dependencies (xz/zstd ones unpacked: busybox's modprobe cannot read
# them; depmod and modprobe read arm64 modules as well as amd64 ones), packs
# $KDIR/initramfs-KEY.cpio uncompressed (gunzip under TCG costs more than the
# copy), deletes the older ones of this kernel and sets INITRD.
# KEY: the caller's key (which hashes its script and this function).
rig_initramfs() {
  local key=$1 m ko rel dec
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ROOT/etc/passwd"
  printf 'root:x:0:\n' > "$ROOT/etc/group"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$ROOT/etc/hosts"
  echo rig > "$ROOT/etc/hostname"
  for m in "${MODULES[@]}"; do
    modprobe -d "$K" -S "$KVER" --show-depends "$m" || die "$KVER has no module $m"
  done > "$TMP/deps"
  for m in "${OPT_MODULES[@]}"; do
    modprobe -d "$K" -S "$KVER" --show-depends "$m" 2>/dev/null || true
  done >> "$TMP/deps"
  awk '$1=="insmod"{print $2}' "$TMP/deps" | sort -u | while read -r ko; do
    rel=${ko#"$MODDIR/"}
    case $rel in *.ko.xz) dec=(xz -dc); rel=${rel%.xz} ;; *.ko.zst) dec=(zstd -dc); rel=${rel%.zst} ;; *) dec=(cat) ;; esac
    mkdir -p "$ROOT/usr/lib/modules/$KVER/$(dirname "$rel")"
    "${dec[@]}" "$ko" > "$ROOT/usr/lib/modules/$KVER/$rel"
  done
  cp "$MODDIR"/modules.{order,builtin,builtin.modinfo} "$ROOT/usr/lib/modules/$KVER/"
  depmod -b "$ROOT" "$KVER"
  INITRD=$KDIR/initramfs-$key.cpio
  ( cd "$ROOT" && find . -print0 | LC_ALL=C sort -z |
    cpio --null -o -H newc --owner=0:0 --reproducible --quiet ) > "$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
  find "$KDIR" -name 'initramfs-*.cpio' ! -name "$(basename "$INITRD")" -delete
}

# ---- accelerator: KVM only where this very kernel has booted under it ----
# /dev/kvm can exist and still fail a guest: QEMU aborts setting MSRs on one
# host, and on another the vCPU starts and then stops with "KVM internal
# error. Suberror: 1" (at a lock cmpxchg16b) and sits silent. So a quick vCPU
# probe proves nothing: the verdict comes from the real boot. Without a
# verdict the boot runs under KVM and is watched: the guest's first line
# ("init started") proves KVM, and the verdict "kvm" is cached; a KVM internal
# error, a QEMU that ends first, or RIG_KVM_WAIT seconds of silence before it
# kill the guest at once, cache "tcg" and run the same boot again under TCG,
# saying so. A KVM internal error later in a run (verdict cached or not) does
# the same. Verdicts live in $RIG_CACHE/accel/, one file per host, QEMU and
# kernel (accel_key); delete them, or set RIG_REFRESH=1, to ask again.
# RIG_ACCEL=tcg|kvm forces a choice and caches nothing (a forced KVM that
# fails is a failed boot, not retried).

# accel_key VMLINUX: a name that changes when the host kernel, its CPU, the
# QEMU binary or the guest kernel does.
accel_key() {
  local q; q=$(command -v qemu-system-x86_64 || echo none)
  { uname -srvm
    awk -F': ' '/^(vendor_id|model name|cpu family|model|stepping|microcode|flags)[[:space:]]*:/ {print} /^$/ {exit}' /proc/cpuinfo 2>/dev/null
    cat /sys/module/kvm_intel/parameters/* /sys/module/kvm_amd/parameters/* 2>/dev/null
    "$q" --version 2>/dev/null | head -1
    stat -L -c '%n %s %Y' "$q" "$1" 2>/dev/null
  } | sha256sum | cut -c1-16
}

# accel_verdict_file VMLINUX: where the verdict for this host and kernel is kept.
accel_verdict_file() {
  local k; k=$(basename "$(dirname "$1")")
  echo "$RIG_CACHE/accel/${k}-$(accel_key "$1")"
}

# pick_accel VMLINUX: prints "tcg", "kvm" (verdict cached) or "kvm?" (no
# verdict yet: boot under KVM and watch it).
pick_accel() {
  # an arm64 guest on another architecture: only TCG can run it
  if [ "${RIG_GUEST_ARCH:-amd64}" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then echo tcg; return; fi
  case ${RIG_ACCEL:-auto} in
    tcg|kvm) echo "$RIG_ACCEL"; return ;;
  esac
  local dev=${RIG_KVM_DEV:-/dev/kvm}   # a knob for the unit test
  if ! [ -r "$dev" ] || ! [ -w "$dev" ]; then echo tcg; return; fi
  local f; f=$(accel_verdict_file "$1")
  if [ -z "${RIG_REFRESH:-}" ] && [ -f "$f" ]; then
    case $(head -c 3 "$f") in kvm) echo kvm; return ;; tcg) echo tcg; return ;; esac
  fi
  echo 'kvm?'
}

# accel_remember VMLINUX VERDICT [WHY]: cache a verdict (never when forced).
accel_remember() {
  [ -z "${RIG_ACCEL:-}" ] || return 0
  local f; f=$(accel_verdict_file "$1")
  mkdir -p "$(dirname "$f")"
  printf '%s %s\n' "$2" "${3:-}" > "$f.tmp.$$" && mv "$f.tmp.$$" "$f"
}

# rig_boot SERIES_ENV OVERLAY LOG TIMEOUT [qemu args...]
# Boots the kernel described by SERIES_ENV (written by build.sh) with its cached
# base initramfs plus the OVERLAY directory packed as a second archive (the
# kernel unpacks concatenated cpio archives in order; later files win).
# Streams the console to stdout (unless RIG_QUIET=1) and to LOG; kills the
# guest after TIMEOUT seconds, after RIG_STALL seconds of console silence, or after
# RIG_BEAT seconds without the guest's heartbeat (rig_qemu_once). Returns the
# guest command's status from its "RIG-EXIT: n" line; 124 if the host timeout
# killed the guest; 125 if the guest ended without one (panic, init died).
# Sets RIG_BOOT_WHY (why it failed, "" if it did not), RIG_BOOT_SECS (wall
# time), RIG_BOOT_ACCEL (tcg or kvm) and RIG_BOOT_NOTE (why KVM was given up
# for this boot, or why the boot ran twice; "" if neither) for the caller's report.
# A boot that ends (panic, stall, early exit) before the guest's work started
# is run once more (see rig_qemu).
# shellcheck disable=SC2034
rig_boot() {
  local envf=$1 overlay=$2 logf=$3 tmo=$4; shift 4
  local initrd rc VMLINUX INITRD ARCH=amd64
  # shellcheck disable=SC1090
  . "$envf"
  RIG_GUEST_ARCH=$ARCH   # build-arm64.sh's .env says ARCH=arm64
  mkdir -p "$RIG_OUT"
  initrd=$(mktemp "$RIG_OUT/initrd.XXXXXX")
  # Uncompressed: gunzip in a TCG guest costs more than the copy.
  { cat "$INITRD"
    ( cd "$overlay" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --owner=0:0 --quiet )
  } > "$initrd"
  rc=0
  rig_qemu "$VMLINUX" "$initrd" "$logf" "$tmo" "$@" || rc=$?
  rm -f "$initrd"
  return "$rc"
}

# rig_suite_boot SERIES_ENV OVERLAY LOG TIMEOUT: rig_boot for the suite (its
# OVERLAY holds rig/env and the tests), plus one more boot when the guest's
# kernel panicked after the tests started. A user program cannot make a correct
# kernel panic, and Debian's rxe has panicked under TCG mid-run (6.12: a corrupt
# slab under rxe_requester; 7.3.4 in CI, stop 69: "Fatal exception in
# interrupt" during cmd_perftest), so one such panic costs the tests that had
# not finished a second boot, not the run: the second boot skips those that
# finished (run-tests.sh's RIG_SKIP), whose results stay in LOG.panicked. It is
# never hidden: the panic's console tail goes to stdout, stderr says so and
# RIG_BOOT_NOTE names it for the per-kernel summary line. A second panic, and
# every other failure after a test started, stands. RIG_PANIC_RETRY=0 turns
# this off. Sets RIG_SUITE_PANIC (what the note says of the first boot's panic,
# "" when there was no retry) and RIG_SUITE_DONE (the names whose results are
# in LOG.panicked) besides rig_boot's variables (RIG_BOOT_SECS: both boots).
rig_suite_boot() {
  local envf=$1 ov=$2 logf=$3 tmo=$4 rc=0 secs note during why
  RIG_SUITE_DONE='' RIG_SUITE_PANIC=''
  rm -f "$logf.panicked"
  rig_boot "$envf" "$ov" "$logf" "$tmo" || rc=$?
  { [ "$rc" = 125 ] && [ -n "$RIG_BOOT_STARTED" ] && [ "${RIG_PANIC_RETRY:-1}" != 0 ]; } || return "$rc"
  case $RIG_BOOT_WHY in "Kernel panic"*) ;; *) return "$rc" ;; esac
  RIG_SUITE_DONE=$(tr -d '\r' < "$logf" | awk '$1=="RIG-RESULT:" {printf "%s ", $2}')
  during=$(tr -d '\r' < "$logf" | awk '$1=="RIG-START:" {n=$2} END {print n}')
  mv -f "$logf" "$logf.panicked"
  why="the guest kernel panicked during $during ($RIG_BOOT_WHY; console in $logf.panicked)"
  RIG_SUITE_PANIC=$why
  log "$(basename "$logf" .log): $why: booting once more for the tests that had not finished"
  console_tail "$logf.panicked" 80
  secs=$RIG_BOOT_SECS note=$RIG_BOOT_NOTE
  cp "$ov/rig/env" "$logf.env"
  printf 'export RIG_SKIP=%q\n' "$RIG_SUITE_DONE" >> "$ov/rig/env"
  rc=0
  rig_boot "$envf" "$ov" "$logf" "$tmo" || rc=$?
  mv -f "$logf.env" "$ov/rig/env"
  RIG_BOOT_SECS=$(awk -v a="$secs" -v b="$RIG_BOOT_SECS" 'BEGIN{printf "%.1f", a + b}')
  RIG_BOOT_NOTE="${note:+$note; }boot retried once: $why${RIG_BOOT_NOTE:+; $RIG_BOOT_NOTE}"
  return "$rc"
}

# rig_qemu VMLINUX INITRD LOG TIMEOUT [qemu args...]: rig_boot without the
# packing: one boot, under KVM or TCG as pick_accel says, retried under TCG
# when KVM fails (see above). Same status and RIG_BOOT_* variables.
# Boot retry: a guest that panicked, stalled or ended before its work started
# (before a line matching RIG_BOOT_MARK: by default init's "devices:" line,
# after which /rig/cmd runs; the suite sets it to its first "RIG-START:") has
# run nothing, and a boot-time fault of the kernel under TCG is not goverbs'
# (a 6.12 guest once hit "Oops: int3" in sched_clock_cpu 1.9 s into boot,
# boot-time text patching under TCG). Such a boot runs once more, same kernel,
# same command, saying so on stderr (the failed console is kept as LOG.boot-failed).
# A boot that failed after its work started is never retried: that would
# hide the flakes the rig is there to show. RIG_BOOT_RETRY=0 turns the retry
# off (pair.sh retries both of its guests together instead). Before the mark a
# console silent for RIG_BOOT_STALL seconds (default 300) is a stalled boot.
# shellcheck disable=SC2034
rig_qemu() {
  local vmlinux=$1 initrd=$2 logf=$3 tmo=$4; shift 4
  local accel t0 rc
  accel=$(pick_accel "$vmlinux")
  t0=$(now)
  RIG_BOOT_NOTE=
  rc=0
  rig_qemu_kvm "$accel" "$vmlinux" "$initrd" "$logf" "$tmo" "$@" || rc=$?
  if { [ "$rc" = 124 ] || [ "$rc" = 125 ]; } && [ -z "$RIG_BOOT_STARTED" ] && [ -z "$RIG_BOOT_FORCED" ] &&
     [ "${RIG_BOOT_RETRY:-1}" != 0 ]; then
    local why=$RIG_BOOT_WHY
    mv -f "$logf" "$logf.boot-failed"
    log "$(basename "$(dirname "$vmlinux")"): the guest's boot failed before its work started ($why; console in $logf.boot-failed): retrying the same boot once"
    RIG_BOOT_NOTE="${RIG_BOOT_NOTE:+$RIG_BOOT_NOTE; }boot retried once: the first ended before the guest's work started ($why)"
    accel=$(pick_accel "$vmlinux") rc=0
    local note=$RIG_BOOT_NOTE
    rig_qemu_kvm "$accel" "$vmlinux" "$initrd" "$logf" "$tmo" "$@" || rc=$?
    RIG_BOOT_NOTE="$note${RIG_BOOT_NOTE:+; $RIG_BOOT_NOTE}"
  fi
  RIG_BOOT_SECS=$(since "$t0")
  return "$rc"
}

# rig_qemu_kvm ACCEL VMLINUX INITRD LOG TIMEOUT [qemu args...]: one boot under
# ACCEL, run again under TCG when KVM let it down. Sets RIG_BOOT_ACCEL,
# RIG_BOOT_NOTE (why KVM was given up), RIG_BOOT_FORCED (a forced KVM failed:
# no retry of any kind) and, through rig_qemu_once, RIG_BOOT_WHY and
# RIG_BOOT_STARTED.
# shellcheck disable=SC2034
rig_qemu_kvm() {
  local accel=$1 vmlinux=$2 initrd=$3 logf=$4 tmo=$5; shift 5
  local t0 rc
  t0=$(now)
  RIG_BOOT_NOTE='' RIG_BOOT_FORCED=''
  rc=0
  rig_qemu_once "$accel" "$vmlinux" "$initrd" "$logf" "$tmo" "$@" || rc=$?
  if [ -n "$RIG_KVM_FAILED" ] && [ "${RIG_ACCEL:-}" = kvm ]; then
    RIG_BOOT_WHY="KVM failed (RIG_ACCEL=kvm forces it): $RIG_KVM_FAILED"; rc=125 RIG_BOOT_FORCED=1
  elif [ -n "$RIG_KVM_FAILED" ]; then
    RIG_BOOT_NOTE="KVM failed ($RIG_KVM_FAILED) after $(since "$t0")s; the same boot ran again under TCG"
    accel_remember "$vmlinux" tcg "$RIG_KVM_FAILED"
    mv -f "$logf" "$logf.kvm-failed"
    log "KVM failed: $RIG_KVM_FAILED (console in $logf.kvm-failed): retrying the same boot under TCG"
    accel=tcg rc=0
    rig_qemu_once tcg "$vmlinux" "$initrd" "$logf" "$tmo" "$@" || rc=$?
  elif [ "$accel" = 'kvm?' ] && [ -n "$RIG_BOOT_FIRST" ]; then
    accel_remember "$vmlinux" kvm "first line after ${RIG_BOOT_FIRST}s"
  fi
  RIG_BOOT_ACCEL=${accel%\?}
  return "$rc"
}

# rig_qemu_once ACCEL VMLINUX INITRD LOG TIMEOUT [qemu args...]: one QEMU run.
# Under KVM (ACCEL kvm or kvm?) it sets RIG_KVM_FAILED to the reason when KVM
# let the guest down (then the caller retries); RIG_BOOT_FIRST to the seconds
# until the guest's first line ("" if it never came); RIG_BOOT_STARTED to 1
# once the guest's work started (a line matching RIG_BOOT_MARK, or its
# RIG-EXIT line), "" if it never did.
# shellcheck disable=SC2034
rig_qemu_once() {
  local accel=$1 vmlinux=$2 initrd=$3 logf=$4 tmo=$5; shift 5
  local cpu=max rc t0 kvmwait=${RIG_KVM_WAIT:-10}
  local mark=${RIG_BOOT_MARK:-'^\[rig [0-9.]*s\] devices:'} bstall=${RIG_BOOT_STALL:-300}
  local beat=${RIG_BEAT-40} beatdir='' beatargs=()
  [ "$accel" = tcg ] || cpu=host
  RIG_KVM_FAILED='' RIG_BOOT_FIRST='' RIG_BOOT_STARTED=''
  # The guest's heartbeat (RIG_BEAT seconds; 0 or "" turns it off): init
  # appends its uptime to a file of this 9p share every 3 s, from user space,
  # so a guest whose kernel stopped running anything (a freeze with a silent
  # console, seen once under TCG in session 3) is found in RIG_BEAT seconds
  # rather than after RIG_STALL's console silence, which must outlast a
  # test's own timeout.
  if [ -n "$beat" ] && [ "$beat" != 0 ]; then
    beatdir=$(mktemp -d "${TMPDIR:-/tmp}/rigbeat.XXXXXX")
    beatargs=(-virtfs "local,path=$beatdir,mount_tag=rigbeat,security_model=none,id=rigbeat")
  fi
  # shellcheck disable=SC2054 # qemu options have commas
  local args=(-nodefaults -no-user-config -machine q35 -accel "${accel%\?}" -cpu "$cpu"
    -smp "${RIG_SMP:-2}" -m "${RIG_MEM:-1024}" -display none -serial stdio -no-reboot
    # qboot boots the uncompressed vmlinux through its PVH entry: no in-guest
    # decompression, which costs seconds under TCG.
    -bios /usr/share/qemu/qboot.rom -kernel "$vmlinux" -initrd "$initrd"
    # restrict=on: the guest reaches nothing outside the VM. ipv6=off: no
    # router advertisement (nothing here uses IPv6 beyond link-local GIDs).
    -nic user,model=virtio-net-pci,restrict=on,ipv6=off
    # no_timer_check: a starved TCG vCPU can fail the IO-APIC timer check
    # ("IO-APIC + timer doesn't work!", a panic at 0.04 s; seen with 5.10
    # and 6.1); virtual machines skip that check.
    -append "console=ttyS0 quiet loglevel=3 panic=-1 no_timer_check ${RIG_APPEND:-}"
    ${beatargs[@]+"${beatargs[@]}"} "$@")
  local qemu=qemu-system-x86_64
  if [ "${RIG_GUEST_ARCH:-amd64}" = arm64 ]; then
    # arm64 (build-arm64.sh): the virt board, its PL011 console, the Image
    # booted directly (no firmware); RIG_ARM64_CPU picks the CPU model.
    # pauth-impdef: pointer authentication with QEMU's cheap hash instead of
    # QARMA, which costs TCG much time.
    qemu=qemu-system-aarch64 cpu=${RIG_ARM64_CPU:-max,pauth-impdef=on}
    [ "$accel" = tcg ] || cpu=host
    # shellcheck disable=SC2054 # qemu options have commas
    args=(-nodefaults -no-user-config -machine virt -accel "${accel%\?}" -cpu "$cpu"
      -smp "${RIG_SMP:-2}" -m "${RIG_MEM:-1024}" -display none -serial stdio -no-reboot
      -kernel "$vmlinux" -initrd "$initrd"
      -nic user,model=virtio-net-pci,restrict=on,ipv6=off
      -append "console=ttyAMA0 quiet loglevel=3 panic=-1 ${RIG_APPEND:-}"
      ${beatargs[@]+"${beatargs[@]}"} "$@")
  fi
  t0=$(date +%s)
  : > "$logf"
  timeout -k 5 "$tmo" "$qemu" "${args[@]}" </dev/null > "$logf" 2>&1 &
  local pid=$! follow='' stalled='' tick='' lockup=
  # a background job ignores ^C: stop the guest when the script is stopped
  trap 'kill "$pid" 2>/dev/null; rm -f "$initrd"; [ -z "$beatdir" ] || rm -rf "$beatdir"; exit 130' INT TERM
  [ "${RIG_QUIET:-0}" = 1 ] || { tail -n +1 -f --pid="$pid" "$logf" & follow=$!; }
  # Poll fast while the guest boots (a run that ends at once, or a KVM
  # failure, is seen within 0.2 s), then once a second.
  # RIG_STALL: a guest whose console stays silent that long is hung (the
  # suite sets it above the per-binary timeout, whose panic would print).
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$tick" = 1 ] || [ $(( $(date +%s) - t0 )) -ge "$kvmwait" ]; then sleep 1; else sleep 0.2; fi
    if [ "$accel" != tcg ]; then
      if grep -q 'KVM internal error' "$logf"; then
        RIG_KVM_FAILED=$(tr -d '\r' < "$logf" | grep -m1 'KVM internal error')
      elif [ -z "$RIG_BOOT_FIRST" ]; then
        if grep -q '^\[rig [0-9.]*s\] init started' "$logf"; then
          RIG_BOOT_FIRST=$(( $(date +%s) - t0 )) tick=1
        elif [ $(( $(date +%s) - t0 )) -ge "$kvmwait" ]; then
          RIG_KVM_FAILED="no console line from the guest within ${kvmwait}s"
        fi
      fi
      if [ -n "$RIG_KVM_FAILED" ]; then kill "$pid" 2>/dev/null; break; fi
    fi
    # A guest kernel that keeps reporting a soft lockup (a task stuck in the
    # kernel, which no SIGKILL ends, while the watchdog keeps the console
    # busy) is hung too: RIG_LOCKUP seconds after its first report, kill it.
    if [ -z "$lockup" ]; then
      if grep -q 'watchdog: BUG: soft lockup' "$logf"; then lockup=$(date +%s); fi
    elif [ $(( $(date +%s) - lockup )) -gt "${RIG_LOCKUP:-180}" ]; then
      stalled=lockup; kill "$pid" 2>/dev/null
    fi
    if [ -n "${RIG_STALL:-}" ] && [ $(( $(date +%s) - $(stat -c %Y "$logf") )) -gt "$RIG_STALL" ]; then
      stalled=1; kill "$pid" 2>/dev/null   # timeout passes the TERM on to qemu
    fi
    # Judged only once the first beat came: before that the boot's own
    # stall rule holds, and a guest without 9p never beats at all.
    if [ -n "$beatdir" ] && [ -s "$beatdir/beat" ] &&
       [ $(( $(date +%s) - $(stat -c %Y "$beatdir/beat") )) -gt "$beat" ]; then
      stalled=beat; kill "$pid" 2>/dev/null
    fi
    # Until the guest's work starts, RIG_BOOT_STALL s of silence is a stalled
    # boot (rig_qemu runs it again); RIG_STALL is sized for the tests after.
    if [ -z "$RIG_BOOT_STARTED" ]; then
      if grep -qE "$mark" "$logf"; then
        RIG_BOOT_STARTED=1
      elif [ $(( $(date +%s) - $(stat -c %Y "$logf") )) -gt "$bstall" ]; then
        stalled=boot; kill "$pid" 2>/dev/null
      fi
    fi
  done
  rc=0; wait "$pid" || rc=$?
  trap - INT TERM
  [ -z "$follow" ] || wait "$follow" || true
  local lastbeat=''
  if [ -n "$beatdir" ]; then
    lastbeat=$(tail -n 1 "$beatdir/beat" 2>/dev/null) || true
    rm -rf "$beatdir"
  fi
  # QEMU ended under KVM before the guest said anything: an abort (KVM's MSR
  # setup failing is an assertion in QEMU), or an error before the boot.
  if [ "$accel" != tcg ] && [ -z "$RIG_KVM_FAILED" ] && [ -z "$RIG_BOOT_FIRST" ] &&
     ! grep -q '^\[rig [0-9.]*s\] init started' "$logf"; then
    RIG_KVM_FAILED="qemu ended (status $rc) before the guest's first line: $(tr -d '\r' < "$logf" | grep -v '^$' | tail -1 | cut -c1-160)"
  fi
  if [ "$accel" != tcg ] && [ -z "$RIG_BOOT_FIRST" ] && grep -q '^\[rig [0-9.]*s\] init started' "$logf"; then
    RIG_BOOT_FIRST=$(( $(date +%s) - t0 ))
  fi
  if [ -z "$RIG_BOOT_STARTED" ] && grep -qE "$mark|^RIG-EXIT: " "$logf"; then RIG_BOOT_STARTED=1; fi
  [ -z "$RIG_KVM_FAILED" ] || return 125
  if [ "$stalled" = boot ]; then
    RIG_BOOT_WHY="hung during boot: no console output for ${bstall}s before the guest's work started, killed by the host"
    return 124
  fi
  if [ "$stalled" = beat ]; then
    RIG_BOOT_WHY="hung: the guest's heartbeat stopped (none for ${beat}s; the last at ${lastbeat}s of guest uptime), killed by the host"
    return 124
  fi
  if [ "$stalled" = lockup ]; then
    RIG_BOOT_WHY="hung: the guest kernel still reports a soft lockup ${RIG_LOCKUP:-180}s after its first: $(tr -d '\r' < "$logf" | grep -m1 -o 'watchdog: BUG: soft lockup.*')"
    return 124
  fi
  if [ -n "$stalled" ]; then
    RIG_BOOT_WHY="hung: no console output for ${RIG_STALL}s, killed by the host"; return 124
  fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    RIG_BOOT_WHY="killed by the host timeout after ${tmo}s"; return 124
  fi
  local ex
  ex=$(tr -d '\r' < "$logf" | sed -n 's/^RIG-EXIT: \([0-9]*\)$/\1/p' | tail -1)
  if [ -z "$ex" ]; then
    RIG_BOOT_WHY=$(tr -d '\r' < "$logf" | grep -m1 -o 'Kernel panic.*') ||
      RIG_BOOT_WHY="guest ended without finishing its command (qemu status $rc)"
    return 125
  fi
  RIG_BOOT_WHY=""
  return "$ex"
}

# console_tail LOG [N]: the last lines of a guest console, for failure reports.
# digest LOG NAME: what failed in one binary's output, to print close to the
# summary (a CI log is long): the output of the tests that failed (-test.v
# names the running test in its "=== RUN/CONT/NAME" lines), their "--- FAIL"
# lines, and the head of a panic (a -test.timeout one lists the running tests).
# At most 60 lines, cut by awk itself: a reader that stops early (head) would
# kill awk with SIGPIPE, and under pipefail that status (141) ended suite.sh
# before its other kernels and its summary.
digest() {
  local sect; sect=$(mktemp)
  tr -d '\r' < "$1" | awk -v n="$2" '$1=="RIG-START:" {on = $2==n; next} $1=="RIG-RESULT:" {on=0} on' > "$sect"
  awk 'function out(l) { if (++shown <= 60) print "  | " l }
       NR == FNR { if (match($0, /--- FAIL: [^ ]+/)) failed[substr($0, RSTART + 10, RLENGTH - 10)] = 1; next }
       /^=== (RUN|CONT|NAME)/ { cur = $3; next }
       /--- FAIL: / { out($0); next }
       /^panic:/ { p = 8 }
       p > 0 { out($0); p--; next }
       (cur in failed) && !/^ *--- (PASS|SKIP)/ { out($0) }' "$sect" "$sect"
  rm -f "$sect"
}

console_tail() {
  echo "rig: ---- last ${2:-40} lines of the console ($1) ----"
  tr -d '\r' < "$1" | tail -n "${2:-40}" | sed 's/^/  | /'
  echo "rig: ----"
}

# console_fault LOG: the head of the kernel's last oops in LOG (from its first
# "BUG:", "Oops", "general protection fault", "Unable to handle" or "kernel
# BUG" line, 30 lines at most), else its last 20 lines: short enough to repeat
# after the suite's summary, where a CI log cut to its tail still shows it.
console_fault() {
  echo "rig: ---- the fault in the console ($1) ----"
  tr -d '\r' < "$1" | awk '{ l[NR] = $0 }
    /BUG:|Oops|general protection fault|Unable to handle|kernel BUG/ { if (!f || NR > last + 30) f = NR; last = NR }
    END { s = f ? f : (NR > 20 ? NR - 19 : 1); e = f ? f + 29 : NR
          for (i = s; i <= e && i <= NR; i++) print "  | " l[i] }'
  echo "rig: ----"
}

# make_overlay DIR CMDFILE: the per-boot part of the guest: /init, the guest
# scripts and the command to run. Callers add rig/bin and rig/tests.
make_overlay() {
  local d=$1
  mkdir -p "$d/rig/bin"
  cp "$RIG_DIR/guest/init" "$d/init"
  cp "$RIG_DIR/guest/veth-pair.sh" "$RIG_DIR/guest/run-tests.sh" "$d/rig/"
  cp "$2" "$d/rig/cmd"
  chmod 755 "$d/init" "$d/rig/"*.sh "$d/rig/cmd"
}

# write_env FILE VAR...: export the named host variables to the guest.
write_env() {
  local f=$1 v; shift
  : > "$f"
  for v in "$@"; do [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}" >> "$f"; done
  return 0
}
