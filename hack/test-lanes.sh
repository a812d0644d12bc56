#!/usr/bin/env bash
# Tests hack/lanes.sh, which hack/test.sh runs every suite with (and, last,
# e2e/lib.sh's cleanup of the processes a suite started): a suite's or
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
# job's. The same reuse is made for e2e/lib.sh's cleanup and for
# hack/cluster.sh down. Exits non-zero when a check fails.
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

# reuse_pid PID WHAT: once PID (WHAT) ended, starts another process
# (sleep 60) that gets PID; its ID in OTHER.
reuse_pid() {
  gone "$1" || { echo "FAIL: $2 (pid $1) did not end"; exit 1; }
  echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
  sleep 60 &
  OTHER=$!
  check "another process got $2's process ID" "$OTHER" "$1"
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

# e2e/lib.sh: a suite's cleanup signals only the processes it started. A
# controller that ended long ago leaves its PID in CTL_PIDS; the kernel may
# have given it to another suite's process (a kube-apiserver, once), which
# the cleanup and controller_stop must leave alone. A process still running
# is stopped as before.
E2E_DIR=$tmp
. "$ROOT/e2e/lib.sh"
sleep 0.3 &
ended=$!
track_pid "$ended"
reuse_pid "$ended" "the ended controller"
other=$OTHER
sleep 60 &
live=$!
track_pid "$live"
check "the processes a cleanup would signal" "$(tracked_pids | paste -sd' ')" "$live"
controller_stop "$ended"
disown "$live" # its end, reported by the shell, is not news
for p in $(tracked_pids); do kill -KILL "$p" 2>/dev/null; done
gone "$live"
check "the running one, stopped" "$([ -d "/proc/$live" ] && echo running || echo stopped)" stopped
check "the other process, left alone" "$(kill -0 "$other" 2>/dev/null && echo running || echo stopped)" running
kill "$other" 2>/dev/null

# hack/cluster.sh down: the same for a control plane's processes. A kwok
# that crashed early leaves its ID in DIR/pids; down must leave alone the
# process given that ID since, and still stop a component that runs.
mkdir -p "$tmp/cp/pids"
sleep 0.3 &
crashed=$!
echo "$crashed" >"$tmp/cp/pids/kwok"
proc_start "$crashed" >"$tmp/cp/pids/kwok.start"
sleep 60 &
running=$!
echo "$running" >"$tmp/cp/pids/etcd"
proc_start "$running" >"$tmp/cp/pids/etcd.start"
disown "$running"
reuse_pid "$crashed" "the crashed kwok"
other=$OTHER
"$ROOT/hack/cluster.sh" down "$tmp/cp" 2>/dev/null
gone "$running"
check "down: the running component, stopped" "$([ -d "/proc/$running" ] && echo running || echo stopped)" stopped
check "down: the other process, left alone" "$(kill -0 "$other" 2>/dev/null && echo running || echo stopped)" running
kill "$other" 2>/dev/null

exit $failed
