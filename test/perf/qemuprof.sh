#!/usr/bin/env bash
# qemuprof.sh: where the emulator's own time goes, by QEMU function, while
# the rig's guest runs goverbs' program and its rdma-core twin in turn in one
# TCG boot. Debian's QEMU has no symbols and its debug archive is not
# reachable here, so QEMU is built once from Debian's source of the
# installed qemu-system-x86 with its symbols (into $RIG_CACHE/qemu-dbg/,
# ~12 minutes on 2 cores) and started under the host's
# `perf record -e cpu-clock -k CLOCK_MONOTONIC`; each program's runs are cut
# out of the samples by the host's clock at the guest's console marks
# (test/perf/qemuprof: the stamps and the report).
#   test/perf/qemuprof.sh xchg            # goxchg beside xchg.c (test/perf/xchg):
#                                         # ROUNDS (4) runs of N (60000) iterations each
#   PIN=1 test/perf/qemuprof.sh xchg      # each program under taskset -c 1
#   VERB=ah test/perf/qemuprof.sh slow    # slowloop beside slowloop.c (test/perf/slowloop.sh's
#                                         # verbs), N1 (500) and N2 (2500) calls: per call
#   test/perf/qemuprof.sh guest FILE [PROGRAM...]   # your guest script (and the programs it runs,
#        in /rig/bin); it prints the marks itself:
#        echo QMARK start LABEL ROUND UNITS; ...; echo QMARK end LABEL ROUND
# The report (BY=sym, dso or thread; TOP rows) gives each side's wall time
# and the emulator's host CPU time (all its threads) per unit of work, then
# the rows by their difference from the first side: the translated guest
# code is one row, "[guest code]"; helper_lookup_tb_ptr and qht_lookup_custom
# are the lookups of the next translated block after a return or an
# indirect branch; pvm_irq_enable and other kernel symbols are the host
# kernel's work for QEMU (its threads' sleeps and wake-ups). The data stay
# in OUT (default test/perf/out/qemuprof, git-ignored): perf.data and
# lines.txt, for `perf script -i ... | qemuprof report -by ...` again.
# Knobs: KERNEL (6.1), DEV (rxe0), HZ (perf's sampling rate, 2000), OUT, RIG_APPEND
# (the guest's kernel command line, test/perf/lib.sh's default).
# TCG only (the profile is of QEMU's translator); amd64 guests.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
# shellcheck source=lib.sh
. "$top/test/perf/lib.sh" # the measurement rigs' kernel command line (RIG_APPEND)
amd64_only
RIG_CACHE=${RIG_CACHE:-$top/.cache/rig}
what=${1:-}
case $what in xchg | slow) ;; guest) [ -f "${2:-}" ] || { echo "qemuprof.sh guest FILE: no file ${2:-}" >&2; exit 2; } ;;
*) echo "usage: qemuprof.sh xchg | slow | guest FILE [PROGRAM...]" >&2; exit 2 ;; esac

need() { # command package
  command -v "$1" > /dev/null || apt-get install -y -q "$2" > /dev/null ||
    { echo "qemuprof.sh: needs $1 (Debian package $2)" >&2; exit 1; }
}
need perf linux-perf
need gcc gcc
need curl curl
need qemu-system-x86_64 qemu-system-x86

# qemu_dbg: the path of a QEMU built with symbols from the source of the
# installed package's version, building it the first time.
qemu_dbg() {
  local ver src dir m=${RIG_MIRROR:-http://deb.debian.org}
  ver=$(dpkg-query -W -f='${Version}' qemu-system-x86)
  src=${ver#*:} src=${src%+b[0-9]*} # no epoch, no binNMU suffix: the source's version
  dir=$RIG_CACHE/qemu-dbg/$src
  if [ -x "$dir/build/qemu-system-x86_64" ]; then echo "$dir/build/qemu-system-x86_64"; return; fi
  echo "qemuprof: building QEMU $src with symbols in $dir (once; ~12 minutes on 2 cores)" >&2
  apt-get install -y -q dpkg-dev meson ninja-build pkg-config python3 libglib2.0-dev libpixman-1-dev \
    libfdt-dev zlib1g-dev libslirp-dev libcap-ng-dev libattr1-dev > /dev/null ||
    { echo "qemuprof.sh: the build dependencies of QEMU did not install" >&2; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir/dl"
  local dsc=qemu_$src.dsc f
  curl -fsS -o "$dir/dl/$dsc" "$m/debian/pool/main/q/qemu/$dsc" ||
    { echo "qemuprof.sh: $m/debian/pool/main/q/qemu/$dsc is not there (is the installed QEMU Debian's current one?)" >&2; exit 1; }
  for f in $(awk '/^Files:/ {on = 1; next} /^[^ ]/ {on = 0} on && NF == 3 {print $3}' "$dir/dl/$dsc"); do
    curl -fsS -o "$dir/dl/$f" "$m/debian/pool/main/q/qemu/$f" || { echo "qemuprof.sh: could not fetch $f" >&2; exit 1; }
  done
  dpkg-source -x "$dir/dl/$dsc" "$dir/src" > "$dir/unpack.log" 2>&1 || { tail "$dir/unpack.log" >&2; exit 1; }
  mkdir -p "$dir/build"
  # The rig's devices only (q35, virtio-net on slirp, 9p for the heartbeat);
  # symbols at -O2, as Debian's build optimises.
  ( cd "$dir/build" && "$dir/src/configure" --target-list=x86_64-softmmu --enable-debug-info --disable-docs \
      --disable-werror --enable-slirp --enable-virtfs --disable-gtk --disable-sdl --disable-vnc --disable-opengl \
      --disable-spice --disable-usb-redir --disable-libusb --disable-xen --disable-capstone > ../configure.log 2>&1 &&
    ninja qemu-system-x86_64 > ../build.log 2>&1 ) ||
    { tail -20 "$dir/configure.log" "$dir/build.log" >&2 2> /dev/null; echo "qemuprof.sh: the QEMU build failed (logs in $dir)" >&2; exit 1; }
  echo "$dir/build/qemu-system-x86_64"
}
qemu=$(qemu_dbg)

out=${OUT:-$top/test/perf/out/qemuprof}
mkdir -p "$out"
bin=$(mktemp -d); wrap=$(mktemp -d); trap 'rm -rf "$bin" "$wrap"' EXIT
( cd "$top" && CGO_ENABLED=0 go build -o "$bin/qemuprof" ./test/perf/qemuprof )
pin=${PIN:+taskset -c $PIN}
dev=${DEV:-rxe0}
case $what in
xchg)
  [ -f /usr/include/infiniband/verbs.h ] || apt-get install -y -q libibverbs-dev > /dev/null
  xchg_pair "$top" "$bin"
  n=${N:-60000}
  cat > "$bin/guest.sh" << GUEST
for r in \$(seq ${ROUNDS:-4}); do
  echo QMARK start c \$r $n; $pin /rig/bin/xchg-c $dev $n 1; echo QMARK end c \$r
  echo QMARK start go \$r $n; $pin /rig/bin/xchg-go $dev $n 1; echo QMARK end go \$r
done
GUEST
  ;;
slow)
  [ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/rdma/rdma_cma.h ] ||
    apt-get install -y -q libibverbs-dev librdmacm-dev > /dev/null
  slowloop_pair "$top" "$bin"
  cat > "$bin/guest.sh" << GUEST
for r in \$(seq ${ROUNDS:-3}); do
  for n in ${N1:-500} ${N2:-2500}; do
    echo QMARK start c \$r.\$n \$n; $pin /rig/bin/slowloop-c $dev ${VERB:-ah} \$n ${ADDR:-10.0.2.15} > /dev/null; echo QMARK end c \$r.\$n
    echo QMARK start go \$r.\$n \$n; $pin /rig/bin/slowloop $dev ${VERB:-ah} \$n ${ADDR:-10.0.2.15} > /dev/null; echo QMARK end go \$r.\$n
  done
done
GUEST
  ;;
guest) cp "$2" "$bin/guest.sh"; shift 2; [ $# -eq 0 ] || cp "$@" "$bin/" ;;
esac

# The rig starts qemu-system-x86_64 from PATH: this one is the debug
# build under perf, with the firmware paths of Debian's package.
cat > "$wrap/qemu-system-x86_64" << WRAP
#!/bin/sh
exec perf record -q -k CLOCK_MONOTONIC -F ${HZ:-2000} -o "$out/perf.data" -- "$qemu" -L /usr/share/qemu -L /usr/lib/ipxe/qemu "\$@"
WRAP
chmod +x "$wrap/qemu-system-x86_64"
echo "qemuprof: goverbs at $(cd "$top" && git describe --always --dirty), $what, kernel ${KERNEL:-6.1}, $qemu"
PATH=$wrap:$PATH RIG_ACCEL=tcg "$top/test/rig/run.sh" --kernel "${KERNEL:-6.1}" --bin "$bin" \
  --timeout "${RIG_TIMEOUT:-1800}" -- 'sh /rig/bin/guest.sh' 2>&1 | "$bin/qemuprof" stamp > "$out/lines.txt" ||
  { tail -30 "$out/lines.txt"; echo "qemuprof.sh: the guest failed" >&2; exit 1; }
grep -a -E '^[0-9.]+ (rdma-core|goverbs) +loop' "$out/lines.txt" | cut -d' ' -f2- || true
perf script -i "$out/perf.data" -F tid,time,period,ip,sym,dso 2> /dev/null |
  "$bin/qemuprof" report -by "${BY:-sym}" -top "${TOP:-30}" "$out/lines.txt"
