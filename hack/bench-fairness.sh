#!/usr/bin/env bash
# Benchmark: one tenant's burst against another tenant's binds (contract
# section 10, issue 25), on one local control plane, every figure from one run.
# A command, not a test: it prints figures and fails only when something breaks.
#
#   hack/bench-fairness.sh [--noisy N] [--victims V] [--rate R] [--concurrency C]
#                          [--backlog B] [--orders "fair fifo"] [--no-build]
#
# The controller runs at its defaults with --owner-authorization namespace and
# no webhook (what is measured is the controller's queue, not admission).
#   1. quiet: a victim owner creates V Sandboxes (default 10) at R/s (default
#      20) alone: its create -> Bound p50/p99;
#   2. for the fair queue (the default) and for --work-queue-order fifo (the
#      controller restarted with it), and for a noisy owner in the victim's
#      namespace and in another namespace: the noisy owner bursts N Sandboxes
#      (default 2,000, C client threads, default 16) while the controller is
#      held (SIGSTOP; see burst below), then the controller goes on; once B of
#      them (default N / 4) wait for it (sandbox_sandboxes{phase="None"}: no
#      status yet) the victim creates its V at R/s again, while the backlog
#      drains: its create -> Bound p50/p99, and the noisy owner's bound rate
#      (from the first noisy create: it includes the time held).
# --orders fair skips the FIFO baseline (for comparing settings of the fair
# queue; the goal's figure needs both). Each phase uses namespaces of its
# own; the controller's queue is quiet again before the next one starts.
# Latencies count from when each victim Sandbox was due (sbx-bench --rate).
# The goal (issue 25): the victim's p99 during the burst at most 1.5x its
# quiet p99 with the fair queue; FIFO gives about the backlog over the bind
# rate.
# Then the controller's own share: how long the keys of the victim's
# namespace waited in the work queue while the victim ran, from the
# controller's metrics (sandbox_workqueue_namespace_queue_duration_seconds of
# the namespace's bucket, scraped before and after), beside the noisy
# namespace's bucket. The other-namespace phases put the victim in a namespace
# whose bucket is not the noisy one's; the same-namespace phases share one.
#
# Environment: SBX_BUILD_DIR (default build/), SBX_BENCH_TIMEOUT (seconds per
# phase, 900), SBX_BENCH_CTL_FLAGS (more controller flags, e.g.
# "--max-reconciles-per-namespace 0"), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NOISY=2000 VICTIMS=10 RATE=20 CONC=16 BACKLOG="" BUILD=1 ORDERS="fair fifo"
TIMEOUT=${SBX_BENCH_TIMEOUT:-900}

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --noisy) NOISY=${2:-}; shift 2 ;;
    --victims) VICTIMS=${2:-}; shift 2 ;;
    --rate) RATE=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --backlog) BACKLOG=${2:-}; shift 2 ;;
    --orders) ORDERS=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
BACKLOG=${BACKLOG:-$((NOISY / 4))}
[[ " $ORDERS " == *" fair "* ]] && [[ $ORDERS =~ ^(fair|fifo|\ )+$ ]] ||
  { echo "--orders must name fair, and may name fifo, got '$ORDERS'" >&2; exit 2; }
for v in NOISY VICTIMS RATE CONC BACKLOG TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done

# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench
bench_build sandbox-controller sbx-bench
for b in "$CONTROLLER_BIN" "$BENCH_BIN"; do [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }; done

LOAD_START=$(load)
say "starting the control plane"
cluster_up
grant_controller_rbac
# Room for the pods (2 CPU each): kwok nodes of 2000 CPUs hold 1000 each.
"$ROOT/hack/cluster.sh" nodes "$E2E_DIR" $(((4 * NOISY + 5 * VICTIMS + 999) / 1000 + 1)) || bench_fail "kwok nodes not Ready"

# The work queue's waits per namespace bucket (the victim's scrapes keep their change).
WQ=sandbox_workqueue_namespace_queue_duration_seconds
# victim NS PREFIX OUT [START_AT]: the victim's V Sandboxes at R/s.
victim() {
  scrape "$METRICS_PORT" >"$3.m0"
  SBX_BENCH_TRACE="$3.trace" "$BENCH_BIN" controller --namespace "$1" --prefix "$2" --owner victim --count "$VICTIMS" --rate "$RATE" \
    --concurrency 4 --scopes "$VICTIMS" --wait bound --timeout "$TIMEOUT" >"$3" 2>"$3.err"
  local rc=$?
  scrape "$METRICS_PORT" >"$3.m1"
  series_delta "$3.m0" "$3.m1" "^${WQ}_bucket" >"$3.wq"
  return $rc
}

# queue_wait OUT NS: "p50 p99 keys" of the work queue waits of NS's bucket
# in OUT.wq (between the victim's two scrapes), in ms without the unit.
queue_wait() {
  local sel q
  sel="bucket=\"$("$CONTROLLER_BIN" --work-queue-bucket "$2")\""
  for q in 0.5 0.99; do quantile $q $WQ "$sel" <"$1.wq" | sed 's/ ms$//' | tr -d ' '; printf ' '; done
  observations $WQ "$sel" <"$1.wq"
}
# same_bucket NS1 NS2: true when the two namespaces share a metrics bucket.
same_bucket() { [ "$("$CONTROLLER_BIN" --work-queue-bucket "$1")" = "$("$CONTROLLER_BIN" --work-queue-bucket "$2")" ]; }

# backlog PORT: the Sandboxes the controller has not answered yet (no status).
backlog() { msum "$(scrape "$1")" sandbox_sandboxes 'phase="None"'; }

# burst ORDER WHERE: one burst phase; results in $E2E_DIR/<ORDER>-<WHERE>.{noisy,victim}.
# The noisy Sandboxes are created while the controller is stopped (SIGSTOP):
# on this machine the API server takes creates no faster than the controller
# binds them, so a burst that outruns the controller (a faster API server,
# many clients, a restart) is made by holding the controller back; it then
# sees the whole burst at once, as its queue would.
burst() {
  local order=$1 where=$2 nns vns out=$E2E_DIR/$1-$2
  nns="noisy-$order-$where"
  vns=$([ "$where" = same ] && echo "$nns" || echo "victim-$order-$where")
  # Another namespace: one whose metrics bucket is not the noisy one's, so
  # that the queue waits of each can be told apart (see queue_wait).
  local i=2
  while [ "$where" != same ] && same_bucket "$vns" "$nns"; do vns="victim-$order-$where-$((i++))"; done
  echo "$vns" >"$out.vns"
  bench_namespace "$nns"
  [ "$vns" = "$nns" ] || bench_namespace "$vns"
  settle "$METRICS_PORT"
  say "$order, noisy owner in the $where namespace: $NOISY Sandboxes at once in $nns (controller stopped), the victim in $vns"
  kill -STOP "$CTL_PID"
  "$BENCH_BIN" controller --namespace "$nns" --prefix noisy- --owner noisy --count "$NOISY" --concurrency "$CONC" \
    --scopes "$NOISY" --wait bound --timeout "$TIMEOUT" >"$out.noisy" 2>"$out.noisy.err" &
  local noisy_pid=$! d=0 t0
  for _ in $(seq 1 $((TIMEOUT * 5))); do
    [ "$(kubectl get sbx -n "$nns" --no-headers 2>/dev/null | wc -l)" -ge "$NOISY" ] && break
    kill -0 "$noisy_pid" 2>/dev/null || break
    sleep 1
  done
  kill -CONT "$CTL_PID"
  t0=$(now_s)
  for _ in $(seq 1 $((TIMEOUT * 5))); do
    d=$(backlog "$METRICS_PORT")
    [ "${d:-0}" -ge "$BACKLOG" ] && break
    kill -0 "$noisy_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "$d" >"$out.backlog"
  say "$d Sandboxes without a status $(since "$t0") s after the controller went on: the victim starts"
  victim "$vns" victim- "$out.victim" || bench_fail "the victim's run failed; see $out.victim.err"
  wait "$noisy_pid" || bench_fail "the noisy run failed; see $out.noisy.err"
  since "$t0" >"$out.drained"
  say "done: victim bound p99 $(value "$out.victim" bound_p99_ms) ms, noisy $(value "$out.noisy" rate) bound/s"
}

LOADS=() STOPS=()
for order in $ORDERS; do
  # shellcheck disable=SC2086 # SBX_BENCH_CTL_FLAGS: extra controller flags, split on spaces
  start_ours "ctl-$order" --work-queue-order "$order" ${SBX_BENCH_CTL_FLAGS:-}
  wait_ready_ms "$PROBE_PORT" >/dev/null
  if [ "$order" = fair ]; then
    bench_namespace quiet
    settle "$METRICS_PORT"
    LOADS+=("quiet $(load)")
    say "quiet: the victim alone, $VICTIMS Sandboxes at $RATE/s"
    victim quiet victim- "$E2E_DIR/quiet.victim" || bench_fail "the quiet run failed; see $E2E_DIR/quiet.victim.err"
  fi
  for where in same other; do
    LOADS+=("$order-$where $(load)")
    burst "$order" "$where"
  done
  kill -0 "$CTL_PID" 2>/dev/null || bench_fail "the controller exited; see $E2E_DIR/ctl-$order.log"
  # How long SIGTERM takes with what is still queued (the bound noisy
  # Sandboxes' pods becoming Running, ...): the workers stop after the keys
  # they hold, whatever the backlog.
  depth=$(msum "$(scrape "$METRICS_PORT")" workqueue_depth)
  t0=$(now_s)
  if controller_stop "$CTL_PID"; then
    STOPS+=("$order: $(since "$t0") s with $depth keys queued")
  else
    STOPS+=("$order: not stopped 10 s after SIGTERM with $depth keys queued (killed)")
    say "the controller did not stop on SIGTERM ($depth keys queued)"
  fi
done

Q=$E2E_DIR/quiet.victim
cat <<EOF

=== sandbox-controller fairness benchmark ===
command:   ${SBX_BENCH_CTL_FLAGS:+SBX_BENCH_CTL_FLAGS="$SBX_BENCH_CTL_FLAGS" }hack/bench-fairness.sh --noisy $NOISY --victims $VICTIMS --rate $RATE --concurrency $CONC --backlog $BACKLOG --orders "$ORDERS"
load:      a victim owner creates $VICTIMS Sandboxes at $RATE/s: alone, then while a noisy owner's burst of $NOISY
           (created by $CONC threads) drains, once $BACKLOG of them wait for the controller
host:      $(nproc) CPUs shared; loadavg $LOAD_START at start, $(load) at end; at each phase's start: ${LOADS[*]}

EOF
printf '%-44s %9s %9s %9s %12s %10s\n' "victim create -> Bound (ms)" p50 p99 max "p99 / quiet" "noisy/s *"
printf '%-44s %9s %9s %9s %12s %10s\n' "quiet (the victim alone)" "$(value "$Q" bound_p50_ms)" "$(value "$Q" bound_p99_ms)" \
  "$(value "$Q" bound_max_ms)" "1.00" ""
for where in same other; do
  for order in $ORDERS; do
    f=$E2E_DIR/$order-$where
    label="$([ "$where" = same ] && echo "noisy owner in the same namespace" || echo "noisy owner in another namespace"), $([ "$order" = fair ] && echo fair || echo FIFO)"
    printf '%-44s %9s %9s %9s %12s %10s\n' "$label" "$(value "$f.victim" bound_p50_ms)" "$(value "$f.victim" bound_p99_ms)" \
      "$(value "$f.victim" bound_max_ms)" "$(ratio "$(value "$f.victim" bound_p99_ms)" "$(value "$Q" bound_p99_ms)")" \
      "$(awk -v n="$NOISY" -v s="$(cat "$f.drained")" 'BEGIN { if (s > 0) printf "%.1f", n / s; else print "n/a" }')"
  done
done
echo "  * the noisy owner's Sandboxes bound per second from the controller going on until all were bound"
echo
printf '%-44s %9s %9s %6s %18s\n' "work queue wait while the victim ran (ms)" p50 p99 keys "noisy bucket p99"
read -r a b n <<<"$(queue_wait "$Q" quiet)"
printf '%-44s %9s %9s %6s %18s\n' "quiet, the victim's namespace" "$a" "$b" "$n" ""
for order in $ORDERS; do
  f=$E2E_DIR/$order-other
  label="noisy owner in another namespace, $([ "$order" = fair ] && echo fair || echo FIFO)"
  read -r a b n <<<"$(queue_wait "$f.victim" "$(cat "$f.vns")")"
  read -r _ nb _ <<<"$(queue_wait "$f.victim" "noisy-$order-other")"
  printf '%-44s %9s %9s %6s %18s\n' "$label" "$a" "$b" "$n" "$nb"
done
echo "  the victim namespace's bucket of $WQ from when the victim started to its last Bound"
echo "  (its keys alone unless another namespace with work shares the bucket), and the noisy namespace's bucket"
echo
for where in same other; do
  for order in $ORDERS; do
    f=$E2E_DIR/$order-$where
    echo "  $order-$where: Sandboxes waiting for the controller at the victim's start $(cat "$f.backlog"), victim bound $(value "$f.victim" bound)/$VICTIMS, noisy bound $(value "$f.noisy" bound)/$NOISY in $(value "$f.noisy" seconds) s"
  done
done
echo "  goal (issue 25): with the fair queue the victim's p99 during the burst at most 1.5x its quiet p99"
echo "  SIGTERM -> exit after the phases: $(IFS=";"; echo "${STOPS[*]}")"
warn_if_busy "$LOAD_START"
