#!/usr/bin/env bash
# suite.sh: run the module's rig tests on every rig kernel, one boot per kernel.
#   test/rig/suite.sh [--kernels "5.10 6.1 6.12 newest 6.12-arm64"] [--tools PKGS]...
# Rig tests are the packages whose tests import internal/rigtest. Each is built
# on the host as a static test binary (CGO_ENABLED=0 go test -c), next to a
# copy of its testdata/, and run in the guest from that directory with -test.v.
# --tools builds Go main packages into the guest's PATH (e.g. ./cmd/...).
# Knobs (environment): KERNELS, RIG_RUN (-test.run filter), RIG_TEST_TIMEOUT
# (seconds per binary, default 600 like go test), RIG_TEST_ARGS (more test
# flags), RIG_TIMEOUT (host timeout per boot; default leaves every binary its
# time), RIG_STALL (seconds of console silence that mean a hung guest; a
# frozen guest is found sooner by its heartbeat, RIG_BEAT in lib.sh),
# RIG_RACE (packages also run built with -race; default ./provider/rxe),
# RIG_PKGS (only these rig-test packages, e.g. "./rdmacm ./rsocket"; default all).
# Prints one line per binary and kernel, then "N passed, N failed"; exits
# non-zero if anything failed, hung or did not build.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

kernels=${KERNELS:-5.10 6.1 6.12 newest 6.12-arm64}; tools=()
while [ $# -gt 0 ]; do
  case $1 in
    --kernels) kernels=$2; shift ;;
    --tools) tools+=("$2"); shift ;;
    *) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2 ;;
  esac
  shift
done
t_all=$(now)
"$RIG_DIR/setup.sh"
# ---- kernels: the first built now, the others behind it ----
# On a cold cache a kernel takes ~90-120 s of CPU (downloads, siw.ko, the
# initramfs). The first is built here; the others are built one after
# another in the background at the lowest CPU priority (nice 19) while the
# payload is built and the first guests run, which leave a third of the
# host's CPU time idle (62% busy on two cores, session 63): the guests
# lose almost nothing to them. Each boot waits for its own kernel. A warm
# cache builds nothing (~0.1 s a kernel).
read -ra klist <<<"$kernels"
[ ${#klist[@]} -gt 0 ] || die "no kernels to run"
mkdir -p "$RIG_OUT"
bdir=$RIG_OUT/builds
rm -rf "$bdir"; mkdir -p "$bdir"
bgpid=''
cleanup() {
  [ -z "$bgpid" ] || kill -- -"$bgpid" 2>/dev/null || kill "$bgpid" 2>/dev/null || true
  rm -f "${digests:-}" "${panics:-}"
}
trap cleanup EXIT
tb=$(now)
envs=("$(rig_build "${klist[0]}")") || die "could not build kernel ${klist[0]}"
builds=("$(since "$tb")")   # ~0 s warm; the cold figure includes the downloads
if [ ${#klist[@]} -gt 1 ]; then
  # Kernel I goes to $bdir/I.{env,log,secs,rc}. setsid: the builder leads
  # its own process group, which cleanup stops with everything under it.
  setsid bash -c '
    . "$1"; bdir=$2; shift 2
    renice -n 19 -p $$ > /dev/null
    i=1
    for k in "$@"; do
      tb=$(now) rc=0
      rig_build "$k" > "$bdir/$i.env" 2> "$bdir/$i.log" || rc=$?
      since "$tb" > "$bdir/$i.secs"
      echo "$rc" > "$bdir/$i.rc"   # last: kernel_ready waits for it
      i=$((i + 1))
    done' _ "$RIG_DIR/lib.sh" "$bdir" "${klist[@]:1}" &
  bgpid=$!
fi
# kernel_ready I: waits for kernel I's background build; its log goes to
# stderr as if built in the foreground. Sets envs[I] and builds[I], or
# returns 1 if it did not build.
kernel_ready() {
  [ "$1" -gt 0 ] || return 0
  while [ ! -f "$bdir/$1.rc" ]; do
    kill -0 "$bgpid" 2>/dev/null || break
    sleep 1
  done
  cat "$bdir/$1.log" >&2 2>/dev/null || true
  builds[$1]=$(cat "$bdir/$1.secs" 2>/dev/null || echo '?')
  [ "$(cat "$bdir/$1.rc" 2>/dev/null)" = 0 ] || return 1
  envs[$1]=$(cat "$bdir/$1.env")
}

# ---- the payload: guest scripts, tools, test binaries ----
ov=$RIG_OUT/payload
rm -rf "$ov"
printf '#!/bin/sh\nexec sh /rig/run-tests.sh\n' > "$RIG_OUT/cmd"
make_overlay "$ov" "$RIG_OUT/cmd"
# The rig tests' own knobs pass through too (test/rig/README.md, "Knobs").
write_env "$ov/rig/env" RIG_RUN RIG_TEST_TIMEOUT RIG_TEST_ARGS GOVERBS_COMPARE \
  RDMACM_TEST_CONNS RDMACM_TEST_INFLIGHT RDMACM_SIW_FIRST RDMACM_DEBUG GOVERBS_SIW_NUDGE RSTREAM_SIW_ROUNDS RPING_SIW_ROUNDS PERFTEST_SIW_ROUNDS
cd "$TOP"
for p in ${tools[@]+"${tools[@]}"}; do
  CGO_ENABLED=0 go build -o "$ov/rig/bin/" "$p" || die "go build $p failed"
done
mod=$(go list -m)
names=(); broken=(); rigpkgs=()
while IFS=$'\t' read -r pkg dir imports; do
  case " $imports " in *" $mod/internal/rigtest "*) ;; *) continue ;; esac
  rel=${pkg#"$mod"}; rel=${rel#/}; name=${rel//\//_}; name=${name:-goverbs}
  if [ -n "${RIG_PKGS:-}" ]; then
    case " $RIG_PKGS " in *" ./$rel "*|*" $pkg "*) ;; *) continue ;; esac
  fi
  mkdir -p "$ov/rig/tests/$name"
  if ! CGO_ENABLED=0 go test -c -o "$ov/rig/tests/$name/$name.test" "$pkg"; then
    broken+=("$name"); rm -rf "${ov:?}/rig/tests/$name"; continue
  fi
  [ -d "$dir/testdata" ] && cp -a "$dir/testdata" "$ov/rig/tests/$name/"
  names+=("$name"); rigpkgs+=("$pkg")
done < <(go list -e -f '{{.ImportPath}}{{"\t"}}{{.Dir}}{{"\t"}}{{join .TestImports " "}} {{join .XTestImports " "}}' ./...)
# The packages in RIG_RACE also run built with the race detector, to test
# their concurrency (concurrent posters on one QP, CQ waiters) against the
# real kernel. -race needs cgo, so these binaries link the guest's glibc
# (the same Debian release as the host's).
for pkg in ${RIG_RACE-./provider/rxe}; do
  rel=${pkg#./}; name=${rel//\//_}_race
  mkdir -p "$ov/rig/tests/$name"
  if ! CGO_ENABLED=1 go test -race -c -o "$ov/rig/tests/$name/$name.test" "$pkg"; then
    broken+=("$name"); rm -rf "${ov:?}/rig/tests/$name"; continue
  fi
  [ -d "$pkg/testdata" ] && cp -a "$pkg/testdata" "$ov/rig/tests/$name/"
  names+=("$name")
done
[ ${#names[@]} -gt 0 ] || [ ${#broken[@]} -gt 0 ] || die "no rig tests: no package's tests import $mod/internal/rigtest"
log "rig tests: ${names[*]-none}${broken[*]+ (did not build: ${broken[*]})}"
# arm64 kernels (6.12-arm64, build-arm64.sh) boot their own payload: the same
# guest scripts and settings, the tools and the rig tests of RIG_ARM64_PKGS
# built with GOARCH=arm64 (no -race: it needs cgo, an arm64 C toolchain).
# The default, "all", is every rig-test package (the same set as the amd64
# kernels, RIG_PKGS applied) and ./doorbell: no rig test, but its arm64
# assembly (barriers, MMIO stores) runs on an arm64 CPU only here.
ov64=$RIG_OUT/payload-arm64; names64=(); broken64=()
rm -rf "$ov64"
arm64=''
for k in "${klist[@]}"; do if rig_arm64 "$k"; then arm64=1; fi; done
if [ -n "$arm64" ]; then
  make_overlay "$ov64" "$RIG_OUT/cmd"
  cp "$ov/rig/env" "$ov64/rig/env"
  for p in ${tools[@]+"${tools[@]}"}; do
    GOARCH=arm64 CGO_ENABLED=0 go build -o "$ov64/rig/bin/" "$p" || die "go build $p (arm64) failed"
  done
  pkgs64=${RIG_ARM64_PKGS-all}
  [ "$pkgs64" != all ] || pkgs64="${rigpkgs[*]-} ./doorbell"
  for pkg in $pkgs64; do
    rel=${pkg#"$mod"}; rel=${rel#./}; rel=${rel#/}; name=${rel//\//_}; name=${name:-goverbs}
    mkdir -p "$ov64/rig/tests/$name"
    if ! GOARCH=arm64 CGO_ENABLED=0 go test -c -o "$ov64/rig/tests/$name/$name.test" "$pkg"; then
      broken64+=("$name"); rm -rf "${ov64:?}/rig/tests/$name"; continue
    fi
    d=$(go list -f '{{.Dir}}' "$pkg")
    [ -d "$d/testdata" ] && cp -a "$d/testdata" "$ov64/rig/tests/$name/"
    names64+=("$name")
  done
  log "arm64 rig tests: ${names64[*]-none}${broken64[*]+ (did not build: ${broken64[*]})}"
fi

# ---- one boot per kernel ----
T=${RIG_TEST_TIMEOUT:-1200}
# Only a hung guest outlasts these: a hung test ends at its -test.timeout (T)
# with a goroutine dump, so console silence past T + 60 s means the guest hung.
RIG_STALL=${RIG_STALL:-$((T + 60))}
# A boot that ends before its first RIG-START line (no test ran: a kernel
# that panicked during boot under TCG, a stall) is run once more by rig_boot,
# saying so; one whose kernel panicked after a test started boots once more
# for the tests that had not finished (lib.sh's rig_suite_boot); any other end
# after a test started is a failure as it stands.
# shellcheck disable=SC2034 # read by lib.sh's rig_qemu_once
RIG_BOOT_MARK='^RIG-START: '
pass=0; fail=0; summary=(); boots=()
# Each failure's digest is printed when its kernel's boot ends and again
# after the summary: a CI log cut to its tail still shows why.
digests=$(mktemp); panics=$(mktemp)   # removed by cleanup
for ((ki = 0; ki < ${#klist[@]}; ki++)); do
  kpass=$pass kfail=$fail
  if ! kernel_ready "$ki"; then
    # every test of that kernel fails, and the other kernels still run
    k=${klist[$ki]} kn=(${names[@]+"${names[@]}"})
    if rig_arm64 "$k"; then kn=(${names64[@]+"${names64[@]}"}); fi
    [ ${#kn[@]} -gt 0 ] || kn=(none)
    for n in "${kn[@]}"; do
      fail=$((fail + 1)); summary+=("$(printf '%-4s %-24s %-24s %s' FAIL "$n" "$k" "kernel $k did not build")")
    done
    echo "rig: could not build kernel $k (its build log is above the summary)" | tee -a "$digests" >&2
    boots+=("$k: ${#kn[@]} failed: the kernel did not build (${builds[$ki]}s)")
    continue
  fi
  envf=${envs[$ki]}
  kov=$ov knames=(${names[@]+"${names[@]}"}) kbroken=(${broken[@]+"${broken[@]}"})
  if grep -q '^ARCH=arm64$' "$envf"; then
    kov=$ov64 knames=(${names64[@]+"${names64[@]}"}) kbroken=(${broken64[@]+"${broken64[@]}"})
  fi
  ktmo=${RIG_TIMEOUT:-$((120 + ${#knames[@]} * (T + 40)))}
  ready='' RIG_BOOT_SECS='' RIG_BOOT_ACCEL='' RIG_BOOT_NOTE='' RIG_SUITE_PANIC='' RIG_SUITE_DONE=''
  # shellcheck disable=SC1090
  KVER=$(. "$envf"; echo "$KVER")
  logf=$RIG_OUT/console-$KVER.log
  rc=0
  if [ ${#knames[@]} -gt 0 ]; then
    log "booting $KVER (host timeout ${ktmo}s)"
    rig_suite_boot "$envf" "$kov" "$logf" "$ktmo" || rc=$?
    ready=$(tr -d '\r' < "$logf" | sed -n 's/^\[rig \([0-9.]*\)s\] devices:.*/\1/p' | tail -1)
  fi
  for n in ${knames[@]+"${knames[@]}"}; do
    resf=$logf   # where n's result is: the panicked boot's console if it finished there
    case " ${RIG_SUITE_DONE:-} " in *" $n "*) resf=$logf.panicked ;; esac
    r=$(tr -d '\r' < "$resf" | awk -v n="$n" '$1=="RIG-RESULT:" && $2==n {print $3" "$5"s (status "$4")"}' | tail -1)
    if [ -z "$r" ]; then
      r="FAIL no result: ${RIG_BOOT_WHY:-the guest never ran it}"
    fi
    case $r in
      PASS*) pass=$((pass + 1)) ;;
      *) fail=$((fail + 1))
         if grep -q "^RIG-RESULT: $n " < <(tr -d '\r' < "$resf"); then
           { echo "rig: FAIL $n on $KVER:"; digest "$resf" "$n"; } | tee -a "$digests"
         fi ;;
    esac
    summary+=("$(printf '%-4s %-24s %-24s %s' "${r%% *}" "$n" "$KVER" "${r#* }")")
  done
  for n in ${kbroken[@]+"${kbroken[@]}"}; do
    fail=$((fail + 1)); summary+=("$(printf '%-4s %-24s %-24s %s' FAIL "$n" "$KVER" "did not build")")
  done
  # a guest that hung or died: its console's tail, and its fault again after
  # the summary (with the digests), so that a CI log cut to its tail shows it
  if [ "$rc" = 124 ] || [ "$rc" = 125 ]; then
    log "$KVER: $RIG_BOOT_WHY"
    console_tail "$logf" 80
    { echo "rig: $KVER: $RIG_BOOT_WHY"; console_fault "$logf"; } >> "$digests"
  fi
  # a panic that a second boot got past: its fault after the summary too,
  # because the oops is what a kernel bug report needs
  if [ -n "${RIG_SUITE_PANIC:-}" ]; then
    { echo "rig: $KVER: $RIG_SUITE_PANIC"; console_fault "$logf.panicked"; } >> "$panics"
  fi
  # the per-kernel summary line
  boots+=("$KVER: $((pass - kpass)) passed, $((fail - kfail)) failed; build ${builds[$ki]}s; devices ready at ${ready:-?}s guest time; boot+tests ${RIG_BOOT_SECS:-0}s wall (${RIG_BOOT_ACCEL:-no boot}${RIG_BOOT_NOTE:+; $RIG_BOOT_NOTE})")
done

echo "rig: ==== summary ($(since "$t_all")s) ===="
printf '%s\n' "${summary[@]}"
printf 'rig: %s\n' ${boots[@]+"${boots[@]}"}
if [ -s "$panics" ]; then
  echo "rig: ==== guest kernels that panicked, each retried once (see the per-kernel lines) ===="
  cat "$panics"
fi
if [ -s "$digests" ]; then
  echo "rig: ==== the failures again ===="
  cat "$digests"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
