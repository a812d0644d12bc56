#!/usr/bin/env bash
# The admission cost, measured: the same sustained load of Sandbox creates
# (with 50 workspace owners, so the webhook authorizes every create's owner)
# is run twice on one local control plane, without and with the admission webhook,
# and the figures are printed side by side.
#
#   hack/bench-admission.sh [--count N] [--rate R] [--concurrency C] [--rounds K] [--no-build] [--capture]
#                            [--without-policies] [--trace] [--alternate] [--empty-webhook]
#
#   1. without: the controller in --owner-authorization namespace mode, no
#      webhook configurations; Sandboxes created in adm-off-K;
#   2. with: the controller serving the webhook (accessReview mode), the
#      product's webhook configurations and pod policy installed; Sandboxes
#      created in adm-on-K. With --without-policies, the webhook
#      configurations alone: the product's ValidatingAdmissionPolicies
#      (manifests/webhook/*-policy.yaml) are deleted once installed, to
#      tell their share of the cost from the webhook calls'.
# The pair is run K times (--rounds, default 3), without then with (with
# --alternate: every second round with then without), each
# phase in a namespace of its own whose Sandboxes and pods are deleted before
# the next phase starts; the bound rates and ratio of each round are printed, and
# their median: one pair on a 2-CPU machine moves by 0.3 between runs.
# Printed: Sandboxes bound per second (first create to last Bound) and the
# ratio with/without; the creates answered per second (the offered rate is
# only delivered while C / create latency >= R: past that the client's
# threads set the pace, and the with-webhook phase, whose creates take two
# webhook calls longer, is held back by the client first: the default C, 64,
# delivered 96 to 98 of 100/s in both phases on 2 CPUs, 16 delivered 80 to
# 90 with the webhook); create latency percentiles (POST sent -> answered: the
# admission chain's cost as a client sees it) and create -> Bound; the
# webhook's own decision time (sandbox_admission_duration_seconds, histogram
# quantiles) and the API server's view of each webhook call
# (apiserver_admission_webhook_admission_duration_seconds). The client is the
# cluster admin, so every SubjectAccessReview is allowed, and one review of
# "use on every workspace" answers all 50 owners (an agent's grant).
# Then where the API server's call spends its time (issue 25): the share of
# calls above each of its bucket bounds (exact) per webhook and operation,
# its HTTP round trips alone (rest_client_request_duration_seconds of the
# webhook's host), the listener's own phases
# (http_server_request_phase_seconds), connections accepted, CPU seconds
# over the phase, and over its busy part alone ("while binding": 0.5 s
# samples from the first create to the last Bound, the machine's share busy
# and the API server's and controller's seconds run and waited).
# --capture (needs tcpdump, root): packet headers of the webhook port on lo
# during the phase with admission, and each call's time between the API
# server's first request byte entering the socket and the webhook's last
# answer byte leaving it (the kernel timestamps both): what the API server
# measures beyond that is its own (building and sending the review, reading
# and decoding the answer, its goroutines waiting for a CPU).
# --trace: the API server traces every request (OpenTelemetry,
# --tracing-config-file, every request sampled) to hack/otlpsink on
# loopback, which keeps its spans of webhook calls: each call's own time as
# the API server lived it, exact where its histogram has buckets at 25 and
# 100 ms only. Printed per round: the mutating webhook's creates, p50 / p99
# / max and the share above 50 ms, and in the last round's detail both
# webhooks' spans and their HTTP round trips. Tracing costs the API server
# CPU in both phases alike; the ratios of a traced run are its own.
#
# --empty-webhook: a third phase in each round, after the one without
# admission: the controller as without it, and two webhook configurations
# shaped like the product's Sandbox webhooks (the same rules, match
# conditions and timeouts, no policies) calling hack/mutator's /allow-all,
# which allows every review at once and does nothing else (Go's net/http,
# TLS, keep-alive). Its figures are what any webhook costs the API server
# on this machine: its bound rate against the phase without, and the API
# server's call to it (with --trace, each call exact). If a webhook that
# does nothing misses a latency goal here, the machine misses it, not the
# webhook.
#
# Another version's controller (a before/after pair, each run on its own):
# SBX_CONTROLLER_BIN=<its binary> SBX_WEBHOOK_MANIFESTS=<its manifests/webhook>
# (the admission objects and pod policies of that version: today's may refuse
# the pods an older controller builds). The load generator (sbx-bench), the
# CRDs and the control plane stay this tree's, so only the controller and its
# admission objects differ. Without SBX_CONTROLLER_BIN, this tree's is built.
# SBX_BENCH_CTL_FLAGS: more controller flags for both phases, split on spaces
# (e.g. "--max-reconciles-per-namespace 0": the one namespace of a phase is a
# tenant alone, held to that cap, 8 by default).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=1000 RATE=100 CONC=64 ROUNDS=3 BUILD=1 CAPTURE=0 WITHOUT_POLICIES= TRACE=0 TRACE_ARG= ALTERNATE=0 ALT_ARG=
EMPTY=0 EMPTY_ARG=
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --rate) RATE=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --rounds) ROUNDS=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --capture) CAPTURE=1; shift ;;
    --without-policies) WITHOUT_POLICIES=" --without-policies"; shift ;;
    --trace) TRACE=1 TRACE_ARG=" --trace"; shift ;;
    --alternate) ALTERNATE=1 ALT_ARG=" --alternate"; shift ;;
    --empty-webhook) EMPTY=1 EMPTY_ARG=" --empty-webhook"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
for v in COUNT RATE CONC ROUNDS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done

. "$ROOT/e2e/lib.sh"
. "$ROOT/e2e/lib_admission.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench
TARGETS=(sbx-bench)
[ -n "${SBX_CONTROLLER_BIN:-}" ] || TARGETS+=(sandbox-controller)
bench_build "${TARGETS[@]}"
MANIFESTS=${SBX_WEBHOOK_MANIFESTS:-$ROOT/manifests/webhook}
if [ "$EMPTY" = 1 ]; then
  go build -C "$ROOT/hack/mutator" -o "$BUILD_DIR/mutator" . || { echo "hack/mutator build failed" >&2; exit 1; }
fi
[ "$CAPTURE" = 0 ] || command -v tcpdump >/dev/null || { echo "--capture needs tcpdump" >&2; exit 1; }
for b in "$CONTROLLER_BIN" "$BENCH_BIN"; do [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }; done
[ -f "$MANIFESTS/webhooks.yaml" ] || { echo "no webhooks.yaml in $MANIFESTS (SBX_WEBHOOK_MANIFESTS)" >&2; exit 1; }

# over NAME SELECTOR SECONDS < metrics: the share of a histogram's
# observations (series matching SELECTOR, summed) above SECONDS, which must be
# one of its bucket bounds: exact, no interpolation.
over() {
  awk -v n="$1" -v sel="$2" -v x="$3" '
    index($0, n "_bucket{") == 1 && index($0, sel) > 0 {
      le = $0; sub(/.*le="/, "", le); sub(/".*/, "", le)
      if (le == "+Inf") tot += $NF; else if (le + 0 == x + 0) below += $NF
    }
    END { if (!tot) print "n/a"; else printf "%.1f%%", 100 * (tot - below) / tot }'
}
# secs OUT: the seconds of a load (sbx-bench: first create to last Bound).
secs() { awk -F= '$1 == "seconds" { print $2 }' "$1"; }
# schedstat PID: seconds its threads ran and waited runnable for a CPU
# (/proc/PID/task/*/schedstat: the kernel's run queue, threads alive now).
schedstat() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ r += $1; w += $2 } END { printf "%.3f %.3f", r / 1e9, w / 1e9 }'; }
# cpu_ticks: busy and total jiffies of the machine (/proc/stat).
cpu_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
# sampler_start OUT CTL_PID: every 0.5 s until sampler_stop, a line "epoch
# busy-jiffies total-jiffies api-ran api-waited ctl-ran ctl-waited" in OUT
# (the API server is $API_PID); its PID in SAMPLER, killed by the cleanup if
# we stop early.
sampler_start() {
  : >"$1"
  while :; do
    printf '%s %s %s %s\n' "$(date +%s.%N)" "$(cpu_ticks)" "$(schedstat "$API_PID")" "$(schedstat "$2")" >>"$1"
    sleep 0.5
  done &
  SAMPLER=$!
  track_pid "$SAMPLER"
}
sampler_stop() { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; }
# while_binding SAMPLES FROM SECONDS: the machine's share busy and the two
# processes' seconds ran and waited from the last sample at or before FROM
# to the first at or after FROM + SECONDS (the load's first create to its
# last Bound). The phase's whole figures also hold the seconds after the
# last Bound, while the controller settles and the machine is mostly idle.
while_binding() {
  awk -v a="$2" -v s="$3" '
    BEGIN { b = a + s }
    $1 <= a || !n { for (i = 1; i <= 7; i++) x[i] = $i; n = 1 }
    !m { for (i = 1; i <= 7; i++) y[i] = $i; if ($1 >= b) m = 1 }
    END {
      if (!n || y[3] == x[3]) { print "no samples"; exit }
      printf "%.1f s, the machine %.0f%% busy; kube-apiserver ran %.1f s, waited %.1f s; controller ran %.1f s, waited %.1f s",
        y[1] - x[1], 100 * (y[2] - x[2]) / (y[3] - x[3]), y[4] - x[4], y[5] - x[5], y[6] - x[6], y[7] - x[7] }' "$1"
}

# The trace sink runs before the control plane: the API server exports to it
# from its start.
if [ "$TRACE" = 1 ]; then
  go build -C "$ROOT/hack/otlpsink" -o "$BUILD_DIR/otlpsink" . || { echo "otlpsink build failed" >&2; exit 1; }
  TRACE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sbx-trace.XXXXXX")
  TRACE_PORT=$(python3 "$ROOT/hack/free-port.py")
  TRACES=$TRACE_DIR/webhook-calls.txt
  cat >"$TRACE_DIR/tracing.yaml" <<YAML
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: 127.0.0.1:$TRACE_PORT
samplingRatePerMillion: 1000000
YAML
  "$BUILD_DIR/otlpsink" --listen "127.0.0.1:$TRACE_PORT" --out "$TRACES" 2>"$TRACE_DIR/otlpsink.log" &
  track_pid "$!" # stopped with the control plane
  disown "$!"    # quietly
  export SBX_APISERVER_FLAGS="${SBX_APISERVER_FLAGS:-} --tracing-config-file=$TRACE_DIR/tracing.yaml"
fi
# spans FROM TO [KIND] [OP] [RESOURCE]: lines FROM+1..TO of the trace sink's
# file, of that webhook kind, operation and resource (substring).
spans() {
  sed -n "$(($1 + 1)),$2p" "$TRACES" | awk -v k="${3:-}" -v o="${4:-}" -v r="${5:-}" \
    '(k == "" || $1 == k) && (o == "" || $3 == o) && index($4, r) > 0'
}
# span_figures COLUMN < spans: n, p50, p99, max (ms) and the share above 50
# ms of a column (5: the whole call, 6: its HTTP round trip), nearest rank.
span_figures() {
  awk -v c="$1" '$c >= 0 { print $c / 1000 }' | sort -g |
    awk '{ v[NR] = $1; if ($1 > 50) o++ }
      END {
        if (!NR) { print "n=0"; exit }
        q50 = v[int(0.5 * NR + 0.999999)]; q99 = v[int(0.99 * NR + 0.999999)]
        printf "n=%d p50 %.1f ms p99 %.1f ms max %.1f ms >50ms %.1f%%", NR, q50, q99, v[NR], 100 * o / NR }'
}
trace_lines() { if [ -f "$TRACES" ]; then wc -l <"$TRACES"; else echo 0; fi; }

cluster_up
grant_controller_rbac
webhook_certs
say "load $(load)"

# The empty webhook (--empty-webhook): hack/mutator, its own self-signed
# certificate, for the whole run.
if [ "$EMPTY" = 1 ]; then
  mkdir -p "$E2E_DIR/empty-webhook"
  "$BUILD_DIR/mutator" -cert-dir "$E2E_DIR/empty-webhook" -port-file "$E2E_DIR/empty-webhook/port" \
    >"$E2E_DIR/empty-webhook.log" 2>&1 &
  track_pid "$!" # stopped with the control plane
  disown "$!"    # quietly
  wait_for 20 test -s "$E2E_DIR/empty-webhook/port" || { say "the empty webhook did not start"; exit 1; }
  EMPTY_PORT=$(cat "$E2E_DIR/empty-webhook/port")
fi
# empty_calls: the reviews the empty webhook has allowed so far.
empty_calls() { curl -sk "https://127.0.0.1:$EMPTY_PORT/healthz" | awk '{ print $3 + 0 }'; }
# install_empty: the product's two Sandbox webhooks (mutating and
# validating, as rendered for this run) pointed at the empty webhook, and
# nothing else of the product's admission; returns once the API server
# calls both for a Sandbox create (a server-side dry run).
install_empty() {
  render_admission "$EMPTY_PORT" sandbox-controller | python3 -c '
import base64, json, sys
port, ca = sys.argv[1:3]
bundle = base64.b64encode(open(ca, "rb").read()).decode()
doc = json.load(sys.stdin)
keep = ("mutate.sandboxes.sandbox.dev", "validate.sandboxes.sandbox.dev")
items = []
for x in doc["items"]:
    if x["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        continue
    x["webhooks"] = [w for w in x["webhooks"] if w["name"] in keep]
    for w in x["webhooks"]:
        w["clientConfig"] = {"url": "https://127.0.0.1:%s/allow-all" % port, "caBundle": bundle}
    items.append(x)
doc["items"] = items
print(json.dumps(doc))' "$EMPTY_PORT" "$E2E_DIR/empty-webhook/tls.crt" | kubectl apply -f - >/dev/null || return 1
  local i n0
  for i in $(seq 1 100); do
    n0=$(empty_calls)
    kubectl create --dry-run=server -f - >/dev/null 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: empty-probe, namespace: default}
spec: {image: probe}
YAML
    [ "$(empty_calls)" -ge $((n0 + 2)) ] && return 0
    sleep 0.2
  done
  say "the API server never called the empty webhook for both configurations"
  return 1
}

run_load() { # run_load NS OUT METRICS_PORT PID
  "$BENCH_BIN" controller --namespace "$1" --count "$COUNT" --rate "$RATE" --concurrency "$CONC" \
    --scopes "$COUNT" --owners 50 --wait bound --pid "$4" --metrics-url "http://127.0.0.1:$3/metrics" \
    >"$2" 2>"$2.err" || say "sbx-bench reported missing Sandboxes (see $2.err)"
}

API_PID=$(cat "$E2E_DIR/pids/kube-apiserver" 2>/dev/null)
APISERVER=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
apimetrics() { curl -s --cacert "$E2E_DIR/pki/ca.crt" --cert "$E2E_DIR/pki/admin.crt" --key "$E2E_DIR/pki/admin.key" "$APISERVER/metrics"; }

# A round runs both phases, without admission then with it; with
# --alternate, every second round runs them the other way round, so what one
# phase leaves the next (the API server and etcd still digesting a thousand
# deletions) weighs on both alike. The figures of the last round's phase with
# admission are the ones detailed below.
R_OFF=() R_ON=() R_WH=() R_TR=() C_OFF=() C_ON=() ORDER=()
R_EMPTY=() R_EWH=() R_ETR=() C_EMPTY=()
# start_plain NAME: a controller without admission (owner authorization by
# namespace), its metrics on MP, serving once start_plain returns (CTL_PID).
start_plain() {
  MP=$(free_port)
  # shellcheck disable=SC2086 # SBX_BENCH_CTL_FLAGS: split on spaces
  controller_start "$1" --metrics-bind-address "127.0.0.1:$MP" ${SBX_BENCH_CTL_FLAGS:-}
  wait_for 60 curl -sf "http://127.0.0.1:$MP/metrics" || { say "controller did not start"; exit 1; }
}
# call_figures PREFIX FROM: the API server's calls to the webhooks over a
# phase. Its histogram, after minus before ($E2E_DIR/PREFIXapi-{before,after}.txt),
# into PREFIXapi-delta.txt and its p99 for the mutating webhook in WH_P99;
# with --trace, once the spans are exported, the traced calls to the mutating
# webhook for Sandbox creates after trace line FROM in TR_FIG, and the
# trace's last line in TL_END.
call_figures() {
  local p=$E2E_DIR/${1}api
  series_delta "$p-before.txt" "$p-after.txt" '^apiserver_admission_webhook_admission_duration_seconds_bucket' \
    >"$p-delta.txt"
  WH_P99=$(quantile 0.99 apiserver_admission_webhook_admission_duration_seconds 'name="mutate.sandboxes.sandbox.dev"' <"$p-delta.txt")
  [ "$TRACE" = 1 ] || return 0
  sleep 6 # the API server exports its spans in batches, every 5 s
  TL_END=$(trace_lines)
  TR_FIG=$(spans "$2" "$TL_END" mutating CREATE Resource=sandboxes | span_figures 5)
}
phase_without() {
  uninstall_admission
  sleep 2 # the API server's lag in dropping a webhook configuration
  say "round $ROUND of $ROUNDS: without admission"
  LOAD_OFF=$(load)
  start_plain off
  OFF_PID=$CTL_PID
  sampler_start "$E2E_DIR/off-$ROUND.cpu" "$OFF_PID"
  T0_OFF=$(date +%s.%N)
  run_load "adm-off-$ROUND" "$E2E_DIR/off-$ROUND.out" "$MP" "$OFF_PID"
  sampler_stop
  delete_namespace "adm-off-$ROUND" # its pods gone before the next phase
  controller_stop "$OFF_PID"
}
phase_empty() {
  uninstall_admission
  install_empty || exit 1
  say "round $ROUND of $ROUNDS: with the empty webhook"
  LOAD_EMPTY=$(load)
  start_plain empty
  EMPTY_PID=$CTL_PID
  apimetrics >"$E2E_DIR/empty-api-before.txt"
  sampler_start "$E2E_DIR/empty-$ROUND.cpu" "$EMPTY_PID"
  local tl0=0 # its own: TL0 and TL1 are the phase with admission's
  [ "$TRACE" = 0 ] || tl0=$(trace_lines)
  T0_EMPTY=$(date +%s.%N)
  run_load "adm-empty-$ROUND" "$E2E_DIR/empty-$ROUND.out" "$MP" "$EMPTY_PID"
  sampler_stop
  apimetrics >"$E2E_DIR/empty-api-after.txt"
  delete_namespace "adm-empty-$ROUND"
  controller_stop "$EMPTY_PID"
  uninstall_admission
  call_figures empty- "$tl0"
  R_EWH+=("$WH_P99")
  [ "$TRACE" = 0 ] || R_ETR+=("$TR_FIG")
}
phase_with() {
  say "round $ROUND of $ROUNDS: with admission"
  LOAD_ON=$(load)
  MP=$(free_port)
  WEBHOOK_PORT=$(free_port)
  # shellcheck disable=SC2086 # SBX_BENCH_CTL_FLAGS: split on spaces
  E2E_ADMISSION=1 controller_start on --metrics-bind-address "127.0.0.1:$MP" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt" ${SBX_BENCH_CTL_FLAGS:-}
  ON_PID=$CTL_PID
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  if [ -n "$WITHOUT_POLICIES" ]; then
    kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy \
      -l app.kubernetes.io/name=sandbox-controller --ignore-not-found >/dev/null
    sleep 2 # the API server's lag in dropping them
  fi
  apimetrics >"$E2E_DIR/api-before.txt"
  curl -s "http://127.0.0.1:$MP/metrics" >"$E2E_DIR/ctl-before.txt"
  if [ "$CAPTURE" = 1 ]; then
    tcpdump -i lo -n -s 96 -w "$E2E_DIR/webhook.pcap" "tcp port $WEBHOOK_PORT" 2>"$E2E_DIR/tcpdump.err" &
    PCAP_PID=$!
    track_pid "$PCAP_PID" # killed by the cleanup if we stop early
    sleep 1
  fi
  read -r BUSY0 TICKS0 < <(cpu_ticks)
  read -r ARUN0 AWAIT0 < <(schedstat "$API_PID")
  read -r CRUN0 CWAIT0 < <(schedstat "$ON_PID")
  sampler_start "$E2E_DIR/on-$ROUND.cpu" "$ON_PID"
  [ "$TRACE" = 0 ] || TL0=$(trace_lines)
  T0=$(date +%s.%N)
  run_load "adm-on-$ROUND" "$E2E_DIR/on-$ROUND.out" "$MP" "$ON_PID"
  T1=$(date +%s.%N)
  sampler_stop
  read -r BUSY1 TICKS1 < <(cpu_ticks)
  read -r ARUN1 AWAIT1 < <(schedstat "$API_PID")
  read -r CRUN1 CWAIT1 < <(schedstat "$ON_PID")
  if [ "$CAPTURE" = 1 ]; then
    sleep 1
    kill -INT "$PCAP_PID" 2>/dev/null
    wait "$PCAP_PID" 2>/dev/null
  fi
  curl -s "http://127.0.0.1:$MP/metrics" >"$E2E_DIR/ctl-metrics.txt"
  apimetrics >"$E2E_DIR/api-after.txt"
  delete_namespace "adm-on-$ROUND"
  controller_stop "$ON_PID"
  call_figures "" "${TL0:-0}"
  R_WH+=("$WH_P99")
  [ "$TRACE" = 0 ] || { TL1=$TL_END; R_TR+=("$TR_FIG"); }
}
for ROUND in $(seq 1 "$ROUNDS"); do
  new_namespace "adm-off-$ROUND"
  new_namespace "adm-on-$ROUND"
  [ "$EMPTY" = 0 ] || new_namespace "adm-empty-$ROUND"
  if [ "$ALTERNATE" = 1 ] && [ $((ROUND % 2)) = 0 ]; then
    phase_with
    phase_without
    [ "$EMPTY" = 0 ] || phase_empty
    ORDER+=("with first")
  else
    phase_without
    [ "$EMPTY" = 0 ] || phase_empty
    phase_with
    ORDER+=("")
  fi
  if [ "$EMPTY" = 1 ]; then
    R_EMPTY+=("$(value "$E2E_DIR/empty-$ROUND.out" rate)") C_EMPTY+=("$(value "$E2E_DIR/empty-$ROUND.out" create_rate)")
  fi
  R_OFF+=("$(value "$E2E_DIR/off-$ROUND.out" rate)") R_ON+=("$(value "$E2E_DIR/on-$ROUND.out" rate)")
  C_OFF+=("$(value "$E2E_DIR/off-$ROUND.out" create_rate)") C_ON+=("$(value "$E2E_DIR/on-$ROUND.out" create_rate)")
done

OFF=$E2E_DIR/off-$ROUNDS.out ON=$E2E_DIR/on-$ROUNDS.out
echo
echo "== admission cost: $(date -u +%FT%TZ), $(nproc) CPUs, load $(load) at the end"
echo "== command: ${SBX_BENCH_CTL_FLAGS:+SBX_BENCH_CTL_FLAGS=\"$SBX_BENCH_CTL_FLAGS\" }${SBX_CONTROLLER_BIN:+SBX_CONTROLLER_BIN=$SBX_CONTROLLER_BIN }${SBX_WEBHOOK_MANIFESTS:+SBX_WEBHOOK_MANIFESTS=$SBX_WEBHOOK_MANIFESTS }hack/bench-admission.sh --count $COUNT --rate $RATE --concurrency $CONC --rounds $ROUNDS$WITHOUT_POLICIES$TRACE_ARG$ALT_ARG$EMPTY_ARG"
echo "== controller: $CONTROLLER_BIN (sha256 $(sha256sum "$CONTROLLER_BIN" | cut -c1-12)), admission objects of $MANIFESTS"
echo "== load at the start of the last round's phases: without $LOAD_OFF; with $LOAD_ON"
echo "Sandboxes bound per second, each round (without, with webhook, ratio; the API server's call to the mutating webhook, p99;"
echo "creates answered per second without / with: below $RATE, the client's $CONC threads, not the server, set the pace):"
for i in "${!R_ON[@]}"; do
  printf '  round %d: %10s %10s %8s   %-10s  creates/s %s / %s%s\n' $((i + 1)) "${R_OFF[i]}" "${R_ON[i]}" \
    "$(ratio "${R_ON[i]}" "${R_OFF[i]}")" "${R_WH[i]}" "${C_OFF[i]}" "${C_ON[i]}" "${ORDER[i]:+  (${ORDER[i]})}"
done
if [ "$TRACE" = 1 ]; then
  echo "the API server's calls to the mutating webhook for Sandbox creates, traced (each call's span, exact):"
  for i in "${!R_TR[@]}"; do printf '  round %d: %s\n' $((i + 1)) "${R_TR[i]}"; done
fi
RATIOS=$(for i in "${!R_ON[@]}"; do ratio "${R_ON[i]}" "${R_OFF[i]}"; echo; done)
MEDIAN=$(median %.2f <<<"$RATIOS")
[ -z "$MEDIAN" ] || printf '  median ratio of %d rounds: %s\n' "$(grep -vc n/a <<<"$RATIOS")" "$MEDIAN"
if [ "$EMPTY" = 1 ]; then
  echo "the empty webhook (hack/mutator /allow-all in the product's two Sandbox webhook configurations, no policies), each round:"
  echo "Sandboxes bound per second, ratio against without; the API server's call to it, p99 (histogram); creates answered per second:"
  for i in "${!R_EMPTY[@]}"; do
    printf '  round %d: %10s %8s   %-10s  creates/s %s%s\n' $((i + 1)) "${R_EMPTY[i]}" \
      "$(ratio "${R_EMPTY[i]}" "${R_OFF[i]}")" "${R_EWH[i]}" "${C_EMPTY[i]}" \
      "${R_ETR[i]:+$'\n'           traced: ${R_ETR[i]}}"
  done
  ERATIOS=$(for i in "${!R_EMPTY[@]}"; do ratio "${R_EMPTY[i]}" "${R_OFF[i]}"; echo; done)
  EMEDIAN=$(median %.2f <<<"$ERATIOS")
  [ -z "$EMEDIAN" ] || printf '  median ratio of %d rounds: %s\n' "$(grep -vc n/a <<<"$ERATIOS")" "$EMEDIAN"
  EOUT=$E2E_DIR/empty-$ROUNDS.out
  printf '  last round: create p50 / p99 %s / %s ms, Bound p50 / p99 %s / %s ms\n' "$(value "$EOUT" create_p50_ms)" \
    "$(value "$EOUT" create_p99_ms)" "$(value "$EOUT" bound_p50_ms)" "$(value "$EOUT" bound_p99_ms)"
  AHE=apiserver_admission_webhook_admission_duration_seconds
  for w in mutate.sandboxes.sandbox.dev validate.sandboxes.sandbox.dev; do
    sel="name=\"$w\",operation=\"CREATE\""
    printf '  last round, %-32s CREATE n=%-6s >5ms %-6s >25ms %-6s >100ms %s\n' "$w" \
      "$(observations $AHE "$sel" <"$E2E_DIR/empty-api-delta.txt")" "$(over $AHE "$sel" 0.005 <"$E2E_DIR/empty-api-delta.txt")" \
      "$(over $AHE "$sel" 0.025 <"$E2E_DIR/empty-api-delta.txt")" "$(over $AHE "$sel" 0.1 <"$E2E_DIR/empty-api-delta.txt")"
  done
  echo "  last round, while binding: $(while_binding "$E2E_DIR/empty-$ROUNDS.cpu" "$T0_EMPTY" "$(secs "$E2E_DIR/empty-$ROUNDS.out")")"
fi
echo "the last round in detail:"
printf '%-40s %14s %14s %8s\n' "" "without" "with webhook" "ratio"
row() { # row LABEL KEY: KEY without and with the webhook, and their ratio
  printf '%-40s %14s %14s %8s\n' "$1" "$(value "$OFF" "$2")" "$(value "$ON" "$2")" \
    "$(ratio "$(value "$ON" "$2")" "$(value "$OFF" "$2")")"
}
row "Sandboxes bound per second" rate
row "creates answered per second" create_rate
for k in create_p50_ms create_p99_ms bound_p50_ms bound_p99_ms; do row "$k" "$k"; done
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
if [ "$TRACE" = 1 ]; then
  echo "the same, traced (spans of the last round's phase; the HTTP round trip: the span's start to \"Request completed\"):"
  for k in mutating validating; do
    spans "$TL0" "$TL1" "$k" | awk '{ print $2, $3 }' | sort -u | while read -r w op; do
      calls=$(spans "$TL0" "$TL1" "$k" "$op" | awk -v w="$w" '$2 == w')
      printf '  %-32s %-7s call:  %s\n' "$w" "$op" "$(span_figures 5 <<<"$calls")"
      printf '  %-32s %-7s round trip: %s\n' "" "" "$(span_figures 6 <<<"$calls")"
    done
  done
fi

# Where the API server's call spends its tail (issue 25): the exact shares
# above the API server's bucket bounds, per webhook and operation; its HTTP
# round trips alone; the listener's own phases; connections; CPU.
AH=apiserver_admission_webhook_admission_duration_seconds
echo "API server's calls, this phase: count and share above 5/25/100/500 ms (exact, at its bucket bounds):"
sed -n 's/.*name="\([^"]*\)",operation="\([^"]*\)".*/\1 \2/p' "$E2E_DIR/api-delta.txt" | sort -u |
  while read -r w op; do
    sel="name=\"$w\",operation=\"$op\""
    n=$(observations $AH "$sel" <"$E2E_DIR/api-delta.txt")
    [ "$n" -gt 0 ] || continue
    printf '  %-32s %-7s n=%-6s >5ms %-6s >25ms %-6s >100ms %-6s >500ms %s\n' "$w" "$op" "$n" \
      "$(over $AH "$sel" 0.005 <"$E2E_DIR/api-delta.txt")" "$(over $AH "$sel" 0.025 <"$E2E_DIR/api-delta.txt")" \
      "$(over $AH "$sel" 0.1 <"$E2E_DIR/api-delta.txt")" "$(over $AH "$sel" 0.5 <"$E2E_DIR/api-delta.txt")"
  done
RC=rest_client_request_duration_seconds
series_delta "$E2E_DIR/api-before.txt" "$E2E_DIR/api-after.txt" "^${RC}_bucket" >"$E2E_DIR/api-rest-delta.txt"
sel="host=\"127.0.0.1:$WEBHOOK_PORT\""
printf '  its HTTP round trips (%s{%s}): n=%s >5ms %s >25ms %s >100ms %s\n' "$RC" "$sel" \
  "$(observations $RC "$sel" <"$E2E_DIR/api-rest-delta.txt")" "$(over $RC "$sel" 0.005 <"$E2E_DIR/api-rest-delta.txt")" \
  "$(over $RC "$sel" 0.025 <"$E2E_DIR/api-rest-delta.txt")" "$(over $RC "$sel" 0.1 <"$E2E_DIR/api-rest-delta.txt")"
VAP='name="ValidatingAdmissionPolicy",operation="CREATE",rejected="false"'
AC=apiserver_admission_controller_admission_duration_seconds
series_delta "$E2E_DIR/api-before.txt" "$E2E_DIR/api-after.txt" "^${AC}_bucket" >"$E2E_DIR/api-vap-delta.txt"
printf '  for comparison, its in-process policies (%s{%s}): n=%s >5ms %s >25ms %s >100ms %s\n' "$AC" "$VAP" \
  "$(observations $AC "$VAP" <"$E2E_DIR/api-vap-delta.txt")" "$(over $AC "$VAP" 0.005 <"$E2E_DIR/api-vap-delta.txt")" \
  "$(over $AC "$VAP" 0.025 <"$E2E_DIR/api-vap-delta.txt")" "$(over $AC "$VAP" 0.1 <"$E2E_DIR/api-vap-delta.txt")"
GS=go_sched_latencies_seconds
series_delta "$E2E_DIR/api-before.txt" "$E2E_DIR/api-after.txt" "^${GS}_bucket" >"$E2E_DIR/api-sched-delta.txt"
printf '  its goroutines runnable, waiting for a CPU (%s): n=%s >10.5ms %s >117ms %s\n' "$GS" \
  "$(observations $GS "" <"$E2E_DIR/api-sched-delta.txt")" \
  "$(over $GS "" 0.010485759999999998 <"$E2E_DIR/api-sched-delta.txt")" \
  "$(over $GS "" 0.11744051199999998 <"$E2E_DIR/api-sched-delta.txt")"
PH=http_server_request_phase_seconds
series_delta "$E2E_DIR/ctl-before.txt" "$E2E_DIR/ctl-metrics.txt" "^${PH}_bucket" >"$E2E_DIR/ctl-delta.txt"
echo "the webhook listener's phases, this phase ($PH{listener=\"webhook\"}):"
for p in total handshake read queue handle reply write; do
  sel="listener=\"webhook\",phase=\"$p\""
  printf '  %-10s n=%-6s p50 %-9s p99 %-9s >25ms %-6s >50ms %-6s >100ms %s\n' "$p" \
    "$(observations $PH "$sel" <"$E2E_DIR/ctl-delta.txt")" \
    "$(quantile 0.5 $PH "$sel" <"$E2E_DIR/ctl-delta.txt")" "$(quantile 0.99 $PH "$sel" <"$E2E_DIR/ctl-delta.txt")" \
    "$(over $PH "$sel" 0.025 <"$E2E_DIR/ctl-delta.txt")" "$(over $PH "$sel" 0.05 <"$E2E_DIR/ctl-delta.txt")" \
    "$(over $PH "$sel" 0.1 <"$E2E_DIR/ctl-delta.txt")"
done
echo "owner authorizations this phase (sandbox_admission_access_reviews_total: cached, shared or asked of the API server):"
series_delta "$E2E_DIR/ctl-before.txt" "$E2E_DIR/ctl-metrics.txt" '^sandbox_admission_access_reviews_total' |
  awk '{ printf "  %s %d\n", $1, $2 }'
ACC='http_server_connections_accepted_total{listener="webhook"}'
printf 'webhook connections accepted this phase: %s\n' \
  "$(series_delta "$E2E_DIR/ctl-before.txt" "$E2E_DIR/ctl-metrics.txt" '^http_server_connections_accepted_total' |
     awk -v k="$ACC" '$1 == k { printf "%d", $2 }')"
cpu() { awk '$1 == "process_cpu_seconds_total" { print $2 + 0 }' "$1"; }
awk -v t0="$T0" -v t1="$T1" -v a0="$(cpu "$E2E_DIR/api-before.txt")" -v a1="$(cpu "$E2E_DIR/api-after.txt")" \
  -v c0="$(cpu "$E2E_DIR/ctl-before.txt")" -v c1="$(cpu "$E2E_DIR/ctl-metrics.txt")" \
  -v b="$((BUSY1 - BUSY0))" -v t="$((TICKS1 - TICKS0))" -v n="$(nproc)" 'BEGIN {
    printf "CPU this phase (%.1f s): kube-apiserver %.1f s, controller %.1f s, the machine %.0f%% busy of %d CPUs\n",
      t1 - t0, a1 - a0, c1 - c0, t ? 100 * b / t : 0, n }'
awk -v ar="$ARUN0 $ARUN1" -v aw="$AWAIT0 $AWAIT1" -v cr="$CRUN0 $CRUN1" -v cw="$CWAIT0 $CWAIT1" 'BEGIN {
    split(ar, a); split(aw, b); split(cr, c); split(cw, d)
    ra = a[2] - a[1]; wa = b[2] - b[1]; rc = c[2] - c[1]; wc = d[2] - d[1]
    printf "threads runnable but waiting for a CPU (kernel run queue), per second run: kube-apiserver %.2f s (%.1f s waited, %.1f s ran), controller %.2f s (%.1f s, %.1f s)\n",
      (ra > 0 ? wa / ra : 0), wa, ra, (rc > 0 ? wc / rc : 0), wc, rc }'
echo "while binding (the load's first create to its last Bound; 0.5 s samples):"
echo "  without: $(while_binding "$E2E_DIR/off-$ROUNDS.cpu" "$T0_OFF" "$(secs "$E2E_DIR/off-$ROUNDS.out")")"
echo "  with:    $(while_binding "$E2E_DIR/on-$ROUNDS.cpu" "$T0" "$(secs "$E2E_DIR/on-$ROUNDS.out")")"
if [ "$CAPTURE" = 1 ]; then
  echo "on the wire (tcpdump on lo, $(cat "$E2E_DIR/tcpdump.err" | grep -o '[0-9]* packets dropped by kernel' || echo '? dropped')):"
  tcpdump -r "$E2E_DIR/webhook.pcap" -n -tt 2>/dev/null | python3 -c '
import sys
port = sys.argv[1]
conns, syns = {}, 0
for line in sys.stdin:
    f = line.split()
    if len(f) < 5 or f[1] != "IP":
        continue
    src, dst = f[2], f[4].rstrip(":")
    sport, dport = src.rsplit(".", 1)[1], dst.rsplit(".", 1)[1]
    client = dport == port
    key = sport if client else dport
    c = conns.setdefault(key, {"runs": [], "syn": False})
    if "[S]," in line:
        c["syn"] = True
        syns += 1
        continue
    n = int(f[-1]) if f[-2] == "length" else 0
    if not n:
        continue
    t = float(f[0])
    runs = c["runs"]
    if runs and runs[-1][0] == client:
        runs[-1][2] = t
    else:
        runs.append([client, t, t])
calls = []
for c in conns.values():
    runs = c["runs"]
    # A connection opened in the capture starts with its TLS handshake: two
    # turns each way (the client certificate and Finished, then the tickets).
    skip = 2 if c["syn"] else 0
    seen = 0
    for i in range(len(runs) - 1):
        if runs[i][0] and not runs[i + 1][0]:
            seen += 1
            if seen > skip:
                calls.append(runs[i + 1][2] - runs[i][1])
calls.sort()
if not calls:
    print("  no calls captured")
    sys.exit()
q = lambda p: calls[min(len(calls) - 1, int(p * len(calls)))] * 1000
over = lambda ms: 100.0 * sum(1 for x in calls if x * 1000 > ms) / len(calls)
print("  first request byte sent -> last answer byte sent: n=%d p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms" %
      (len(calls), q(0.5), q(0.9), q(0.99), calls[-1] * 1000))
print("  share above 5/25/50/100 ms: %.1f%% %.1f%% %.1f%% %.1f%%; connections opened: %d" %
      (over(5), over(25), over(50), over(100), syns))
' "$WEBHOOK_PORT"
fi
[ "$TRACE" = 0 ] || rm -rf "$TRACE_DIR"
