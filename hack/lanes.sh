# Sourced by hack/test.sh: runs independent test suites side by side.
#
# End-to-end suites spend most of their time waiting on their own control
# plane (each starts one on free ports under its own folder), so on two cores
# three of them side by side take about as long as the longest chain, not the
# sum. A suite's output goes to its own log, printed whole when it ends, so the
# CI output stays readable; every suite's own time is in the summary.
#
#   lanes_init DIR N       logs in DIR, at most N suites at once
#   lane NAME CMD...       start CMD as suite NAME once a lane is free
#   lane_after NAME        wait until suite NAME (started with lane) has ended
#   lanes_wait             wait for every suite, report each as it ends
#   bg_job NAME CMD...     start CMD in the background, outside the lanes
#   bg_result NAME         wait for bg_job NAME; its exit status (from its
#                          result file, never from `wait` on a process ID)
# A suite that needs a resource only one may hold at a time (the real node)
# takes its lock itself; lanes only bound how many run at once.

LANES_DIR=
LANES_MAX=3
LANES_RUNNING=()   # names of suites started and not yet reported
LANES_ORDER=()     # names in start order, for the summary

lanes_init() {
  LANES_DIR=$1 LANES_MAX=$2
  rm -rf "$LANES_DIR" && mkdir -p "$LANES_DIR"
}

# lane_file NAME: the file name a suite's log and result go to (NAME may hold
# slashes and spaces).
lane_file() {
  printf '%s/%s' "$LANES_DIR" "$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')"
}

# lane_job NAME CMD...: runs in the background; writes NAME's log, then its
# result ("RC SECONDS") when done, whatever happens to the command.
lane_job() {
  local f t0 rc
  f=$(lane_file "$1")
  shift
  t0=$(date +%s)
  "$@" >"$f.log" 2>&1 </dev/null
  rc=$?
  echo "$rc $(($(date +%s) - t0))" >"$f.rc.tmp" && mv "$f.rc.tmp" "$f.rc"
}

# lanes_reap: reports every suite that has ended since the last call.
lanes_reap() {
  local n f rest=() rc secs
  for n in "${LANES_RUNNING[@]}"; do
    f=$(lane_file "$n")
    if [ -f "$f.rc" ]; then
      read -r rc secs <"$f.rc"
      echo
      echo "=== end of $n: rc=$rc, ${secs}s (at ${SECONDS}s) ==="
      sed "s|^|[$n] |" "$f.log"
      record "$n (${secs}s)" "$rc"
    else
      rest+=("$n")
    fi
  done
  LANES_RUNNING=("${rest[@]}")
}

lane() {
  local name=$1
  shift
  while [ "${#LANES_RUNNING[@]}" -ge "$LANES_MAX" ]; do
    wait -n 2>/dev/null || sleep 1
    lanes_reap
  done
  echo "=== start $name (at ${SECONDS}s; running: ${LANES_RUNNING[*]:-none}) ==="
  lane_job "$name" "$@" &
  LANES_RUNNING+=("$name")
  LANES_ORDER+=("$name")
}

lane_after() {
  while [ ! -f "$(lane_file "$1").rc" ]; do
    wait -n 2>/dev/null || sleep 1
    lanes_reap
  done
  lanes_reap
}

lanes_wait() {
  while [ "${#LANES_RUNNING[@]}" -gt 0 ]; do
    wait -n 2>/dev/null || sleep 1
    lanes_reap
  done
}

# bg_job NAME CMD...: CMD in the background, not counted in the lanes and not
# reported by them; its log and result go where a lane's do.
bg_job() {
  lane_job "$@" &
}

# bg_result NAME: waits for bg_job NAME to end; returns its exit status. It
# reads the result file rather than `wait`ing on the job's process ID: by the
# end of a run the kernel may have given that ID to another child of this
# shell, and `wait` would answer for that one (hack/test-lanes.sh).
bg_result() {
  local f rc _
  f=$(lane_file "$1")
  while [ ! -f "$f.rc" ]; do sleep 1; done
  read -r rc _ <"$f.rc"
  return "$rc"
}
