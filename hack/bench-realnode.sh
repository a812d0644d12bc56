#!/usr/bin/env bash
# Benchmark: real starts on the real node (hack/realnode.sh: kubelet,
# containerd, runc on this machine). One sandbox at a time, through the API
# server: create -> Ready and create -> the first command's output (`true`,
# run(["true"]) of the Python client), for
#   cold    a new pod each (the owner's folders prepared before, once);
#   warm    a SandboxWarmPool of COUNT with the Sandboxes' template and owner,
#           pre-warmed and settled: each Sandbox bound to a warm pod;
#   claim   (with --peer) kubernetes-sigs/agent-sandbox built from source, run
#           out of cluster (--extensions, no webhooks, no leader election): a
#           SandboxTemplate with the same container on the same node, a
#           SandboxWarmPool of COUNT pre-warmed, one SandboxClaim each, timed
#           to the claim's Ready; the command through the same exec code path.
# Also the first Sandbox of an owner, which waits for the preparation of the
# owner's folders (sandbox/wsprep.h): one sample. A command, not a test: it
# prints figures and fails only when something breaks.
#
#   hack/bench-realnode.sh [--count N] [--peer BIN --peer-crds PATH]
#                          [--warm-pool-settle S] [--no-build]
#
# N (default 10) per phase. Every sandbox: the image sbx.local/sandbox:1, a
# shell that sleeps and ends at SIGTERM, 50m CPU requested and 64Mi (the
# machine has 2 CPUs), the restricted profile (ours builds it so; the same
# security context is given to agent-sandbox's template); ours with
# workspaceOwner bench-owner (its four folders mounted), agent-sandbox's with
# no volume (it mounts none). The phases run one after the other, each in its
# own namespace, deleted before the next.
# Environment: SBX_BUILD_DIR (default build/), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=10 SETTLE=5 BUILD=1 PEER_BIN="" PEER_CRDS=""
IMAGE=sbx.local/sandbox:1 OWNER=bench-owner POOL=bench
CMD_YAML="[sh, -c, \"trap 'exit 0' TERM; sleep infinity & wait\"]"
CMD_JSON='["sh", "-c", "trap '"'"'exit 0'"'"' TERM; sleep infinity & wait"]'
# No CPU limit: a CFS quota this small throttles runc's own work at each exec
# (the seccomp filter it loads for the restricted profile) to hundreds of ms.
RES_YAML="{requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 64Mi}}"
RES_JSON='{"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}}'

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --peer) PEER_BIN=${2:-}; shift 2 ;;
    --peer-crds) PEER_CRDS=${2:-}; shift 2 ;;
    --warm-pool-settle) SETTLE=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $COUNT =~ ^[1-9][0-9]*$ && $SETTLE =~ ^[0-9]+$ ]] || { echo "--count and --warm-pool-settle must be whole numbers" >&2; exit 2; }
if [ -n "$PEER_BIN$PEER_CRDS" ]; then
  [ -x "$PEER_BIN" ] && [ -e "$PEER_CRDS" ] || { echo "--peer needs an executable and --peer-crds a path" >&2; exit 2; }
fi

# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
why=$("$ROOT/hack/cluster.sh" realnode-check) || { echo "this machine cannot run the real node: $why" >&2; exit 1; }
bench_build sandbox-controller
LOAD_START=$(load)
say "starting the control plane with the real node"
SBX_REAL_NODE=1 cluster_up
grant_controller_rbac
realnode_controller_image || bench_fail "the controller's image is not on the real node"
install_python_client || bench_fail "cannot install clients/python"
METER=("$PY" "$ROOT/hack/bench-realnode.py")
NODE_SEL='{node.sandbox.dev/real: "true"}'
TOLERATE='[{key: node.sandbox.dev/real, operator: Exists, effect: NoSchedule}]'
printf 'pod:\n  nodeSelector: %s\n  tolerations: %s\n' "$NODE_SEL" "$TOLERATE" >"$E2E_DIR/config.yaml"

# gone NS: deletes the namespace's Sandboxes and claims, then waits until no
# pod of it is left (the node's capacity for the next phase).
gone() {
  kubectl delete sandbox,sandboxwarmpool --all -n "$1" --wait=false >/dev/null 2>&1
  kubectl delete sandboxclaims.extensions.agents.x-k8s.io,sandboxwarmpools.extensions.agents.x-k8s.io --all -n "$1" \
    --wait=false >/dev/null 2>&1
  wait_for 300 bash -c "! kubectl get pods -n '$1' --no-headers 2>/dev/null | grep -q ." || say "pods of $1 still there"
}

# phase NAME ARGS...: the meter's samples and summary into $E2E_DIR/NAME.out.
phase() {
  local name=$1; shift
  say "$name: $COUNT one at a time"
  KUBECONFIG=$KUBECONFIG "${METER[@]}" "$@" >"$E2E_DIR/$name.out" 2>"$E2E_DIR/$name.err" ||
    bench_fail "$name failed: $(tail -3 "$E2E_DIR/$name.err")"
}

controller_start ctl --config "$E2E_DIR/config.yaml" --warm-pool-settle "${SETTLE}s"
CTL=$CTL_PID
wait_for 30 kubectl get --raw /healthz || true

# cold: the first Sandbox of the owner (its folders prepared), then COUNT.
bench_namespace cold "$E2E_DIR/pv"
KUBECONFIG=$KUBECONFIG "${METER[@]}" ours cold 1 first "$IMAGE" "$CMD_JSON" "$RES_JSON" "$OWNER" >"$E2E_DIR/first.out" \
  2>"$E2E_DIR/first.err" || bench_fail "the owner's first Sandbox: $(tail -3 "$E2E_DIR/first.err")"
phase cold ours cold "$COUNT" cold "$IMAGE" "$CMD_JSON" "$RES_JSON" "$OWNER"
gone cold

# warm: a pool of COUNT, Ready and settled, then COUNT Sandboxes of its template.
bench_namespace warm "$E2E_DIR/pv"
kubectl apply -f - >/dev/null <<YAML || bench_fail "the pool"
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: $POOL, namespace: warm}
spec:
  replicas: $COUNT
  workspaceOwner: $OWNER
  template: {image: $IMAGE, command: $CMD_YAML, resources: $RES_YAML}
YAML
t0=$SECONDS
wait_for 600 bash -c "[ \"\$(kubectl get swp $POOL -n warm -o jsonpath='{.status.readyReplicas}')\" = $COUNT ]" ||
  bench_fail "the pool has not $COUNT Ready warm pods"
WARM_PREWARM=$((SECONDS - t0))
sleep $((SETTLE + 1))
phase warm ours warm "$COUNT" warm "$IMAGE" "$CMD_JSON" "$RES_JSON" "$OWNER"
gone warm
controller_stop "$CTL" || say "the controller did not stop on SIGTERM"

CLAIM_PREWARM=-
if [ -n "$PEER_BIN" ]; then
  peer_apply_crds "$PEER_CRDS"
  peer_start "$PEER_BIN" --extensions --leader-elect=false
  kubectl create namespace claim >/dev/null
  kubectl apply -f - >/dev/null <<YAML || bench_fail "agent-sandbox's template and pool"
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: $POOL, namespace: claim}
spec:
  networkPolicyManagement: Unmanaged
  podTemplate:
    spec:
      nodeSelector: $NODE_SEL
      tolerations: $TOLERATE
      automountServiceAccountToken: false
      enableServiceLinks: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        runAsGroup: 1000
        fsGroup: 1000
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: sandbox
          image: $IMAGE
          command: $CMD_YAML
          resources: $RES_YAML
          securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: {drop: [ALL]}}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: $POOL, namespace: claim}
spec:
  replicas: $COUNT
  sandboxTemplateRef: {name: $POOL}
YAML
  t0=$SECONDS
  wait_for 600 bash -c "[ \"\$(kubectl get sandboxwarmpools.extensions.agents.x-k8s.io $POOL -n claim -o jsonpath='{.status.readyReplicas}')\" = $COUNT ]" ||
    bench_fail "agent-sandbox's pool has not $COUNT Ready pods"
  CLAIM_PREWARM=$((SECONDS - t0))
  sleep 1
  phase claim claim claim "$COUNT" claim "$POOL"
  gone claim
  controller_stop "$PEER_PID" || say "the peer did not stop on SIGTERM"
fi

v() { value "$E2E_DIR/$1.out" "$2"; }
col() { local p=$1 k=$2 x; x=$(v "$p" "$k"); printf '%s' "${x:--}"; }
cat <<EOF

=== real node benchmark ===
command:   hack/bench-realnode.sh --count $COUNT --warm-pool-settle $SETTLE${PEER_BIN:+ --peer $PEER_BIN --peer-crds $PEER_CRDS}
node:      $(kubectl get node sbx-real-node -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}'), runc $(runc --version | awk 'NR==1{print $3}'); $(nproc) CPUs; loadavg $LOAD_START at start, $(load) at end
load:      one sandbox at a time; $IMAGE, 50m CPU requested, 64Mi, the restricted profile; ours with workspaceOwner $OWNER (four folders mounted), agent-sandbox's without volumes
the owner's first Sandbox (its folders prepared first): create -> Ready $(v first ready_p50_ms) ms, -> first command's output $(v first first_p50_ms) ms

$COUNT each, ms            cold           warm           agent-sandbox claim
EOF
printf '%-22s %-14s %-14s %s\n' "pool pre-warmed in" "-" "${WARM_PREWARM}s" "${CLAIM_PREWARM}s"
printf '%-22s %-14s %-14s %s\n' "bound warm" "$(col cold warm)" "$(col warm warm)" "$(col claim warm)"
for k in ready first; do
  label="create -> Ready"
  [ $k = first ] && label="create -> first output"
  printf '%-22s %-14s %-14s %s\n' "$label p50" "$(col cold ${k}_p50_ms)" "$(col warm ${k}_p50_ms)" "$(col claim ${k}_p50_ms)"
  printf '%-22s %-14s %-14s %s\n' "  min / max" "$(col cold ${k}_min_ms)/$(col cold ${k}_max_ms)" \
    "$(col warm ${k}_min_ms)/$(col warm ${k}_max_ms)" "$(col claim ${k}_min_ms)/$(col claim ${k}_max_ms)"
done
echo "ratios (p50 create -> first output): warm / cold $(ratio "$(v warm first_p50_ms)" "$(v cold first_p50_ms)"), warm / agent-sandbox claim $(ratio "$(v warm first_p50_ms)" "$(v claim first_p50_ms)")"
warn_if_busy "$LOAD_START"
