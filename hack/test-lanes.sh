#!/usr/bin/env bash
# Tests hack/lanes.sh, which hack/test.sh runs every suite with: a suite's or
# a background job's result must be its own even when the kernel has since
# given its process ID to another child of the shell. Process IDs wrap at
# kernel.pid_max (32768 on Debian), and a CI run forks more than that, so
# within one run a command substitution of hack/test.sh can get the ID a
# background job ended with; `wait` on that ID then answers for the wrong
# process (127, "not a child of this shell").
#
# The test makes that reuse happen at once instead of after 32,768 forks: it
# runs in a PID namespace of its own (unshare, as root) and sets the
# namespace's last ID (/proc/sys/kernel/ns_last_pid) to the one before the
# job's. Exits non-zero when a check fails.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" != --in-namespace ]; then
  [ "$(id -u)" -eq 0 ] || { echo "test-lanes: needs root (a PID namespace of its own)" >&2; exit 1; }
  exec unshare --pid --fork --mount-proc bash "$0" --in-namespace
fi

. "$ROOT/hack/lanes.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lanes_init "$tmp/lanes" 2
failed=0
check() { # check WHAT GOT WANT
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: got $2, want $3"; failed=1; fi
}

# gone PID: waits (at most 10 s) until the shell has reaped PID.
gone() {
  local i
  for i in $(seq 100); do
    [ -d "/proc/$1" ] || return 0
    sleep 0.1
  done
  return 1
}

bg_job three bash -c 'exit 3'
bg_result three
check "a background job's exit status" $? 3

bg_job seven bash -c 'exit 7'
pid=$!
gone "$pid" || { echo "FAIL: job seven (pid $pid) did not end"; exit 1; }
echo $((pid - 1)) >/proc/sys/kernel/ns_last_pid
reused=$(echo "$BASHPID")
check "a command substitution got the ended job's process ID" "$reused" "$pid"
bg_result seven 2>/dev/null
check "the job's exit status after its process ID was reused" $? 7

exit $failed
