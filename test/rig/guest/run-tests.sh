#!/bin/sh
# Runs in the guest: every test binary /rig/tests/<name>/<name>.test, from its
# own directory (which holds a copy of its package's testdata/), one at a time.
# Prints "RIG-RESULT: <name> PASS|FAIL <status> <seconds>" per binary for the
# host to count, and exits non-zero if any failed.
# Settings from the host (/rig/env):
#   RIG_RUN            -test.run filter (default: all tests)
#   RIG_TEST_TIMEOUT   seconds per binary (default 1200): -test.timeout makes Go
#                      dump its goroutines; a SIGKILL 30 s later ends anything else
#   RIG_TEST_ARGS      more flags for every binary (e.g. -test.count=3)
#   RIG_SKIP           names not to run (space-separated): the suite's second
#                      boot after a guest kernel panic skips those that finished
T=${RIG_TEST_TIMEOUT:-1200}
failed=0
for d in /rig/tests/*/; do
  [ -d "$d" ] || continue
  name=$(basename "$d")
  case " ${RIG_SKIP:-} " in *" $name "*) continue ;; esac
  echo "RIG-START: $name"
  s=$(cut -d' ' -f1 /proc/uptime)
  # shellcheck disable=SC2086 # RIG_TEST_ARGS is a list of flags
  ( cd "$d" && exec timeout -s KILL $((T + 30)) "./$name.test" -test.v -test.timeout="${T}s" \
      ${RIG_RUN:+"-test.run=$RIG_RUN"} $RIG_TEST_ARGS )
  rc=$?
  e=$(cut -d' ' -f1 /proc/uptime)
  if [ $rc = 0 ]; then r=PASS; else r=FAIL; failed=$((failed + 1)); fi
  echo "RIG-RESULT: $name $r $rc $(awk "BEGIN{printf \"%.1f\", $e - $s}")"
done
[ $failed = 0 ]
