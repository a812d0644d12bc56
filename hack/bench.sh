#!/usr/bin/env bash
# Benchmark: how fast the controller binds Sandboxes and makes them Ready, next
# to a baseline that does the same API writes without a controller and,
# optionally, a peer controller, all on one local control plane in one run.
# A command, not a test: it prints figures and fails only when something breaks.
#
#   hack/bench.sh [--count N | --rate R --duration T] [--concurrency C] [--scopes S]
#                 [--workers W] [--kube-api-qps Q] [--kube-api-burst B]
#                 [--peer BIN --peer-crds PATH] [--no-floor] [--no-baseline] [--no-build]
#   hack/bench.sh --scale N [--concurrency C] [--no-build]
#
# Burst mode (default, --count N, 1000): C client threads create N Sandboxes
# as fast as they can. Sustained mode (--rate R --duration T): R Sandboxes/s
# for T s (N = R * T). The controller runs at its OWN DEFAULTS unless
# --workers / --kube-api-qps / --kube-api-burst are given. Phases, each in a
# namespace of its own, deleted before the next phase starts:
#   1. baseline (skipped with --no-baseline): no controller; for each Sandbox
#      the client POSTs it, POSTs a Pod and merge-PATCHes status Bound=True,
#      and once an informer sees the pod Ready, PATCHes Ready=True;
#   2. controller: the client POSTs the Sandboxes, the controller does the rest;
#   2b. no floor (with --no-floor): the controller again with network.policies
#      false, so it keeps no NetworkPolicy (the network floor's cost, issue 24);
#      the controller phase prints the NetworkPolicies it left in its namespace;
#   3. peer (with --peer): another controller binary, run out of cluster with
#      the admin kubeconfig, webhooks off, after its CRDs (a file or a folder
#      of YAML, e.g. kubernetes-sigs/agent-sandbox's k8s/crds) are applied with
#      conversion webhooks removed; the client POSTs agents.x-k8s.io/v1beta1
#      Sandboxes with the same pod shape (1 container, 2 CPU / 4Gi).
# Latencies are from the client sending the POST (sustained mode: from the
# moment the Sandbox was due) to its informer seeing Bound=True / Ready=True. Requests per Sandbox come from each controller's own
# rest_client_requests_total.
#
# Scale mode (--scale N): N Sandboxes created until Ready (burst), then the
# controller is restarted over them: its peak RSS, the time from start to
# /readyz 200 and to a drained work queue, and its API requests by method
# during the restart (writes should be 0).
#
# Environment: SBX_BUILD_DIR (default build/), SBX_BENCH_OWNERS (50),
# SBX_BENCH_TIMEOUT (seconds per phase, 900), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=1000 CONC=8 SCOPES="" RATE="" DURATION="" SCALE="" BUILD=1 BASELINE=1
PEER_BIN="" PEER_CRDS="" NOFLOOR=0
CTL_TUNING=()
OWNERS=${SBX_BENCH_OWNERS:-50}
TIMEOUT=${SBX_BENCH_TIMEOUT:-900}

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --rate) RATE=${2:-}; shift 2 ;;
    --duration) DURATION=${2:-}; shift 2 ;;
    --scale) SCALE=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --scopes) SCOPES=${2:-}; shift 2 ;;
    --workers) CTL_TUNING+=(--workers "${2:-}"); shift 2 ;;
    --kube-api-qps) CTL_TUNING+=(--kube-api-qps "${2:-}"); shift 2 ;;
    --kube-api-burst) CTL_TUNING+=(--kube-api-burst "${2:-}"); shift 2 ;;
    --peer) PEER_BIN=${2:-}; shift 2 ;;
    --peer-crds) PEER_CRDS=${2:-}; shift 2 ;;
    --no-baseline) BASELINE=0; shift ;;
    --no-floor) NOFLOOR=1; shift ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [ -n "$RATE$DURATION" ]; then
  [[ $RATE =~ ^[1-9][0-9]*$ && $DURATION =~ ^[1-9][0-9]*$ ]] ||
    { echo "--rate and --duration go together, as positive integers" >&2; exit 2; }
  COUNT=$((RATE * DURATION))
fi
[ -n "$SCALE" ] && COUNT=$SCALE
SCOPES=${SCOPES:-$COUNT}
for v in COUNT CONC SCOPES OWNERS TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
[ "$SCOPES" -le "$COUNT" ] || { echo "--scopes must not exceed --count" >&2; exit 2; }
if [ -n "$PEER_BIN$PEER_CRDS" ]; then
  [ -x "$PEER_BIN" ] && [ -e "$PEER_CRDS" ] || { echo "--peer needs an executable and --peer-crds a path" >&2; exit 2; }
fi

# Helpers shared with the end-to-end tests: cluster_up (with its EXIT trap that
# stops everything), grant_controller_rbac, new_namespace, controller_start;
# and with the other benchmarks (hack/bench-lib.sh).
# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench

bench_build sandbox-controller sbx-bench
[ -x "$CONTROLLER_BIN" ] && [ -x "$BENCH_BIN" ] || { echo "missing $CONTROLLER_BIN or $BENCH_BIN" >&2; exit 1; }

BENCH_ARGS=(--count "$COUNT" --concurrency "$CONC" --scopes "$SCOPES" --owners "$OWNERS" --timeout "$TIMEOUT")
[ -n "$RATE" ] && BENCH_ARGS+=(--rate "$RATE")

LOAD_START=$(load)
say "starting the control plane"
cluster_up
grant_controller_rbac

if [ -n "$SCALE" ]; then
  # Room for the pods (2 CPU each): the local control plane has 2 kwok nodes
  # of 2000 CPUs, 1000 such pods each.
  "$ROOT/hack/cluster.sh" nodes "$E2E_DIR" $(((SCALE + 999) / 1000 + 1)) || bench_fail "kwok nodes not Ready"
  bench_namespace sbx-bench
  start_ours ctl "${CTL_TUNING[@]}"
  wait_ready_ms "$PROBE_PORT" >/dev/null
  say "scale: creating $COUNT Sandboxes ($CONC client threads), waiting for Ready"
  L1=$(load)
  "$BENCH_BIN" controller --namespace sbx-bench "${BENCH_ARGS[@]}" --wait ready --pid "$CTL_PID" \
    --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" >"$E2E_DIR/scale.out" ||
    bench_fail "scale run failed; see $E2E_DIR/scale.out and $E2E_DIR/ctl.log"
  C=$E2E_DIR/scale.out
  first_rss=$(hwm_kib "$CTL_PID")
  controller_stop "$CTL_PID" || say "the controller did not stop on SIGTERM"
  pods=$(kubectl get pods -n sbx-bench --no-headers 2>/dev/null | wc -l)
  say "scale: restarting the controller over $COUNT bound Sandboxes"
  L2=$(load)
  start_ours ctl2 "${CTL_TUNING[@]}"
  ready_ms=$(wait_ready_ms "$PROBE_PORT")
  # Drained: the work queue empty and the reconcile count still for 3 s.
  t0=$(date +%s%N) last=-1 still=0 drained_ms=n/a
  for _ in $(seq 1 600); do
    m=$(scrape "$METRICS_PORT")
    rec=$(msum "$m" controller_runtime_reconcile_total)
    depth=$(msum "$m" workqueue_depth)
    if [ "$rec" = "$last" ] && [ "$depth" = 0 ] && [ "$rec" -gt 0 ]; then
      still=$((still + 1))
      [ "$still" -ge 6 ] && break
    else
      still=0
      last=$rec
      drained_ms=$((($(date +%s%N) - t0) / 1000000 + ready_ms))
    fi
    sleep 0.5
  done
  m=$(scrape "$METRICS_PORT")
  printf '%s\n' "$m" >"$E2E_DIR/restart.metrics"
  restart_rss=$(hwm_kib "$CTL_PID")
  restart_cpu=$(cpu_s "$CTL_PID")
  controller_stop "$CTL_PID" || true
  cat <<EOF

=== sandbox-controller scale benchmark ===
command:      hack/bench.sh --scale $COUNT --concurrency $CONC ${CTL_TUNING[*]:-}
host:         $(nproc) CPUs shared with other work; loadavg $LOAD_START at start, $L1 before creating, $L2 before the restart, $(load) at end
create:       $(value "$C" ready)/$COUNT Ready in $(value "$C" ready_seconds) s ($(value "$C" ready_rate) /s), $pods pods; create -> Bound p50 $(value "$C" bound_p50_ms) ms, p99 $(value "$C" bound_p99_ms) ms; -> Ready p50 $(value "$C" ready_p50_ms) ms, p99 $(value "$C" ready_p99_ms) ms
              peak RSS $(mib "$first_rss") MiB, CPU $(value "$C" cpu_s) s, API requests/Sandbox $(value "$C" requests_per_sandbox_settled)
restart:      /readyz 200 after $ready_ms ms; work queue drained after $drained_ms ms; $(msum "$m" controller_runtime_reconcile_total) reconciles
              peak RSS $(mib "$restart_rss") MiB, CPU $restart_cpu s
restart API:  GET $(msum "$m" rest_client_requests_total 'method="GET"')  POST $(msum "$m" rest_client_requests_total 'method="POST"')  PUT $(msum "$m" rest_client_requests_total 'method="PUT"')  PATCH $(msum "$m" rest_client_requests_total 'method="PATCH"')  DELETE $(msum "$m" rest_client_requests_total 'method="DELETE"')   (rest_client_requests_total of the restarted process; GETs are its LISTs and WATCHes)
EOF
  exit 0
fi

bench_namespace sbx-bench

MODE_DESC="burst of $COUNT from $CONC client threads"
[ -n "$RATE" ] && MODE_DESC="$RATE Sandboxes/s for $DURATION s ($COUNT), $CONC client threads"

B=$E2E_DIR/baseline.out C=$E2E_DIR/controller.out P=$E2E_DIR/peer.out N=$E2E_DIR/nofloor.out
LB="" LC="" LP="" LN=""
if [ "$BASELINE" = 1 ]; then
  bench_namespace sbx-bench-baseline
  LB=$(load)
  say "baseline: $MODE_DESC, no controller"
  "$BENCH_BIN" baseline --namespace sbx-bench-baseline "${BENCH_ARGS[@]}" >"$B" ||
    bench_fail "baseline run failed; see $B"
  delete_namespace sbx-bench-baseline
fi

say "starting the controller"
start_ours ctl "${CTL_TUNING[@]}"
wait_ready_ms "$PROBE_PORT" >/dev/null
LC=$(load)
say "controller: $MODE_DESC"
"$BENCH_BIN" controller --namespace sbx-bench "${BENCH_ARGS[@]}" --pid "$CTL_PID" \
  --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" >"$C" ||
  bench_fail "controller run failed; see $C and $E2E_DIR/ctl.log"
kill -0 "$CTL_PID" 2>/dev/null || bench_fail "the controller exited; see $E2E_DIR/ctl.log"
m=$(scrape "$METRICS_PORT")
printf '%s\n' "$m" >"$E2E_DIR/controller.metrics"
ev_sent=$(kubectl get events -n sbx-bench --field-selector reason=PodCreated --no-headers 2>/dev/null | wc -l)
ev_dropped=$(msum "$m" sandbox_events_dropped_total)
controller_stop "$CTL_PID" || say "the controller did not stop on SIGTERM"
pods=$(kubectl get pods -n sbx-bench -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init --no-headers 2>/dev/null | wc -l)
netpols=$(kubectl get networkpolicies -n sbx-bench --no-headers 2>/dev/null | wc -l)

if [ "$NOFLOOR" = 1 ]; then
  delete_namespace sbx-bench
  bench_namespace sbx-bench-nofloor
  printf 'network: {policies: false}\n' >"$E2E_DIR/nofloor.yaml"
  start_ours ctl-nofloor --config "$E2E_DIR/nofloor.yaml" "${CTL_TUNING[@]}"
  wait_ready_ms "$PROBE_PORT" >/dev/null
  LN=$(load)
  say "controller without the network floor: $MODE_DESC"
  "$BENCH_BIN" controller --namespace sbx-bench-nofloor "${BENCH_ARGS[@]}" --pid "$CTL_PID" \
    --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" >"$N" ||
    bench_fail "no-floor run failed; see $N and $E2E_DIR/ctl-nofloor.log"
  controller_stop "$CTL_PID" || say "the controller did not stop on SIGTERM"
fi

if [ -n "$PEER_BIN" ]; then
  delete_namespace sbx-bench
  peer_apply_crds "$PEER_CRDS"
  kubectl create namespace sbx-bench-peer >/dev/null
  peer_start "$PEER_BIN"
  LP=$(load)
  say "peer: $MODE_DESC"
  "$BENCH_BIN" peer --namespace sbx-bench-peer "${BENCH_ARGS[@]}" --pid "$PEER_PID" \
    --metrics-url "http://127.0.0.1:$PEER_METRICS/metrics" >"$P" ||
    bench_fail "peer run failed; see $P and $E2E_DIR/peer.log"
  controller_stop "$PEER_PID" || say "the peer did not stop on SIGTERM"
fi

# row LABEL KEY FILE...: one figure per phase.
row() {
  local label=$1 key=$2 f
  shift 2
  printf '%-30s' "$label"
  for f in "$@"; do
    if [ -s "$f" ]; then printf '%14s' "$(value "$f" "$key")"; else printf '%14s' "-"; fi
  done
  printf '\n'
}
per1000() { awk -v c="$(value "$1" cpu_run_s)" -v n="$COUNT" 'BEGIN { printf "%.2f", c * 1000 / n }'; }

cat <<EOF

=== sandbox-controller benchmark ===
command:   hack/bench.sh $([ -n "$RATE" ] && echo "--rate $RATE --duration $DURATION" || echo "--count $COUNT") --concurrency $CONC ${CTL_TUNING[*]:-} $([ -n "$PEER_BIN" ] && echo "--peer $PEER_BIN --peer-crds $PEER_CRDS") $([ "$NOFLOOR" = 1 ] && echo --no-floor)
load:      $MODE_DESC; Sandbox i in scope i % $SCOPES; controllers at their defaults ${CTL_TUNING[*]:+(ours with ${CTL_TUNING[*]})}
host:      $(nproc) CPUs shared; loadavg $LOAD_START at start; baseline ${LB:-n/a}, controller ${LC:-n/a}, no floor ${LN:-n/a}, peer ${LP:-n/a} (before each phase); $(load) at end

                                    baseline    controller      no floor          peer
EOF
FILES=("$B" "$C" "$N" "$P")
row "offered rate (/s, 0 = burst)" offered_rate "${FILES[@]}"
row "Bound/s (first create..last)" rate "${FILES[@]}"
row "Ready/s (first create..last)" ready_rate "${FILES[@]}"
row "create -> Bound p50 (ms)" bound_p50_ms "${FILES[@]}"
row "create -> Bound p90 (ms)" bound_p90_ms "${FILES[@]}"
row "create -> Bound p99 (ms)" bound_p99_ms "${FILES[@]}"
row "create -> Ready p50 (ms)" ready_p50_ms "${FILES[@]}"
row "create -> Ready p90 (ms)" ready_p90_ms "${FILES[@]}"
row "create -> Ready p99 (ms)" ready_p99_ms "${FILES[@]}"
row "controller CPU (s, run)" cpu_run_s "${FILES[@]}"
row "controller peak RSS (KiB)" rss_peak_kib "${FILES[@]}"
row "API requests / Sandbox" requests_per_sandbox_settled "${FILES[@]}"
row "  of which POST" requests_POST "${FILES[@]}"
row "  of which PATCH" requests_PATCH "${FILES[@]}"
row "  of which PUT" requests_PUT "${FILES[@]}"
row "  of which GET" requests_GET "${FILES[@]}"
cat <<EOF

controller: $(value "$C" ready)/$COUNT Ready, $(value "$C" adopted) adopted, $pods pods; $(value "$C" reconciles) reconciles ($(value "$C" reconcile_errors) errors); CPU per 1,000 Sandboxes $(per1000 "$C") s
network:    $netpols NetworkPolicies in sbx-bench ($OWNERS owners, one namespace) when the run ended
events:     $ev_sent PodCreated events in sbx-bench when the run ended, $ev_dropped dropped (sandbox_events_dropped_total)
ratios:     controller/baseline Ready/s $(ratio "$(value "$C" ready_rate)" "$(value "$B" ready_rate)"), Ready p99 $(ratio "$(value "$C" ready_p99_ms)" "$(value "$B" ready_p99_ms)")
EOF
if [ "$NOFLOOR" = 1 ]; then
  echo "            controller/no floor Bound p50 $(ratio "$(value "$C" bound_p50_ms)" "$(value "$N" bound_p50_ms)"), Bound p99 $(ratio "$(value "$C" bound_p99_ms)" "$(value "$N" bound_p99_ms)"), Ready/s $(ratio "$(value "$C" ready_rate)" "$(value "$N" ready_rate)"), requests/Sandbox $(ratio "$(value "$C" requests_per_sandbox_settled)" "$(value "$N" requests_per_sandbox_settled)")"
fi
if [ -n "$PEER_BIN" ]; then
  cat <<EOF
            controller/peer Ready/s $(ratio "$(value "$C" ready_rate)" "$(value "$P" ready_rate)"), Ready p50 $(ratio "$(value "$C" ready_p50_ms)" "$(value "$P" ready_p50_ms)"), p99 $(ratio "$(value "$C" ready_p99_ms)" "$(value "$P" ready_p99_ms)"), CPU $(ratio "$(value "$C" cpu_run_s)" "$(value "$P" cpu_run_s)"), RSS $(ratio "$(value "$C" rss_peak_kib)" "$(value "$P" rss_peak_kib)"), requests/Sandbox $(ratio "$(value "$C" requests_per_sandbox_settled)" "$(value "$P" requests_per_sandbox_settled)")
            peer: $(value "$P" ready)/$COUNT Ready; CPU per 1,000 Sandboxes $(per1000 "$P") s
EOF
fi
warn_if_busy "$LOAD_START"
