#!/usr/bin/env bash
# Benchmark of the Kubernetes client layer (controller/kube). A command, not a
# test: it prints figures and fails only when something breaks.
#
#   hack/bench-kube.sh [--pods N] [--events N] [--rounds R] [--no-build]
#
#   1. watch events parsed per second: --events (50000) synthetic pod watch
#      events of about 3.8 KB through watch_parser, against plain
#      cJSON_ParseWithLength of the same lines already split (no cluster);
#   2. time to sync an informer cache of --pods (10000) pods from a local
#      apiserver, against a plain paginated kube_list of the same pods;
#   3. heap bytes per cached pod, with the default trim (a copy minus
#      managedFields) and with the controller's sbx_trim_pod.
#
# For 2 and 3 it starts its own control plane (hack/cluster.sh, stopped on
# exit) and creates the pods with spec.nodeName set to a node that does not
# exist, so nothing schedules or runs them. Rounds are interleaved; --rounds
# (3) sets how many, the median is printed for 2 and 3, the best for 1.
#
# Environment: SBX_BUILD_DIR (default build/), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PODS=10000 EVENTS=50000 ROUNDS=3 BUILD=1

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --pods) PODS=${2:-}; shift 2 ;;
    --events) EVENTS=${2:-}; shift 2 ;;
    --rounds) ROUNDS=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
for v in PODS EVENTS ROUNDS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done

# cluster_up (with its EXIT trap that stops everything) and say.
# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
BENCH=$BUILD_DIR/kube-bench

if [ "$BUILD" = 1 ]; then
  say "building $BENCH"
  { cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_SANITIZE=OFF >/dev/null && cmake --build "$BUILD_DIR" -j2 --target kube-bench >/dev/null; } ||
    { echo "build failed" >&2; exit 1; }
fi
[ -x "$BENCH" ] || { echo "$BENCH not found (build it, or drop --no-build)" >&2; exit 1; }

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

say "parsing $EVENTS watch events"
"$BENCH" parse "$EVENTS" $((ROUNDS > 5 ? ROUNDS : 5)) >>"$OUT" || { echo "parse benchmark failed" >&2; exit 1; }

say "starting a control plane"
cluster_up
trap 'rm -f "$OUT"; e2e_cleanup' EXIT
NS=bench-pods
kubectl create namespace $NS >/dev/null || exit 1
say "creating $PODS pods on a node that does not exist"
"$BENCH" create-pods $NS "$PODS" 8 no-such-node || { echo "creating the pods failed" >&2; exit 1; }
say "syncing informers, $ROUNDS rounds"
"$BENCH" sync $NS "$ROUNDS" >>"$OUT" || { echo "sync benchmark failed" >&2; exit 1; }

{
  echo
  echo "== controller/kube benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $("$BIN/kube-apiserver" --version 2>/dev/null)"
  echo "== command: hack/bench-kube.sh --pods $PODS --events $EVENTS --rounds $ROUNDS"
  cat "$OUT"
}
