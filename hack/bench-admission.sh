#!/usr/bin/env bash
# The admission cost, measured: the same sustained load of Sandbox creates
# (with workspace owners, so every create makes a SubjectAccessReview) is run
# twice on one local control plane, without and with the admission webhook,
# and the figures are printed side by side.
#
#   hack/bench-admission.sh [--count N] [--rate R] [--concurrency C] [--no-build]
#
#   1. without: the controller in --owner-authorization namespace mode, no
#      webhook configurations; Sandboxes created in adm-off;
#   2. with: the controller serving the webhook (accessReview mode), the
#      product's webhook configurations and pod policy installed; Sandboxes
#      created in adm-on.
# Printed: Sandboxes bound per second (first create to last Bound) and the
# ratio with/without; create latency percentiles (POST sent -> answered: the
# admission chain's cost as a client sees it) and create -> Bound; the
# webhook's own decision time (sandbox_admission_duration_seconds, histogram
# quantiles) and the API server's view of each webhook call
# (apiserver_admission_webhook_admission_duration_seconds). The client is the
# cluster admin, so every SubjectAccessReview is allowed.
#
# Another version's controller (a before/after pair, each run on its own):
# SBX_CONTROLLER_BIN=<its binary> SBX_WEBHOOK_MANIFESTS=<its manifests/webhook>
# (the admission objects and pod policies of that version: today's may refuse
# the pods an older controller builds). The load generator (sbx-bench), the
# CRDs and the control plane stay this tree's, so only the controller and its
# admission objects differ. Without SBX_CONTROLLER_BIN, this tree's is built.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=1000 RATE=100 CONC=16 BUILD=1
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --rate) RATE=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
for v in COUNT RATE CONC; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done

. "$ROOT/e2e/lib.sh"
. "$ROOT/e2e/lib_admission.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench
TARGETS=(sbx-bench)
[ -n "${SBX_CONTROLLER_BIN:-}" ] || TARGETS+=(sandbox-controller)
if [ "$BUILD" = 1 ]; then
  say "building ${TARGETS[*]} in $BUILD_DIR"
  { cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_SANITIZE=OFF >/dev/null &&
    cmake --build "$BUILD_DIR" -j2 --target "${TARGETS[@]}" >/dev/null; } || { echo "build failed" >&2; exit 1; }
fi
MANIFESTS=${SBX_WEBHOOK_MANIFESTS:-$ROOT/manifests/webhook}
for b in "$CONTROLLER_BIN" "$BENCH_BIN"; do [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }; done
[ -f "$MANIFESTS/webhooks.yaml" ] || { echo "no webhooks.yaml in $MANIFESTS (SBX_WEBHOOK_MANIFESTS)" >&2; exit 1; }
value() { sed -n "s/^$2=//p" "$1" | tail -n 1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "") printf "%.2f", a / b; else print "n/a" }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# quantile Q NAME SELECTOR < metrics: a histogram quantile (linear within the
# bucket, as PromQL's histogram_quantile) over the series matching SELECTOR.
quantile() {
  awk -v q="$1" -v n="$2" -v sel="$3" '
    index($0, n "_bucket{") == 1 && index($0, sel) > 0 {
      le = $0; sub(/.*le="/, "", le); sub(/".*/, "", le)
      c[le] += $NF; if (!(le in seen)) { seen[le] = 1; les[++k] = le }
    }
    END {
      if (!k) { print "n/a"; exit }
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
        if ((les[i] == "+Inf") || (les[j] != "+Inf" && les[j] + 0 < les[i] + 0)) { t = les[i]; les[i] = les[j]; les[j] = t }
      total = c["+Inf"]; if (!total) { print "n/a"; exit }
      want = q * total; prev = 0; pc = 0
      for (i = 1; i <= k; i++) {
        le = les[i]
        if (c[le] >= want) {
          if (le == "+Inf") { printf "> %.0f ms", prev * 1000; exit }
          printf "%.1f ms", (prev + (le - prev) * (want - pc) / (c[le] - pc)) * 1000; exit
        }
        prev = le + 0; pc = c[le]
      }
    }'
}

cluster_up
grant_controller_rbac
new_namespace adm-off
new_namespace adm-on
webhook_certs
say "load $(load)"

run_load() { # run_load NS OUT METRICS_PORT PID
  "$BENCH_BIN" controller --namespace "$1" --count "$COUNT" --rate "$RATE" --concurrency "$CONC" \
    --scopes "$COUNT" --owners 50 --wait bound --pid "$4" --metrics-url "http://127.0.0.1:$3/metrics" \
    >"$2" 2>"$2.err" || say "sbx-bench reported missing Sandboxes (see $2.err)"
}

say "phase 1: without admission"
LOAD_OFF=$(load)
MP=$(free_port)
controller_start off --metrics-bind-address "127.0.0.1:$MP"
OFF_PID=$CTL_PID
wait_for 60 curl -sf "http://127.0.0.1:$MP/metrics" || { say "controller did not start"; exit 1; }
run_load adm-off "$E2E_DIR/off.out" "$MP" "$OFF_PID"
controller_stop "$OFF_PID"

say "phase 2: with admission"
LOAD_ON=$(load)
MP=$(free_port)
WEBHOOK_PORT=$(free_port)
E2E_ADMISSION=1 controller_start on --metrics-bind-address "127.0.0.1:$MP" \
  --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
  --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
ON_PID=$CTL_PID
install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
APISERVER=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
apimetrics() { curl -s --cacert "$E2E_DIR/pki/ca.crt" --cert "$E2E_DIR/pki/admin.crt" --key "$E2E_DIR/pki/admin.key" "$APISERVER/metrics"; }
apimetrics >"$E2E_DIR/api-before.txt"
run_load adm-on "$E2E_DIR/on.out" "$MP" "$ON_PID"
curl -s "http://127.0.0.1:$MP/metrics" >"$E2E_DIR/ctl-metrics.txt"
apimetrics >"$E2E_DIR/api-after.txt"
controller_stop "$ON_PID"

# The API server's histogram over this phase only: after minus before.
awk 'NR == FNR { if ($1 ~ /^apiserver_admission_webhook_admission_duration_seconds_bucket/) b[$1] = $NF; next }
     $1 ~ /^apiserver_admission_webhook_admission_duration_seconds_bucket/ { print $1, $NF - b[$1] }' \
  "$E2E_DIR/api-before.txt" "$E2E_DIR/api-after.txt" >"$E2E_DIR/api-delta.txt"

OFF=$E2E_DIR/off.out ON=$E2E_DIR/on.out
echo
echo "== admission cost: $(date -u +%FT%TZ), $(nproc) CPUs, load $(load) at the end"
echo "== command: ${SBX_CONTROLLER_BIN:+SBX_CONTROLLER_BIN=$SBX_CONTROLLER_BIN }${SBX_WEBHOOK_MANIFESTS:+SBX_WEBHOOK_MANIFESTS=$SBX_WEBHOOK_MANIFESTS }hack/bench-admission.sh --count $COUNT --rate $RATE --concurrency $CONC"
echo "== controller: $CONTROLLER_BIN (sha256 $(sha256sum "$CONTROLLER_BIN" | cut -c1-12)), admission objects of $MANIFESTS"
echo "== load at the start of each phase: without $LOAD_OFF; with $LOAD_ON"
printf '%-40s %14s %14s %8s\n' "" "without" "with webhook" "ratio"
printf '%-40s %14s %14s %8s\n' "Sandboxes bound per second" "$(value "$OFF" rate)" "$(value "$ON" rate)" \
  "$(ratio "$(value "$ON" rate)" "$(value "$OFF" rate)")"
for k in create_p50_ms create_p99_ms bound_p50_ms bound_p99_ms; do
  printf '%-40s %14s %14s %8s\n' "$k" "$(value "$OFF" $k)" "$(value "$ON" $k)" \
    "$(ratio "$(value "$ON" $k)" "$(value "$OFF" $k)")"
done
printf '%-40s %14s %14s\n' "bound / created" "$(value "$OFF" bound)/$(value "$OFF" created)" "$(value "$ON" bound)/$(value "$ON" created)"
echo
echo "webhook decision time (sandbox_admission_duration_seconds, from its buckets):"
for w in mutate-sandbox validate-sandbox; do
  printf '  %-18s p50 %-10s p99 %s\n' "$w" \
    "$(quantile 0.5 sandbox_admission_duration_seconds "webhook=\"$w\"" <"$E2E_DIR/ctl-metrics.txt")" \
    "$(quantile 0.99 sandbox_admission_duration_seconds "webhook=\"$w\"" <"$E2E_DIR/ctl-metrics.txt")"
done
echo "API server's call to each webhook (apiserver_admission_webhook_admission_duration_seconds, this phase):"
for w in mutate.sandboxes.sandbox.dev validate.sandboxes.sandbox.dev; do
  printf '  %-32s p50 %-10s p99 %s\n' "$w" \
    "$(quantile 0.5 apiserver_admission_webhook_admission_duration_seconds "name=\"$w\"" <"$E2E_DIR/api-delta.txt")" \
    "$(quantile 0.99 apiserver_admission_webhook_admission_duration_seconds "name=\"$w\"" <"$E2E_DIR/api-delta.txt")"
done
grep -E '^sandbox_admission_requests_total' "$E2E_DIR/ctl-metrics.txt" | sed 's/^/  /'
