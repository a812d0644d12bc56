#!/usr/bin/env bash
# Memory with tenant-sized objects: the controller's RSS with N maximum-size
# Sandboxes and N maximum-size foreign labelled pods (README, "Memory").
#
#   hack/rss-maxsize.sh [N]      default 1000; slow (it writes ~600 MB into etcd)
#
# "Maximum size": metadata.annotations at the API's 256 KiB limit on both; each
# Sandbox's spec carries 32,000 characters of args (the CRD allows 32,768 for command, args
# and env together; the controller caches specs up to 64 KiB); each foreign pod carries the managed-by label AND the reserved
# scope-digest label (as if admission were absent), so it is both selected by
# the pod informer and trimmed. Every Sandbox has its own pod. It starts its
# own local control plane (stopped on exit) and prints the controller's RSS
# (VmRSS) at each step, and after a restart that lists everything again.
#
# Environment: SBX_BUILD_DIR (default build/), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-1000}
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive integer" >&2; exit 2; }
# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
{ cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_SANITIZE=OFF >/dev/null &&
  cmake --build "$BUILD_DIR" -j2 --target sandbox-controller >/dev/null; } || { echo "build failed" >&2; exit 1; }

rss_mib() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
readyz() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" = 200 ]; }
start() { # start NAME: a controller; sets PID and PP
  PP=$(free_port)
  controller_start "$1" --health-probe-bind-address "127.0.0.1:$PP" --metrics-bind-address 0 --workers 8 \
    --kube-api-qps 200 --kube-api-burst 400
  PID=$CTL_PID
  wait_for 600 readyz "$PP" || { say "controller not ready"; exit 1; }
}

# gen KIND NS FROM TO: a List of maximum-size objects on stdout.
gen() {
  python3 - "$@" <<'PY'
import json, sys
kind, ns, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ann = {"tenant.example/blob": "x" * (256 * 1024 - 64)}
items = []
for i in range(lo, hi):
    if kind == "sbx":
        items.append({"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                      "metadata": {"name": "max-%04d" % i, "namespace": ns, "annotations": ann},
                      "spec": {"image": "registry.local/agent:1.0", "args": ["a" * 1000] * 32}})
    else:
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "foreign-%04d" % i, "namespace": ns, "annotations": ann,
                                   "labels": {"app.kubernetes.io/managed-by": "sandbox-controller",
                                              "sandbox.dev/scope-digest": "%032x" % i}},
                      "spec": {"containers": [{"name": "c", "image": "registry.local/x:1"}]}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}
create_all() { # create_all KIND NS
  local i
  for ((i = 0; i < N; i += 25)); do
    gen "$1" "$2" $i $((i + 25 < N ? i + 25 : N)) | kubectl create -f - >/dev/null || { say "create failed at $i"; exit 1; }
  done
}

cluster_up
grant_controller_rbac
new_namespace max-sbx
kubectl create namespace max-pods >/dev/null
start rss1
sleep 5
echo "controller RSS, empty cluster: $(rss_mib "$PID") MiB"
create_all sbx max-sbx
wait_for 900 bound_count_is max-sbx "$N" || say "only $(count_bound max-sbx) of $N bound"
sleep 10
echo "controller RSS, $N maximum-size Sandboxes (bound: $(count_bound max-sbx)): $(rss_mib "$PID") MiB"
create_all pod max-pods
sleep 30
echo "controller RSS, + $N maximum-size foreign labelled pods: $(rss_mib "$PID") MiB"
controller_stop "$PID"
t0=$SECONDS
start rss2
echo "restart: ready after $((SECONDS - t0)) s"
sleep 30
echo "controller RSS after a restart that lists all of it: $(rss_mib "$PID") MiB"
controller_stop "$PID"
