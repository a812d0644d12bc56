#!/usr/bin/env bash
# Throughput benchmark: how fast the controller binds Sandboxes, against a
# baseline that does the same API writes without a controller.
#
#   hack/bench.sh [--count N] [--concurrency C] [--scopes S] [--workers W]
#                 [--kube-api-qps Q] [--kube-api-burst B] [--no-build]
#
# It starts its own local control plane (hack/cluster.sh, stopped on exit),
# then, with hack/tools/sbx-bench as the client (C writer threads and an
# informer on the Sandboxes):
#   1. baseline: no controller running; for each Sandbox the client itself
#      POSTs it, POSTs a Pod and merge-PATCHes its status to Bound=True, in the
#      namespace sbx-bench-baseline, which is then deleted;
#   2. controller: the controller is started, the client POSTs the Sandboxes
#      into sbx-bench (owner workspace PVC bound) and waits until each shows
#      Bound=True.
# Sandbox i belongs to scope i % S (its own idempotencyKey; owners owner-00..49
# shared among the scopes). Default S = N: every Sandbox gets its own pod;
# S < N gives N - S adoptions.
#
# Environment: SBX_BUILD_DIR (default build/), SBX_BENCH_OWNERS (50),
# SBX_BENCH_TIMEOUT (seconds per phase, 600), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=1000 CONC=8 SCOPES="" WORKERS=8 QPS=500 BURST=1000 BUILD=1
OWNERS=${SBX_BENCH_OWNERS:-50}
TIMEOUT=${SBX_BENCH_TIMEOUT:-600}

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --scopes) SCOPES=${2:-}; shift 2 ;;
    --workers) WORKERS=${2:-}; shift 2 ;;
    --kube-api-qps) QPS=${2:-}; shift 2 ;;
    --kube-api-burst) BURST=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
SCOPES=${SCOPES:-$COUNT}
for v in COUNT CONC SCOPES WORKERS QPS BURST OWNERS TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
[ "$SCOPES" -le "$COUNT" ] || { echo "--scopes must not exceed --count" >&2; exit 2; }

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

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# value FILE KEY: a KEY=VALUE line of sbx-bench's output.
value() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

# bench_fail MESSAGE: keeps the logs (e2e_cleanup keeps them on failure) and exits.
bench_fail() { say "$*"; E2E_FAILED=1; exit 1; }

BENCH_ARGS=(--count "$COUNT" --concurrency "$CONC" --scopes "$SCOPES" --owners "$OWNERS" --timeout "$TIMEOUT")

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
say "starting the control plane"
cluster_up
grant_controller_rbac
new_namespace sbx-bench
kubectl wait --for=jsonpath='{.status.phase}'=Bound pvc/sandbox-workspaces -n sbx-bench --timeout=60s >/dev/null ||
  bench_fail "the workspace PVC did not bind"
kubectl create namespace sbx-bench-baseline >/dev/null

say "baseline: $COUNT Sandboxes, no controller (POST Sandbox, POST Pod, PATCH status each)"
"$BENCH_BIN" baseline --namespace sbx-bench-baseline "${BENCH_ARGS[@]}" >"$E2E_DIR/baseline.out" ||
  bench_fail "baseline run failed; see $E2E_DIR/baseline.out"
say "deleting the baseline namespace"
kubectl delete namespace sbx-bench-baseline --timeout=600s >/dev/null || bench_fail "baseline namespace not deleted"

METRICS_PORT=$(free_port)
PROBE_PORT=$(free_port)
CTL_FLAGS=(--kube-api-qps "$QPS" --kube-api-burst "$BURST" --workers "$WORKERS"
  --metrics-bind-address "127.0.0.1:$METRICS_PORT" --health-probe-bind-address "127.0.0.1:$PROBE_PORT")
say "starting the controller"
controller_start ctl "${CTL_FLAGS[@]}"
wait_for 120 curl -fsS -o /dev/null "http://127.0.0.1:$PROBE_PORT/readyz" ||
  bench_fail "controller not ready; see $E2E_DIR/ctl.log"

say "controller: $COUNT Sandboxes over $SCOPES scopes"
"$BENCH_BIN" controller --namespace sbx-bench "${BENCH_ARGS[@]}" --pid "$CTL_PID" \
  --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" >"$E2E_DIR/controller.out" ||
  bench_fail "controller run failed; see $E2E_DIR/controller.out and $E2E_DIR/ctl.log"
kill -0 "$CTL_PID" 2>/dev/null || bench_fail "the controller exited; see $E2E_DIR/ctl.log"
controller_stop "$CTL_PID" || say "the controller did not stop on SIGTERM"
pods=$(kubectl get pods -n sbx-bench -l app.kubernetes.io/managed-by=sandbox-controller --no-headers 2>/dev/null | wc -l)

B=$E2E_DIR/baseline.out C=$E2E_DIR/controller.out
ratio=$(awk -v c="$(value "$C" rate)" -v b="$(value "$B" rate)" 'BEGIN { if (b > 0) printf "%.2f", c / b; else print "n/a" }')
rss=$(awk -v k="$(value "$C" rss_peak_kib)" 'BEGIN { printf "%.1f MiB", k / 1024 }')
req_line="$(value "$C" requests_per_sandbox_settled) (once quiet; $(value "$C" requests_per_sandbox_bound) at the last Bound)"
[ "$(value "$C" requests_metric)" = present ] ||
  req_line="n/a (the controller's /metrics has no sandbox_kube_requests_total)"

cat <<EOF

=== sandbox-controller benchmark ===
command:     hack/bench.sh --count $COUNT --concurrency $CONC --scopes $SCOPES --workers $WORKERS --kube-api-qps $QPS --kube-api-burst $BURST
controller:  $(basename "$CONTROLLER_BIN") ${CTL_FLAGS[*]:0:6} (+ --kubeconfig, --seal-key-file, metrics/probe on 127.0.0.1)
load:        $COUNT Sandboxes, $SCOPES scopes, $OWNERS owners, $CONC client threads, 1 namespace
host:        $(nproc) CPUs shared by control plane, kwok, controller and bench; loadavg $LOAD_START at start, $(cut -d' ' -f1-3 /proc/loadavg) at end

controller:  $(value "$C" rate) Sandboxes bound/s   ($(value "$C" bound)/$COUNT bound in $(value "$C" seconds) s, first create -> last Bound=True; $(value "$C" adopted) adopted, $pods pods)
baseline:    $(value "$B" rate) Sandboxes/s         ($(value "$B" bound)/$COUNT in $(value "$B" seconds) s; POST Sandbox + POST Pod + PATCH status, no controller)
ratio:       $ratio (controller / baseline)
latency:     p50 $(value "$C" p50_ms) ms, p99 $(value "$C" p99_ms) ms   (POST returned -> informer sees Bound=True; baseline p50 $(value "$B" p50_ms) ms, p99 $(value "$B" p99_ms) ms)
resources:   peak RSS $rss (VmHWM), CPU $(value "$C" cpu_s) s total ($(value "$C" cpu_run_s) s during the run)
API req/Sbx: $req_line
reconciles:  $(value "$C" reconciles) ($(value "$C" reconcile_errors) ended in an error and were retried)
EOF
# Our own run keeps the CPUs busy; load before it started means other work shared them.
if awk -v a="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(a > n / 2) }'; then
  echo "WARNING:     the host was busy before the run (1-minute loadavg ${LOAD_START%% *} on $(nproc) CPUs): other work shared the CPUs; compare figures only between quiet runs"
fi
