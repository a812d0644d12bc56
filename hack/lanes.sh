# Sourced by hack/test.sh: runs independent test suites side by side.
#
# End-to-end suites spend most of their time waiting on their own control
# plane (each starts one on free ports under its own folder), so on two cores
# three of them side by side take about as long as the longest chain, not the
# sum. A suite's output goes to its own log, printed whole when it ends, so the
# CI output stays readable; every suite's own time is in the summary.
#
#   lanes_init DIR N       logs in DIR, at most N suites at once
#   lane [-t SECS] NAME CMD...   start CMD as suite NAME once a lane is free
#   lane_after NAME        wait until suite NAME (started with lane) has ended
#   lanes_wait             wait for every suite, report each as it ends
#   bg_job [-t SECS] NAME CMD...  start CMD in the background, outside the lanes
#   bg_result NAME         wait for bg_job NAME; its exit status (from its
#                          result file, never from `wait` on a process ID);
#                          its time in BG_SECS
# -t SECS: the job's time limit. When it is up the job gets SIGTERM (its
# whole process group, so an end-to-end suite's EXIT trap still stops its
# cluster), SIGKILL 60 s later, and fails with "timed out after SECS s" in
# its log and in the summary. A CMD that is a shell function then runs in a
# child bash (exported with export -f, the caller's set -o options kept): it
# sees only exported variables. A job whose process is gone without a result
# (killed from outside) fails too, rather than being waited for forever.
# A suite that needs a resource only one may hold at a time (the real node)
# takes its lock itself; lanes only bound how many run at once.

LANES_DIR=
LANES_MAX=3
LANES_RUNNING=()   # names of suites started and not yet reported
LANES_ORDER=()     # names in start order, for the summary
BG_SECS=

lanes_init() {
  LANES_DIR=$1 LANES_MAX=$2
  rm -rf "$LANES_DIR" && mkdir -p "$LANES_DIR"
}

# lane_file NAME: the file name a suite's log and result go to (NAME may hold
# slashes and spaces).
lane_file() {
  printf '%s/%s' "$LANES_DIR" "$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')"
}

# lane_proc_start PID: the kernel's start time of PID (/proc/PID/stat, field
# 22), nothing when it is gone: with the ID alone, a job that died could be
# taken for another process the kernel gave its ID since.
lane_proc_start() { awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null || true; }

# lane_job LIMIT NAME CMD...: runs in the background; writes NAME's log, then
# its result ("RC SECONDS [NOTE]") when done. LIMIT 0: no time limit.
lane_job() {
  local limit=$1 name=$2 f t0 rc secs note=
  f=$(lane_file "$name")
  shift 2
  t0=$(date +%s)
  if [ "$limit" -gt 0 ]; then
    # timeout runs CMD in a process group of its own, so that the time-out
    # stops all of it; a Ctrl-C, or a SIGTERM to this shell's group, would no
    # longer reach it: this shell passes them on.
    if declare -F "$1" >/dev/null; then
      export -f "$1"
      timeout -k 60 "$limit" bash -c "$(set +o)"'; "$@"' lane-job "$@" >"$f.log" 2>&1 </dev/null &
    else
      timeout -k 60 "$limit" "$@" >"$f.log" 2>&1 </dev/null &
    fi
    local tpid=$!
    trap 'kill -TERM "$tpid" 2>/dev/null' INT TERM HUP
    wait "$tpid"
    rc=$?
    while [ "$rc" -gt 128 ] && kill -0 "$tpid" 2>/dev/null; do # wait was cut short by a signal
      wait "$tpid"
      rc=$?
    done
    trap - INT TERM HUP
  else
    "$@" >"$f.log" 2>&1 </dev/null
    rc=$?
  fi
  secs=$(($(date +%s) - t0))
  # timeout's own statuses (124: ended on SIGTERM, 137: on SIGKILL) once the
  # limit has passed; never 0.
  if [ "$limit" -gt 0 ] && [ "$secs" -ge "$limit" ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
    note="timed out after ${limit}s"
    echo "lanes: TIMEOUT: $name did not end within its limit of ${limit}s: stopped (rc $rc), a failure" >>"$f.log"
  fi
  echo "$rc $secs${note:+ $note}" >"$f.rc.tmp" && mv "$f.rc.tmp" "$f.rc"
}

# lane_spawn LIMIT NAME CMD...: lane_job in the background; its process ID
# and that process's start time in NAME's .pid file (for lane_done).
lane_spawn() {
  local f
  f=$(lane_file "$2")
  rm -f "$f.rc" "$f.pid"
  lane_job "$@" &
  echo "$! $(lane_proc_start $!) $(date +%s)" >"$f.pid"
}

# lane_done NAME: whether job NAME has a result. A job whose process is gone
# without one (killed by a signal, its shell dead) is given a failed result
# here (rc 125), so nobody waits for it forever.
lane_done() {
  local f pid start t0
  f=$(lane_file "$1")
  [ -f "$f.rc" ] && return 0
  read -r pid start t0 2>/dev/null <"$f.pid" || { pid= start= t0=$(date +%s); }
  [ -n "$pid" ] && [ -n "$start" ] && [ "$(lane_proc_start "$pid")" = "$start" ] && return 1
  [ -f "$f.rc" ] && return 0 # it ended between the two looks
  echo "lanes: $1 ended without a result (its process was killed, or died, before writing one): a failure" >>"$f.log"
  echo "125 $(($(date +%s) - ${t0:-$(date +%s)})) ended without a result" >"$f.rc"
  return 0
}

# lanes_reap: reports every suite that has ended since the last call.
lanes_reap() {
  local n f rest=() rc secs note
  for n in "${LANES_RUNNING[@]}"; do
    f=$(lane_file "$n")
    if lane_done "$n"; then
      read -r rc secs note <"$f.rc"
      echo
      echo "=== end of $n: rc=$rc, ${secs}s${note:+ ($note)} (at ${SECONDS}s) ==="
      sed "s|^|[$n] |" "$f.log"
      record "$n (${secs}s${note:+, $note})" "$rc"
    else
      rest+=("$n")
    fi
  done
  LANES_RUNNING=("${rest[@]}")
}

lane() {
  local limit=0
  if [ "$1" = -t ]; then limit=$2; shift 2; fi
  local name=$1
  shift
  while [ "${#LANES_RUNNING[@]}" -ge "$LANES_MAX" ]; do
    wait -n 2>/dev/null || sleep 1
    lanes_reap
  done
  local lim=
  [ "$limit" -gt 0 ] && lim="; limit ${limit}s"
  echo "=== start $name (at ${SECONDS}s$lim; running: ${LANES_RUNNING[*]:-none}) ==="
  lane_spawn "$limit" "$name" "$@"
  LANES_RUNNING+=("$name")
  LANES_ORDER+=("$name")
}

lane_after() {
  while ! lane_done "$1"; do
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

# bg_job [-t SECS] NAME CMD...: CMD in the background, not counted in the
# lanes and not reported by them; its log and result go where a lane's do.
bg_job() {
  local limit=0
  if [ "$1" = -t ]; then limit=$2; shift 2; fi
  lane_spawn "$limit" "$@"
}

# bg_result NAME: waits for bg_job NAME to end; returns its exit status and
# sets BG_SECS to its time. It reads the result file rather than `wait`ing on
# the job's process ID: by the end of a run the kernel may have given that ID
# to another child of this shell, and `wait` would answer for that one
# (hack/test-lanes.sh).
bg_result() {
  local f rc secs _
  f=$(lane_file "$1")
  while ! lane_done "$1"; do sleep 1; done
  read -r rc secs _ <"$f.rc"
  BG_SECS=$secs
  return "$rc"
}
