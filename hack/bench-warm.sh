#!/usr/bin/env bash
# Benchmark: warm pools (contract section 8). create -> Ready of cold pods,
# of warm hits on a SandboxWarmPool and of kubernetes-sigs/agent-sandbox's
# SandboxClaim on its SandboxWarmPool, on one local control plane whose kwok
# delays every pod's readiness by a container start (the same for every
# system), in one run. A command, not a test: it prints figures and fails only
# when something breaks.
#
#   hack/bench-warm.sh [--rate R] [--duration T] [--burst N] [--concurrency C]
#                      [--ready-delay MS] [--ready-jitter MS]
#                      [--peer BIN --peer-crds PATH] [--warm-pool-settle S]
#                      [--controller-arg ARG]... [--no-cold] [--no-warm] [--warm-quota]
#                      [--no-build]
#
# kwok makes each pod Running and Ready a delay drawn from [MS, MS + JITTER)
# after it sees it scheduled (default 3000 + up to 1000 ms; hack/cluster.sh,
# SBX_KWOK_POD_READY_DELAY_MS). Two loads per system, each in a namespace of
# its own, deleted before the next: R Sandboxes/s for T s (default 20/s for
# 30 s, latencies from when each was due), then a burst of N (default 200)
# from C client threads (default 8, latencies from the POST). Every Sandbox
# has workspaceOwner owner-00 and a key of its own.
#   cold   our controller, no pool: a new pod each;
#   warm   our controller and a SandboxWarmPool (sandbox.dev/v1alpha1) of the
#          load's size (R * T, then N) with the Sandboxes' template and owner,
#          pre-warmed until readyReplicas == replicas and its settle time
#          has passed (--warm-pool-settle S, given to the controller too;
#          default its own 90 s): every Sandbox should be a warm hit
#          (status.binding Warm);
#   warm+quota (with --warm-quota) the same under a SandboxQuota of the
#          owner with maxWarm the pool's size: each warm pod takes a warm
#          slot (docs/api.md "Quota slots") before it is made, and frees it
#          when a Sandbox takes it; the cost of that, against warm;
#   claim  (with --peer) agent-sandbox built from source, run out of cluster
#          with the admin kubeconfig (--extensions, webhooks off, no leader
#          election as ours, its CRDs applied without conversion webhooks):
#          a SandboxTemplate with the
#          same pod (1 container, 2 CPU / 4Gi, no NetworkPolicy: ours makes
#          none), a SandboxWarmPool of the load's size pre-warmed the same
#          way, and one SandboxClaim per Sandbox.
# Each controller runs at its defaults (ours with --owner-authorization
# namespace and no webhook, plus any --controller-arg). Printed per phase:
# create -> Ready p50/p99 (and -> Bound for ours), warm hits, and from before
# the load until the pool is full again and the controller quiet: its API
# requests per Sandbox by method (rest_client_requests_total: the bind and
# the pool's refill of it), CPU, peak RSS (VmHWM reset before the load). For
# the pools, the lowest readyReplicas seen and, after the burst, the refill:
# how long until readyReplicas was back at N, and N over that time. The goal of issue 17 is printed as a
# ratio: our warm p99 / agent-sandbox's claim p99 (at most 0.5).
#
# Environment: SBX_BUILD_DIR (default build/), SBX_BENCH_TIMEOUT (seconds per
# phase, 900), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RATE=20 DURATION=30 BURST=200 CONC=8 DELAY=3000 JITTER=1000 BUILD=1 COLD=1 WARM=1 WARMQ=0 WARM_SETTLE=90
PEER_BIN="" PEER_CRDS=""
CTL_ARGS=()
TIMEOUT=${SBX_BENCH_TIMEOUT:-900}
IMAGE=registry.local/agent:1.0 OWNER=owner-00 POOL=bench

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE=${2:-}; shift 2 ;;
    --duration) DURATION=${2:-}; shift 2 ;;
    --burst) BURST=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --ready-delay) DELAY=${2:-}; shift 2 ;;
    --ready-jitter) JITTER=${2:-}; shift 2 ;;
    --peer) PEER_BIN=${2:-}; shift 2 ;;
    --peer-crds) PEER_CRDS=${2:-}; shift 2 ;;
    --controller-arg) CTL_ARGS+=("${2:-}"); shift 2 ;;
    --warm-pool-settle) WARM_SETTLE=${2:-}; CTL_ARGS+=(--warm-pool-settle "${2:-}s"); shift 2 ;;
    --no-cold) COLD=0; shift ;;
    --no-warm) WARM=0; shift ;;
    --warm-quota) WARMQ=1; shift ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
for v in RATE DURATION BURST CONC TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
for v in DELAY JITTER; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "$v must be milliseconds, got '${!v}'" >&2; exit 2; }
done
[[ $WARM_SETTLE =~ ^[0-9]+$ ]] || { echo "--warm-pool-settle must be whole seconds, got '$WARM_SETTLE'" >&2; exit 2; }
if [ -n "$PEER_BIN$PEER_CRDS" ]; then
  [ -x "$PEER_BIN" ] && [ -e "$PEER_CRDS" ] || { echo "--peer needs an executable and --peer-crds a path" >&2; exit 2; }
fi
SUSTAINED=$((RATE * DURATION))

# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench
bench_build sandbox-controller sbx-bench
[ -x "$CONTROLLER_BIN" ] && [ -x "$BENCH_BIN" ] || { echo "missing $CONTROLLER_BIN or $BENCH_BIN" >&2; exit 1; }

LOAD_START=$(load)
say "starting the control plane (kwok: pods Ready after $DELAY ms + up to $JITTER ms)"
export SBX_KWOK_POD_READY_DELAY_MS=$DELAY SBX_KWOK_POD_READY_JITTER_MS=$JITTER
cluster_up
grant_controller_rbac
# Room for every pod of a phase and the one before it while it goes (2 CPU
# each: a kwok node of 2000 CPUs holds 1000).
"$ROOT/hack/cluster.sh" nodes "$E2E_DIR" $(((4 * SUSTAINED + 4 * BURST + 999) / 1000 + 1)) || bench_fail "kwok nodes not Ready"
APISERVER=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
# api PATH: a GET as the admin, cheaper than kubectl for polling.
api() { curl -s --max-time 5 --cacert "$E2E_DIR/pki/ca.crt" --cert "$E2E_DIR/pki/admin.crt" --key "$E2E_DIR/pki/admin.key" "$APISERVER$1"; }

OURS_POOL_API=/apis/sandbox.dev/v1alpha1 PEER_POOL_API=/apis/extensions.agents.x-k8s.io/v1beta1
# pool_ready API NS: the pool's status.readyReplicas (0 when unknown).
pool_ready() { api "$1/namespaces/$2/sandboxwarmpools/$POOL" | jq -r '.status.readyReplicas // 0' 2>/dev/null || echo 0; }

# our_pool NS N: a SandboxWarmPool of N with the Sandboxes' template and owner.
our_pool() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: $POOL, namespace: $1}
spec:
  replicas: $2
  workspaceOwner: $OWNER
  template: {image: $IMAGE, command: [sleep, infinity]}
YAML
}

# peer_pool NS N: agent-sandbox's SandboxTemplate and a SandboxWarmPool of N.
peer_pool() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: $POOL, namespace: $1}
spec:
  networkPolicyManagement: Unmanaged
  podTemplate:
    spec:
      containers:
        - name: sandbox
          image: $IMAGE
          command: [sleep, infinity]
          resources:
            requests: {cpu: "2", memory: 4Gi}
            limits: {cpu: "2", memory: 4Gi}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: $POOL, namespace: $1}
spec:
  replicas: $2
  sandboxTemplateRef: {name: $POOL}
YAML
}

# warm_quota NS N: the owner's SandboxQuota of maxWarm N.
warm_quota() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxQuota
metadata: {name: $OWNER, namespace: $1}
spec: {owner: $OWNER, maxWarm: $2}
YAML
}

# prewarm API NS N: waits until the pool reports N Ready; prints the seconds.
prewarm() {
  local t0 r=0
  t0=$(now_s)
  for _ in $(seq 1 $((TIMEOUT * 4))); do
    r=$(pool_ready "$1" "$2")
    [ "$r" -ge "$3" ] 2>/dev/null && { since "$t0"; return 0; }
    sleep 0.25
  done
  bench_fail "the pool in $2 has $r of $3 Ready after $TIMEOUT s"
}

# settle_pool NS: waits out the time a pool's template must have been in
# place before its pods are handed out (status.templateSince + the
# controller's --warm-pool-settle, 90 s by default; docs/api.md).
settle_pool() {
  local since wait
  since=$(api "$OURS_POOL_API/namespaces/$1/sandboxwarmpools/$POOL" |
    jq -r '.status.templateSince // .metadata.creationTimestamp' 2>/dev/null)
  wait=$(awk -v s="$(date -d "$since" +%s 2>/dev/null || date +%s)" -v d="$WARM_SETTLE" -v n="$(date +%s)" \
    'BEGIN { w = s + d + 1 - n; print (w > 0 ? w : 0) }')
  say "pool in $1: waiting $wait s for the settle time ($WARM_SETTLE s after $since)"
  sleep "$wait"
}

# watch_refill API NS N DONE: from now, prints the pool's readyReplicas
# every 0.2 s ("seconds ready" lines) until it was below N and is back, or
# the file DONE exists (the load ended) and it never was below N.
watch_refill() {
  local t0 r low=0
  t0=$(now_s)
  for _ in $(seq 1 $((TIMEOUT * 5))); do
    r=$(pool_ready "$1" "$2")
    echo "$(since "$t0") $r"
    [ "$r" -lt "$3" ] 2>/dev/null && low=1
    [ "$low" = 1 ] && [ "$r" -ge "$3" ] 2>/dev/null && return 0
    [ "$low" = 0 ] && [ -e "$4" ] && return 0
    sleep 0.2
  done
}

# refill_summary OUT N LAST_S: the lowest readyReplicas and when it was back
# at N, from watch_refill's samples; LAST_S is when the load's last Sandbox
# was Ready (from the load's start).
refill_summary() {
  awk -v n="$2" -v b="$3" '
    { if (!seen || $2 < min) { min = $2; tmin = $1; seen = 1 } if ($2 < n) low = 1; if (low && $2 >= n && !full) full = $1 }
    END {
      if (!seen) { print "no samples"; exit }
      if (!full) { printf "lowest %d Ready at %.1f s; not back to %d", min, tmin, n; exit }
      printf "lowest %d Ready at %.1f s; back to %d Ready %.1f s after the load started (%.1f s after its last Sandbox was Ready): %.1f warm pods Ready/s",
        min, tmin, n, full, full - b, n / full
    }' "$1"
}

# phase NAME SYSTEM MODE NS COUNT: one load (MODE rate or burst) against
# SYSTEM (cold, warm, warmq: warm under a quota of maxWarm COUNT, claim). sbx-bench's figures go to $E2E_DIR/NAME.out,
# this script's (pool, refill, the controller's requests, CPU and RSS from
# before the load until its pool is full again and the controller is quiet)
# to NAME.out.pool.
phase() {
  local name=$1 system=$2 mode=$3 ns=$4 n=$5 api pid port kind=controller
  local out=$E2E_DIR/$name.out
  local args=(--namespace "$ns" --count "$n" --scopes "$n" --owners 1 --image "$IMAGE" --timeout "$TIMEOUT" --concurrency "$CONC")
  [ "$mode" = rate ] && args+=(--rate "$RATE")
  if [ "$system" = claim ]; then
    api=$PEER_POOL_API pid=$PEER_PID port=$PEER_METRICS kind=claim
    args+=(--pool "$POOL")
  else
    api=$OURS_POOL_API pid=$CTL_PID port=$METRICS_PORT
  fi
  bench_namespace "$ns"
  : >"$out.pool"
  if [ "$system" != cold ]; then
    if [ "$system" = warmq ]; then warm_quota "$ns" "$n" || bench_fail "$name: the quota was not created"; fi
    if [ "$system" = claim ]; then peer_pool "$ns" "$n"; else our_pool "$ns" "$n"; fi || bench_fail "$name: the pool was not created"
    say "$name: pre-warming a pool of $n"
    echo "prewarm_s=$(prewarm "$api" "$ns" "$n")" >>"$out.pool"
    [ "$system" != claim ] && settle_pool "$ns"
  fi
  settle "$port"
  reset_hwm "$pid" || say "$name: VmHWM not reset: the peak RSS is the process's so far"
  echo "load=$(load)" >>"$out.pool"
  local m0 c0 rpid=""
  m0=$(scrape "$port") c0=$(cpu_s "$pid")
  if [ "$system" != cold ]; then
    rm -f "$out.done"
    watch_refill "$api" "$ns" "$n" "$out.done" >"$out.refill" &
    rpid=$!
  fi
  say "$name: $([ "$mode" = rate ] && echo "$RATE/s for $DURATION s ($n)" || echo "burst of $n, $CONC client threads")"
  "$BENCH_BIN" "$kind" "${args[@]}" >"$out" 2>"$out.err" ||
    bench_fail "$name failed; see $out.err and the controller's log in $E2E_DIR"
  if [ -n "$rpid" ]; then
    touch "$out.done"
    wait "$rpid"
    echo "refill=$(refill_summary "$out.refill" "$n" "$(value "$out" ready_seconds)")" >>"$out.pool"
  fi
  settle "$port"
  local m1 meth
  m1=$(scrape "$port")
  {
    echo "cpu_s=$(awk -v a="$c0" -v b="$(cpu_s "$pid")" 'BEGIN { printf "%.2f", b - a }')"
    echo "rss_peak_kib=$(hwm_kib "$pid")"
    echo "requests_per_sandbox=$(awk -v a="$(requests "$m0")" -v b="$(requests "$m1")" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')"
    for meth in POST PATCH PUT DELETE GET; do
      echo "requests_$meth=$(($(requests "$m1" "$meth") - $(requests "$m0" "$meth")))"
    done
    if [ "$system" = claim ]; then # claimed Sandboxes that came from the pool
      echo "hits=$(kubectl get sandboxes.agents.x-k8s.io -n "$ns" -l agents.x-k8s.io/launch-type=warm -o json 2>/dev/null |
        jq '[.items[] | select(any(.metadata.ownerReferences[]?; .kind == "SandboxClaim"))] | length')"
    else
      echo "hits=$(value "$out" warm)"
    fi
  } >>"$out.pool"
  delete_namespace "$ns"
}

if [ "$COLD" = 1 ] || [ "$WARM" = 1 ] || [ "$WARMQ" = 1 ]; then
  start_ours ctl "${CTL_ARGS[@]}"
  wait_ready_ms "$PROBE_PORT" >/dev/null
  if [ "$COLD" = 1 ]; then
    phase cold-rate cold rate cold-rate "$SUSTAINED"
    phase cold-burst cold burst cold-burst "$BURST"
  fi
  if [ "$WARM" = 1 ]; then
    phase warm-rate warm rate warm-rate "$SUSTAINED"
    phase warm-burst warm burst warm-burst "$BURST"
  fi
  if [ "$WARMQ" = 1 ]; then
    phase warmq-rate warmq rate warmq-rate "$SUSTAINED"
    phase warmq-burst warmq burst warmq-burst "$BURST"
  fi
  kill -0 "$CTL_PID" 2>/dev/null || bench_fail "the controller exited; see $E2E_DIR/ctl.log"
  controller_stop "$CTL_PID" || say "the controller did not stop on SIGTERM"
fi
if [ -n "$PEER_BIN" ]; then
  peer_apply_crds "$PEER_CRDS"
  # No leader election, as ours runs here: its Lease renewals would be the
  # only requests of an idle controller, and would never let it settle.
  peer_start "$PEER_BIN" --extensions --leader-elect=false
  phase claim-rate claim rate claim-rate "$SUSTAINED"
  phase claim-burst claim burst claim-burst "$BURST"
  kill -0 "$PEER_PID" 2>/dev/null || bench_fail "the peer exited; see $E2E_DIR/peer.log"
  controller_stop "$PEER_PID" || say "the peer did not stop on SIGTERM"
fi

# row LABEL KEY PHASE...: one figure per phase ("-" for a phase not run).
row() {
  local label=$1 key=$2 p f v
  shift 2
  printf '%-34s' "$label"
  for p in "$@"; do
    f=$E2E_DIR/$p.out
    v="-"
    [ -s "$f" ] && v=$(value "$f" "$key")
    [ -s "$f.pool" ] && [ -z "$v" ] && v=$(value "$f.pool" "$key")
    printf '%13s' "${v:--}"
  done
  printf '\n'
}
pv() { value "$E2E_DIR/$1.out" "$2"; }
# pool_of PHASE KEY: a figure of the phase's .out.pool, n/a for a phase not run.
pool_of() {
  local v
  v=$(value "$E2E_DIR/$1.out.pool" "$2")
  echo "${v:-n/a}"
}

cat <<EOF

=== warm pool benchmark ===
command:   hack/bench-warm.sh --rate $RATE --duration $DURATION --burst $BURST --concurrency $CONC --ready-delay $DELAY --ready-jitter $JITTER$([ "$WARMQ" = 1 ] && echo " --warm-quota")${PEER_BIN:+ --peer $PEER_BIN --peer-crds $PEER_CRDS}${CTL_ARGS[*]:+ --controller-arg ${CTL_ARGS[*]}}
load:      kwok: every pod Running and Ready $DELAY ms + up to $JITTER ms after it is scheduled; Sandboxes with owner $OWNER, one key each; pools of the load's size
host:      $(nproc) CPUs shared; loadavg $LOAD_START at start, $(load) at end; before each load: cold $(pool_of cold-rate load) / $(pool_of cold-burst load), warm $(pool_of warm-rate load) / $(pool_of warm-burst load), warm+quota $(pool_of warmq-rate load) / $(pool_of warmq-burst load), claim $(pool_of claim-rate load) / $(pool_of claim-burst load)

$RATE/s for $DURATION s ($SUSTAINED)                    cold         warm   warm+quota  agent-sandbox claim
EOF
R=(cold-rate warm-rate warmq-rate claim-rate) U=(cold-burst warm-burst warmq-burst claim-burst)
for set in R U; do
  declare -n P=$set
  [ "$set" = U ] && printf '\nburst of %s (%s threads)                 cold         warm   warm+quota  agent-sandbox claim\n' "$BURST" "$CONC"
  row "pool pre-warmed in (s)" prewarm_s "${P[@]}"
  row "warm hits" hits "${P[@]}"
  row "Ready" ready "${P[@]}"
  row "create -> Bound p50 (ms)" bound_p50_ms "${P[0]}" "${P[1]}" "${P[2]}"
  row "create -> Bound p99 (ms)" bound_p99_ms "${P[0]}" "${P[1]}" "${P[2]}"
  row "create -> Ready p50 (ms)" ready_p50_ms "${P[@]}"
  row "create -> Ready p90 (ms)" ready_p90_ms "${P[@]}"
  row "create -> Ready p99 (ms)" ready_p99_ms "${P[@]}"
  row "create -> Ready max (ms)" ready_max_ms "${P[@]}"
  row "controller CPU (s)" cpu_s "${P[@]}"
  row "controller peak RSS (KiB)" rss_peak_kib "${P[@]}"
  row "API requests / Sandbox" requests_per_sandbox "${P[@]}"
  for m in POST PATCH PUT DELETE GET; do
    row "  of which $m (total)" "requests_$m" "${P[@]}"
  done
  unset -n P
done
cat <<EOF

pools' readyReplicas from the load's start (sampled every 0.2 s):
$(printf '  %-20s %s\n' "warm, $RATE/s:" "$(pool_of warm-rate refill)" "warm+quota, $RATE/s:" "$(pool_of warmq-rate refill)" \
  "claim, $RATE/s:" "$(pool_of claim-rate refill)" "warm, burst:" "$(pool_of warm-burst refill)" \
  "warm+quota, burst:" "$(pool_of warmq-burst refill)" "claim, burst:" "$(pool_of claim-burst refill)")
ratios (p99 create -> Ready):
  warm / agent-sandbox claim: $RATE/s $(ratio "$(pv warm-rate ready_p99_ms)" "$(pv claim-rate ready_p99_ms)"), burst $(ratio "$(pv warm-burst ready_p99_ms)" "$(pv claim-burst ready_p99_ms)")   (goal of issue 17: at most 0.50)
  warm / cold:                $RATE/s $(ratio "$(pv warm-rate ready_p99_ms)" "$(pv cold-rate ready_p99_ms)"), burst $(ratio "$(pv warm-burst ready_p99_ms)" "$(pv cold-burst ready_p99_ms)")
EOF
[ "$WARMQ" = 1 ] && [ "$WARM" = 1 ] &&
  echo "  warm+quota / warm:          $RATE/s $(ratio "$(pv warmq-rate ready_p99_ms)" "$(pv warm-rate ready_p99_ms)"), burst $(ratio "$(pv warmq-burst ready_p99_ms)" "$(pv warm-burst ready_p99_ms)")   (the warm slots' cost; pre-warm time: $RATE/s $(ratio "$(pool_of warmq-rate prewarm_s)" "$(pool_of warm-rate prewarm_s)"), burst $(ratio "$(pool_of warmq-burst prewarm_s)" "$(pool_of warm-burst prewarm_s)"))"
warn_if_busy "$LOAD_START"
