#!/usr/bin/env bash
# What the product's ValidatingAdmissionPolicies cost the API server, per
# request, measured on one local control plane (no controller running: every
# request is a server-side dry run, which goes through admission whole):
#
#   hack/bench-policies.sh [--count N] [--rounds K] [--baseline DIR]
#
# Three kinds of request, N of each (default 1,000), one after the other from
# one client connection:
#   create  the controller's identity creates a compliant sandbox pod
#           (the confinement policy's validations, or its breaks-a-rule gate);
#   update  the controller's identity changes a label of a sandbox pod;
#   status  the cluster admin (as a kubelet would) writes a sandbox pod's
#           status (the pod policy's rules).
# Each kind is measured with the policies of this tree, with none, and, with
# --baseline DIR, with those of DIR (another version's manifests/webhook, for
# a before/after pair); K rounds (default 3) take the variants in turn, each
# round starting with the next one. Printed
# per kind and variant: the API server's CPU per request (utime + stime of
# /proc/PID/stat over the N requests, in ms), its median over the rounds, and
# the policies' share: (variant - none), and this tree's against the baseline.
# About a minute per round at the default count on 2 CPUs. A command, not a
# test: it prints figures and fails only when something breaks.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=1000 ROUNDS=3 BASELINE=
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --rounds) ROUNDS=${2:-}; shift 2 ;;
    --baseline) BASELINE=${2:-}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
for v in COUNT ROUNDS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
[ -z "$BASELINE" ] || [ -f "$BASELINE/confinement-policy.yaml" ] ||
  { echo "--baseline $BASELINE: no confinement-policy.yaml there" >&2; exit 2; }

. "$ROOT/e2e/lib.sh"
. "$ROOT/e2e/lib_admission.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
NS=bench-policies

# use VARIANT: only the ValidatingAdmissionPolicies of VARIANT (tree,
# baseline or none) are in force.
use() {
  kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy -l app.kubernetes.io/name=sandbox-controller \
    --wait=true >/dev/null 2>&1
  case $1 in
    none) wait_for 20 policies_gone || { say "the policies are still in force"; return 1; } ;;
    tree) install_policies sandbox-controller ;;
    baseline) SBX_WEBHOOK_MANIFESTS=$BASELINE install_policies sandbox-controller ;;
  esac
}
# policies_gone: the pod policy's refusal is no longer given.
policies_gone() { kubectl run sbx-policy-probe -n default --image=probe --restart=Never --dry-run=server >/dev/null 2>&1; }

# measure KIND: the API server's CPU, in ms per request, over COUNT requests of KIND.
measure() {
  /usr/bin/python3 - "$1" "$COUNT" "$NS" "$(cat "$E2E_DIR/pids/kube-apiserver")" "$E2E_DIR/controller.kubeconfig" \
    "$KUBECONFIG" "$E2E_DIR/bench-pod.json" <<'PY'
import json, os, sys
from kubernetes import client, config
kind, n, ns, pid, ctl, admin, podjson = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
api = client.CoreV1Api(config.new_client_from_config(ctl if kind in ('create', 'update') else admin))
body = json.load(open(podjson))
def cpu():
    f = open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def one(i):
    if kind == 'create':
        body['metadata']['name'] = 'sbx-bench-%d' % i
        api.create_namespaced_pod(ns, body, dry_run='All')
    elif kind == 'update':
        api.patch_namespaced_pod('sbx-bench-live', ns, {'metadata': {'labels': {'bench': str(i)}}}, dry_run='All')
    else:
        api.patch_namespaced_pod_status('sbx-bench-live', ns, {'status': {'message': 'bench %d' % i}}, dry_run='All')
for i in range(20):  # the connection and the API server's caches warm
    one(i)
t0 = cpu()
for i in range(n):
    one(i)
print('%.3f' % ((cpu() - t0) * 1000 / n))
PY
}

cluster_up
grant_controller_rbac
new_namespace "$NS"
sandbox_pod_json sbx-bench-live "$NS" >"$E2E_DIR/bench-pod.json"
kubectl create -f "$E2E_DIR/bench-pod.json" >/dev/null || { echo "the live pod was refused" >&2; exit 1; }

VARIANTS=(none tree)
[ -z "$BASELINE" ] || VARIANTS+=(baseline)
KINDS=(create update status)
declare -A R
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!VARIANTS[@]}"; do # each round starts with the next variant: no variant always first
    v=${VARIANTS[$(((i + r - 1) % ${#VARIANTS[@]}))]}
    use "$v" || exit 1
    for k in "${KINDS[@]}"; do
      R[$k.$v.$r]=$(measure "$k") || { echo "the $k requests failed ($v)" >&2; exit 1; }
      say "round $r, $v, $k: ${R[$k.$v.$r]} ms of API server CPU per request"
    done
  done
done

echo
echo "== policy cost: $(date -u +%FT%TZ), $(nproc) CPUs, $COUNT requests per kind and variant, $ROUNDS rounds"
echo "== this tree: $ROOT/manifests/webhook${BASELINE:+; baseline: $BASELINE}"
echo "the API server's CPU per request, ms (median of the rounds; each round in brackets):"
declare -A M
for k in "${KINDS[@]}"; do
  for v in "${VARIANTS[@]}"; do
    vals=()
    for r in $(seq 1 "$ROUNDS"); do vals+=("${R[$k.$v.$r]}"); done
    M[$k.$v]=$(printf '%s\n' "${vals[@]}" | median)
    printf '  %-7s %-9s %7.3f  (%s)\n' "$k" "$v" "${M[$k.$v]}" "${vals[*]}"
  done
done
echo "the policies' share (variant - none, ms per request), and this tree's against the baseline:"
for k in "${KINDS[@]}"; do
  line=$(awk -v t="${M[$k.tree]}" -v n="${M[$k.none]}" 'BEGIN { printf "tree %+.3f", t - n }')
  if [ -n "$BASELINE" ]; then
    line+=$(awk -v t="${M[$k.tree]}" -v n="${M[$k.none]}" -v b="${M[$k.baseline]}" \
      'BEGIN { printf "   baseline %+.3f   tree / baseline, policies only: %s", b - n, (b - n > 0) ? sprintf("%.2f", (t - n) / (b - n)) : "n/a" }')
  fi
  printf '  %-7s %s\n' "$k" "$line"
done
