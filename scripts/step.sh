#!/usr/bin/env bash
# Runs one set-up or build step quietly: its output goes to a log file and
# one line says what ran and how long it took. On a failure, the step's last
# lines and the log's path are shown.
#
# Usage: step.sh NAME COMMAND [ARGS...]
#   KILN_LOG      the log file (default: build/setup.log in the repository)
#   KILN_VERBOSE  1: show the output as it comes, too
set -uo pipefail
name=${1:?usage: step.sh NAME COMMAND [ARGS...]}
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
log=${KILN_LOG:-$repo/build/setup.log}
mkdir -p "$(dirname "$log")"
printf '\n===== %s: %s (%s)\n' "$(date -u +%FT%TZ)" "$name" "$*" >>"$log"
from=$(wc -l <"$log")
t0=$(date +%s%N)
if [ "${KILN_VERBOSE:-0}" = 1 ]; then
  "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
else
  "$@" >>"$log" 2>&1 </dev/null
  rc=$?
fi
ds=$((($(date +%s%N) - t0) / 100000000))  # tenths of a second
secs="$((ds / 10)).$((ds % 10))"
if [ "$rc" = 0 ]; then
  printf 'kiln: %-12s done in %5s s\n' "$name" "$secs"
  exit 0
fi
printf 'kiln: %-12s FAILED (exit %s) after %s s; its last lines:\n' "$name" "$rc" "$secs" >&2
tail -n +"$((from + 1))" "$log" | tail -n 25 | sed 's/^/  | /' >&2
echo "kiln: the whole output is in $log" >&2
exit "$rc"
