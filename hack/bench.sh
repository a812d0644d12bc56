#!/usr/bin/env bash
# Benchmark: how fast the controller binds Sandboxes and makes them Ready, next
# to a baseline that does the same API writes without a controller and,
# optionally, a peer controller, all on one local control plane in one run.
# A command, not a test: it prints figures and fails only when something breaks.
#
#   hack/bench.sh [--count N | --rate R --duration T] [--concurrency C] [--scopes S]
#                 [--workers W] [--kube-api-qps Q] [--kube-api-burst B]
#                 [--peer BIN --peer-crds PATH] [--no-baseline] [--no-build]
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
PEER_BIN="" PEER_CRDS=""
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
# stops everything), grant_controller_rbac, new_namespace, controller_start.
# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench

if [ "$BUILD" = 1 ]; then
  say "building $CONTROLLER_BIN and $BENCH_BIN"
  { cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_SANITIZE=OFF >/dev/null && cmake --build "$BUILD_DIR" -j2 --target sandbox-controller sbx-bench >/dev/null; } ||
    { echo "build failed" >&2; exit 1; }
fi
[ -x "$CONTROLLER_BIN" ] && [ -x "$BENCH_BIN" ] || { echo "missing $CONTROLLER_BIN or $BENCH_BIN" >&2; exit 1; }

# value FILE KEY: a KEY=VALUE line of sbx-bench's output (nothing for a skipped phase).
value() { [ -f "$1" ] && sed -n "s/^$2=//p" "$1" | tail -n 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# ratio A B [FORMAT]: A / B, or n/a.
ratio() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b + 0 > 0 && a != "") printf f, a / b; else print "n/a" }'; }
mib() { awk -v k="$1" 'BEGIN { if (k > 0) printf "%.1f", k / 1024; else print "n/a" }'; }
hwm_kib() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$1/stat" 2>/dev/null; }
# scrape PORT: the /metrics text of the controller on PORT.
scrape() { curl -s --max-time 5 "http://127.0.0.1:$1/metrics"; }
# msum TEXT NAME [LABEL=VALUE]: the sum of NAME's series (with that label).
msum() {
  awk -v n="$2" -v l="${3:-}" '
    { name = $1; sub(/\{.*/, "", name) }
    name == n && (l == "" || index($1, l) > 0) { s += $NF; found = 1 }
    END { if (found) printf "%.0f", s; else print 0 }' <<<"$1"
}

# bench_fail MESSAGE: keeps the logs (e2e_cleanup keeps them on failure) and exits.
bench_fail() { say "$*"; E2E_FAILED=1; exit 1; }

BENCH_ARGS=(--count "$COUNT" --concurrency "$CONC" --scopes "$SCOPES" --owners "$OWNERS" --timeout "$TIMEOUT")
[ -n "$RATE" ] && BENCH_ARGS+=(--rate "$RATE")

# delete_namespace NS: deletes it and waits until it is gone (its pods too).
delete_namespace() {
  say "deleting namespace $1"
  kubectl delete namespace "$1" --wait=false >/dev/null || bench_fail "namespace $1 not deleted"
  # The local control plane runs no pvc-protection controller: once the pods
  # are gone, the workspace PVC's finalizer would hold the namespace forever.
  wait_for 900 bash -c "! kubectl get pods -n '$1' --no-headers 2>/dev/null | grep -q ."
  kubectl get pvc -n "$1" -o name 2>/dev/null |
    xargs -r kubectl patch -n "$1" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
  kubectl wait --for=delete "namespace/$1" --timeout=900s >/dev/null 2>&1 || bench_fail "namespace $1 not deleted"
}

# start_ours NAME: the controller at its defaults (plus any tuning flags),
# with metrics/probes on known ports; sets CTL_PID, METRICS_PORT, PROBE_PORT.
start_ours() {
  METRICS_PORT=$(free_port)
  PROBE_PORT=$(free_port)
  controller_start "$1" "${CTL_TUNING[@]}" \
    --metrics-bind-address "127.0.0.1:$METRICS_PORT" --health-probe-bind-address "127.0.0.1:$PROBE_PORT"
}

# wait_ready_ms PORT: polls /readyz every 20 ms; prints the ms it took.
wait_ready_ms() {
  local t0 t
  t0=$(date +%s%N)
  for _ in $(seq 1 15000); do
    curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$1/readyz" && break
    sleep 0.02
  done
  t=$(date +%s%N)
  echo $(((t - t0) / 1000000))
}

LOAD_START=$(load)
say "starting the control plane"
cluster_up
grant_controller_rbac

if [ -n "$SCALE" ]; then
  # Room for the pods (2 CPU each): the local control plane has 2 kwok nodes
  # of 2000 CPUs, 1000 such pods each.
  "$ROOT/hack/cluster.sh" nodes "$E2E_DIR" $(((SCALE + 999) / 1000 + 1)) || bench_fail "kwok nodes not Ready"
  new_namespace sbx-bench
  kubectl wait --for=jsonpath='{.status.phase}'=Bound pvc/sandbox-workspaces -n sbx-bench --timeout=60s >/dev/null ||
    bench_fail "the workspace PVC did not bind"
  start_ours ctl
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
  start_ours ctl2
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

new_namespace sbx-bench
kubectl wait --for=jsonpath='{.status.phase}'=Bound pvc/sandbox-workspaces -n sbx-bench --timeout=60s >/dev/null ||
  bench_fail "the workspace PVC did not bind"

MODE_DESC="burst of $COUNT from $CONC client threads"
[ -n "$RATE" ] && MODE_DESC="$RATE Sandboxes/s for $DURATION s ($COUNT), $CONC client threads"

B=$E2E_DIR/baseline.out C=$E2E_DIR/controller.out P=$E2E_DIR/peer.out
LB="" LC="" LP=""
if [ "$BASELINE" = 1 ]; then
  new_namespace sbx-bench-baseline
  kubectl wait --for=jsonpath='{.status.phase}'=Bound pvc/sandbox-workspaces -n sbx-bench-baseline --timeout=60s >/dev/null ||
    bench_fail "the baseline's workspace PVC did not bind"
  LB=$(load)
  say "baseline: $MODE_DESC, no controller"
  "$BENCH_BIN" baseline --namespace sbx-bench-baseline "${BENCH_ARGS[@]}" >"$B" ||
    bench_fail "baseline run failed; see $B"
  delete_namespace sbx-bench-baseline
fi

say "starting the controller"
start_ours ctl
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
pods=$(kubectl get pods -n sbx-bench -l app.kubernetes.io/managed-by=sandbox-controller --no-headers 2>/dev/null | wc -l)

if [ -n "$PEER_BIN" ]; then
  delete_namespace sbx-bench
  say "peer: applying $PEER_CRDS without conversion webhooks"
  kubectl apply --server-side -f "$PEER_CRDS" >/dev/null || bench_fail "cannot apply $PEER_CRDS"
  for crd in $(kubectl get crd -o name | grep 'agents.x-k8s.io'); do
    kubectl patch "$crd" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
    kubectl wait --for=condition=Established "$crd" --timeout=60s >/dev/null
  done
  kubectl create namespace sbx-bench-peer >/dev/null
  PEER_METRICS=$(free_port) PEER_PROBE=$(free_port)
  KUBECONFIG=$KUBECONFIG "$PEER_BIN" --enable-webhook=false --manage-webhook-certs=false \
    --leader-election-namespace=default \
    --metrics-bind-address "127.0.0.1:$PEER_METRICS" --health-probe-bind-address "127.0.0.1:$PEER_PROBE" \
    >"$E2E_DIR/peer.log" 2>&1 &
  PEER_PID=$!
  CTL_PIDS+=("$PEER_PID")
  wait_ready_ms "$PEER_PROBE" >/dev/null
  # It starts reconciling once it holds its Lease.
  for _ in $(seq 1 300); do
    scrape "$PEER_METRICS" | grep -q '^leader_election_master_status{.*} 1' && break
    sleep 0.1
  done
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
command:   hack/bench.sh $([ -n "$RATE" ] && echo "--rate $RATE --duration $DURATION" || echo "--count $COUNT") --concurrency $CONC ${CTL_TUNING[*]:-} $([ -n "$PEER_BIN" ] && echo "--peer $PEER_BIN --peer-crds $PEER_CRDS")
load:      $MODE_DESC; Sandbox i in scope i % $SCOPES; controllers at their defaults ${CTL_TUNING[*]:+(ours with ${CTL_TUNING[*]})}
host:      $(nproc) CPUs shared; loadavg $LOAD_START at start; baseline ${LB:-n/a}, controller ${LC:-n/a}, peer ${LP:-n/a} (before each phase); $(load) at end

                                    baseline    controller          peer
EOF
FILES=("$B" "$C" "$P")
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
events:     $ev_sent PodCreated events in sbx-bench when the run ended, $ev_dropped dropped (sandbox_events_dropped_total)
ratios:     controller/baseline Ready/s $(ratio "$(value "$C" ready_rate)" "$(value "$B" ready_rate)"), Ready p99 $(ratio "$(value "$C" ready_p99_ms)" "$(value "$B" ready_p99_ms)")
EOF
if [ -n "$PEER_BIN" ]; then
  cat <<EOF
            controller/peer Ready/s $(ratio "$(value "$C" ready_rate)" "$(value "$P" ready_rate)"), Ready p50 $(ratio "$(value "$C" ready_p50_ms)" "$(value "$P" ready_p50_ms)"), p99 $(ratio "$(value "$C" ready_p99_ms)" "$(value "$P" ready_p99_ms)"), CPU $(ratio "$(value "$C" cpu_run_s)" "$(value "$P" cpu_run_s)"), RSS $(ratio "$(value "$C" rss_peak_kib)" "$(value "$P" rss_peak_kib)"), requests/Sandbox $(ratio "$(value "$C" requests_per_sandbox_settled)" "$(value "$P" requests_per_sandbox_settled)")
            peer: $(value "$P" ready)/$COUNT Ready; CPU per 1,000 Sandboxes $(per1000 "$P") s
EOF
fi
if awk -v a="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(a > n / 2) }'; then
  echo "WARNING:    the host was busy before the run (1-minute loadavg ${LOAD_START%% *} on $(nproc) CPUs): other work shared the CPUs; compare ratios within this run"
fi
