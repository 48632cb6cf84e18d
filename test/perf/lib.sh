# lib.sh: shell functions test/perf's scripts share (test/cost/compare.sh
# sources it too, for RIG_APPEND's default). Each script sources it
# from its own directory: on the host test/perf/, in the guest /rig/bin/,
# where the script copies it beside itself.

# The measurement rigs boot with "tsc=reliable nopku" unless RIG_APPEND is
# set (set it empty for the rig's own command line): tsc=reliable keeps one
# clocksource through a boot (7.3.4 switched from the TSC to the HPET
# part-way, session 29; 6.1 without it marks the TSC unstable at boot and
# runs on the HPET from the start, where a clock read is a syscall and an
# emulated device read: Go's time.Now 1.7-1.9 us against 0.2 us, and Go's
# runtime reads the clock far more often than rdma-core's tools do,
# session 49); nopku because QEMU's TCG flushes its whole soft TLB
# whenever the guest's PKRU changes, a cost hardware does not have that fell
# on goverbs' multi-threaded processes more than on perftest's (session 31,
# docs/COST.md). Both programs always share the boot.
: "${RIG_APPEND=tsc=reliable nopku}"
export RIG_APPEND

# guest_env VAR...: the set ones of the variables VAR as the environment
# prefix of a guest's command line (VAR='value' ..., each value quoted for
# the guest's shell), for test/rig/run.sh's command.
guest_env() {
  local v q out=()
  for v in "$@"; do
    [ -n "${!v:-}" ] || continue
    q=${!v//\'/\'\\\'\'} # a ' in the value closes, escapes and reopens the quote
    out+=("$v='$q'")
  done
  echo "${out[*]}"
}

# guest_arch: the guest's architecture (Go's GOARCH) for the rig's KERNEL:
# arm64 for an arm64 series (6.12-arm64), amd64 for the others.
guest_arch() { case ${KERNEL:-6.1} in *-arm64) echo arm64 ;; *) echo amd64 ;; esac; }

# amd64_only: stops the calling script ($0) with a clear message when KERNEL
# names an arm64 guest. The tracing and counting scripts build their guest programs
# for the host (go build, gcc) and lean on x86-only parts (rtt.sh's and
# xchg.sh's preload helpers, insns.sh's marker, valgrind's amd64 build in
# the cg scripts): in an arm64 guest they would fail with exec format errors.
amd64_only() {
  [ "$(guest_arch)" = amd64 ] && return 0
  echo "${0##*/}: KERNEL=$KERNEL is an arm64 guest; this script builds for and runs in amd64 guests only" >&2
  exit 2
}

# guest_go TOP OUT PKG [GOFLAGS...]: builds the Go main package PKG of the
# checkout TOP as a static binary for the guest's architecture into OUT.
guest_go() {
  local top=$1 out=$2 pkg=$3; shift 3
  ( cd "$top" && CGO_ENABLED=0 GOARCH=$(guest_arch) go build "$@" -o "$out" "$pkg" )
}

# guest_gcc OUT SRC [ARGS...]: compiles the C twin SRC (gcc -O2 -Wall, ARGS
# after the source: -libverbs -lrdmacm -lm) for the guest's architecture into
# OUT. On amd64 with the host's gcc and Debian's libibverbs-dev and
# librdmacm-dev (installed if missing); for an arm64 guest with Debian's
# cross compiler against the arm64 rdma-core of arm64_sysroot, the same
# upload as the guest's own libraries.
guest_gcc() {
  local out=$1 src=$2 sr lib; shift 2
  if [ "$(guest_arch)" = amd64 ]; then
    [ -f /usr/include/infiniband/verbs.h ] || apt-get install -y -q libibverbs-dev >/dev/null
    [ -f /usr/include/rdma/rdma_cma.h ] || apt-get install -y -q librdmacm-dev >/dev/null
    command -v gcc >/dev/null || apt-get install -y -q gcc >/dev/null
    gcc -O2 -Wall -o "$out" "$src" "$@"
    return
  fi
  command -v aarch64-linux-gnu-gcc-12 >/dev/null || apt-get install -y -q gcc-12-aarch64-linux-gnu >/dev/null
  [ -f /usr/aarch64-linux-gnu/include/stdio.h ] || apt-get install -y -q libc6-dev-arm64-cross >/dev/null
  sr=$(arm64_sysroot) || return 1
  lib=$sr/usr/lib/aarch64-linux-gnu
  # libnl's libraries are under /lib in bookworm's packages (not usrmerged)
  aarch64-linux-gnu-gcc-12 -O2 -Wall -I"$sr/usr/include" -o "$out" "$src" -L"$lib" \
    -Wl,-rpath-link,"$lib":"$sr/lib/aarch64-linux-gnu" "$@"
}

# arm64_sysroot: prints a folder holding Debian's arm64 rdma-core for
# linking (libibverbs-dev, librdmacm-dev and the libraries they link:
# headers and .so files), unpacked once under the rig's cache from the rig's
# arm64 apt set (test/rig/lib.sh), keyed by the packages' versions.
arm64_sysroot() (
  # shellcheck source=../rig/lib.sh
  . "$(dirname "${BASH_SOURCE[0]}")/../rig/lib.sh"
  APT_SET=bookworm-arm64
  pkgs=(libibverbs-dev librdmacm-dev libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200)
  apt_init
  pv=$(candidates "${pkgs[@]}") || { apt_update; pv=$(candidates "${pkgs[@]}"); } ||
    die "no ${pkgs[*]} in the arm64 apt set ($RIG_CACHE/apt/$APT_SET)"
  sr=$RIG_CACHE/sysroot-arm64-$(echo "$pv" | sha256sum | cut -c1-16)
  if [ ! -d "$sr" ]; then
    read -ra want <<<"$pv"
    fetch "${want[@]}" || die "could not download ${want[*]}"
    rm -rf "$sr.tmp"
    for p in "${want[@]}"; do dpkg-deb -x "$(deb_of "${p%%=*}" "${p#*=}")" "$sr.tmp"; done
    mv "$sr.tmp" "$sr"
  fi
  echo "$sr"
)

# perftest_tools TOP BIN: builds goverbs' cmd/perftest from the checkout
# TOP into BIN/perftest (for the guest's architecture) and links it under
# perftest's test names with a gv_ prefix (gv_ib_send_lat, ...): goverbs'
# tools run beside perftest's ib_* under names of their own, which the
# kernel's per-command counts also see.
perftest_tools() {
  guest_go "$1" "$2/perftest" ./cmd/perftest
  local t
  for t in send_lat write_lat read_lat atomic_lat send_bw write_bw read_bw atomic_bw; do
    ln -s perftest "$2/gv_ib_$t"
  done
  cp "$1/test/perf/lib.sh" "$2/lib.sh"
}

# xchg_pair TOP BIN [TAGS]: the two-QP loop's twins from the checkout TOP,
# test/perf/xchg/xchg.c (libibverbs) into BIN/xchg-c and goverbs'
# test/perf/xchg/goxchg (built with the build tags TAGS) into BIN/xchg-go.
xchg_pair() {
  gcc -O2 -Wall -o "$2/xchg-c" "$1/test/perf/xchg/xchg.c" -libverbs
  ( cd "$1" && CGO_ENABLED=0 go build -tags "${3:-}" -o "$2/xchg-go" ./test/perf/xchg/goxchg )
}

# slowloop_pair TOP BIN: one slow-path verb in a loop, as twins from the
# checkout TOP: test/perf/insns/slowloop.c (libibverbs, librdmacm) into
# BIN/slowloop-c and goverbs' test/perf/slowloop into BIN/slowloop.
slowloop_pair() {
  gcc -O2 -Wall -o "$2/slowloop-c" "$1/test/perf/insns/slowloop.c" -libverbs -lrdmacm
  ( cd "$1" && CGO_ENABLED=0 go build -o "$2/slowloop" ./test/perf/slowloop )
}

# perftest_base TOP BIN REV: goverbs' cmd/perftest as it was at the git
# revision REV of TOP, built into BIN/perftest-base and linked with a gb_
# prefix (gb_ib_send_bw, ...): a before/after pair in one boot.
perftest_base() {
  local src t
  src=$(mktemp -d)
  ( cd "$1" && git archive "$3" ) | tar -x -C "$src"
  ( cd "$src" && CGO_ENABLED=0 go build -o "$2/perftest-base" ./cmd/perftest )
  rm -rf "$src"
  for t in send_lat write_lat read_lat atomic_lat send_bw write_bw read_bw atomic_bw; do
    ln -s perftest-base "$2/gb_ib_$t"
  done
}

# median: the median of the numbers among the words on stdin, or nan.
median() {
  tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g |
    awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

# ahead LESS "A..." "B...": "k of n": of the runs where both lists (paired
# by position) have a figure, in how many A's is better than B's: smaller
# if LESS is 1 (a time), larger otherwise (a rate). A row's medians can
# trade places from boot to boot; a count near n or near 0 says the pairs
# agree.
ahead() {
  awk -v less="$1" -v a="$2" -v b="$3" 'BEGIN {
    na = split(a, x, " "); split(b, y, " ")
    for (i = 1; i <= na; i++) {
      if (x[i] !~ /^[0-9.]+$/ || y[i] !~ /^[0-9.]+$/ || x[i] + 0 <= 0 || y[i] + 0 <= 0) continue
      n++
      if ((less && x[i] + 0 < y[i] + 0) || (!less && x[i] + 0 > y[i] + 0)) k++
    }
    printf "%d of %d", k, n }'
}

# figure COLUMN: column COLUMN of the line on stdin, or "zero" for a figure
# of 0 (perftest's, now and then under TCG: its clock), which median then
# leaves out; a word (failed) passes through.
figure() {
  awk -v c="$1" '{print ($c + 0 > 0 || $c ~ /[a-z]/) ? $c : "zero"}'
}

# cg_tools BIN: valgrind (installed on the host if missing) and its static
# callgrind tool copied into BIN for a guest: BIN/valgrind, and BIN/vg for
# VALGRIND_LIB (Debian's libc is in the guest).
cg_tools() {
  command -v valgrind.bin >/dev/null || apt-get install -y -q valgrind >/dev/null
  mkdir -p "$1/vg"
  # valgrind is a shell wrapper around valgrind.bin; the tool is static
  cp "$(command -v valgrind.bin)" "$1/valgrind"
  cp /usr/libexec/valgrind/callgrind-amd64-linux /usr/libexec/valgrind/default.supp "$1/vg/"
}

# cg_files LOG OUT: the profiles a guest printed on its console (between
# "BEGIN-FILE name" and "END-FILE", gzip and base64) written into OUT.
cg_files() {
  local f
  for f in $(sed -n 's/^BEGIN-FILE //p' "$1" | tr -d '\r'); do
    awk -v f="$f" '$0 ~ "^BEGIN-FILE " f {on = 1; next} /^END-FILE/ {on = 0} on' "$1" | tr -d '\r\n' | base64 -d | gunzip > "$2/$f"
  done
}

# cg_top PROFILE N TOP: the TOP functions of a callgrind profile by their
# own instructions, each over N (a run's messages).
cg_top() {
  # (awk reads to the end: head would end the pipe early, and pipefail
  # would take its SIGPIPE for a failure)
  callgrind_annotate --inclusive=no "$1" 2>/dev/null |
    awk -v n="$2" -v top="$3" '/^ *[0-9,]+ / && seen++ && seen <= top + 1 {v = $1; gsub(",", "", v); f = $NF; if (f ~ /^\[/) f = $(NF - 1); sub(/.*\/goverbs\/goverbs\//, "", f); sub(/.*\/go\/src\//, "go/", f); printf "  %7.1f  %s\n", v / n, f}'
}
