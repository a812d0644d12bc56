#!/usr/bin/env bash
# Sets everything up and shows the product: a local control plane with a real
# node (kubelet, containerd, runc; hack/realnode.sh) where the machine allows
# it, the CRD, the controller with its admission webhook, and alice's Sandbox:
# `id` run in it, a file written into her workspace and shown on disk, and
# bob refused (his own Sandbox for alice's workspace, and an exec into hers).
# Ctrl-C stops it all.
#
#   hack/demo.sh                      real node if the machine allows it, else kwok (it says why)
#   SBX_DEMO_NODE=real hack/demo.sh   the real node or nothing (exit 1)
#   SBX_DEMO_NODE=kwok hack/demo.sh   kwok's fake nodes only: no process runs
#   SBX_DEMO_EXIT=1                   exit after showing (the test command runs it so)
#   SBX_DEMO_DIR=DIR                  its folder (default ~/.cache/sandbox-controller/demo)
#   SBX_BUILD_DIR=DIR                 the controller of that build (default: a build in build/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$PATH:/usr/local/go/bin"
DIR=${SBX_DEMO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-controller/demo}
NODE=${SBX_DEMO_NODE:-auto}
case "$NODE" in auto | real | kwok) ;; *) echo "SBX_DEMO_NODE must be auto, real or kwok" >&2; exit 2 ;; esac

bash hack/deps.sh
BIN=$(bash hack/build-control-plane.sh)
# The controller: SBX_BUILD_DIR's when it has one (the test command's own
# build, left as it is), else a build in build/.
if [ -n "${SBX_BUILD_DIR:-}" ] && [ -x "$SBX_BUILD_DIR/sandbox-controller" ]; then
  BUILD=$SBX_BUILD_DIR
else
  BUILD=$ROOT/build
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j2 >/dev/null
fi
bash hack/cluster.sh down "$DIR" 2>/dev/null || true
rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# The real node where the machine allows it; otherwise say why, and go on
# with kwok's fake nodes (SBX_DEMO_NODE=real: stop instead).
real=0
if [ "$NODE" = kwok ]; then
  echo "demo: kwok's fake nodes only (SBX_DEMO_NODE=kwok): no process runs in a sandbox"
else
  if why=$(bash hack/cluster.sh realnode-check); then
    real=1
  elif [ "$NODE" = real ]; then
    echo "demo: this machine cannot run the real node: $(echo "$why" | paste -sd';')" >&2
    exit 1
  else
    echo "demo: falling back to kwok (no process runs in a sandbox): this machine cannot run the real node: $(echo "$why" | paste -sd';')"
  fi
fi

# Set before up: an up that fails half way leaves processes (etcd,
# kube-apiserver) that down stops.
cleanup() {
  [ -n "${CTL:-}" ] && kill -TERM "$CTL" 2>/dev/null && wait "$CTL" 2>/dev/null
  bash hack/cluster.sh down "$DIR"
}
trap cleanup EXIT
export KUBECONFIG
KUBECONFIG=$(bash hack/cluster.sh up "$DIR")
export PATH="$BIN:$PATH"

# e2e/lib.sh's helpers (wait_for, free_port, the real node's controller
# image, ...) and lib_admission.sh's (the webhook, the policies, RBAC).
. e2e/lib.sh
E2E_DIR=$DIR BUILD_DIR=$BUILD
. e2e/lib_admission.sh

if [ $real = 1 ]; then
  # The controller's own image runs its workspace preparation pods
  # (docs/operations.md): built offline and imported, as the node pulls nothing.
  if ! { bash hack/cluster.sh realnode "$DIR" && realnode_controller_image; }; then
    [ "$NODE" = real ] && { echo "demo: the real node did not start (see $DIR/logs/realnode-*.log)" >&2; exit 1; }
    echo "demo: falling back to kwok (no process runs in a sandbox): the real node did not start; see $DIR/logs/realnode-*.log"
    bash hack/cluster.sh down "$DIR" >/dev/null 2>&1 || true
    KUBECONFIG=$(bash hack/cluster.sh up "$DIR")
    real=0
  fi
fi

kubectl apply -f crd/sandbox.dev_sandboxes.yaml -f crd/sandbox.dev_sandboxclaims.yaml -f crd/sandbox.dev_sandboxwarmpools.yaml \
  -f crd/sandbox.dev_sandboxquotas.yaml -f crd/sandbox.dev_sandboxnetworkprofiles.yaml
kubectl wait --for=condition=Established crd/sandboxes.sandbox.dev --timeout=60s
kubectl apply -f manifests/rbac/role.yaml
kubectl create clusterrolebinding sandbox-controller-demo --clusterrole=sandbox-controller --user=sandbox-controller
head -c 48 /dev/urandom | base64 >"$DIR/seal.key"
# The controller's config: sandbox pods go to the real node (its label and
# taint), kwok's nodes stay the default for everything else.
{
  echo "workspace: {mode: pvc}"
  if [ $real = 1 ]; then
    echo "pod:"
    echo "  nodeSelector: {node.sandbox.dev/real: \"true\"}"
    echo "  tolerations: [{key: node.sandbox.dev/real, operator: Exists, effect: NoSchedule}]"
  fi
} >"$DIR/config.yaml"
# The admission webhook: served by the controller on 127.0.0.1, called by the
# API server through the product's webhook configurations (manifests/webhook/).
webhook_certs
WEBHOOK_PORT=$(free_port)
"$BUILD/sandbox-controller" --kubeconfig "$DIR/controller.kubeconfig" --seal-key-file "$DIR/seal.key" \
  --config "$DIR/config.yaml" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
  --webhook-client-ca-file "$DIR/pki/webhook-client-ca.crt" 2>"$DIR/controller.log" &
CTL=$!
# The confinement policy admits the real node's selector and toleration.
if [ $real = 1 ]; then E2E_POLICY_POD_SETTINGS=$REALNODE_POD_SETTINGS; fi
install_admission "$WEBHOOK_PORT" sandbox-controller

# alice's workspaces: the claim sandbox-workspaces, a folder of this machine.
mkdir -p "$DIR/workspaces"
kubectl apply -f - <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-workspaces}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  hostPath: {path: $DIR/workspaces, type: Directory}
  claimRef: {namespace: default, name: sandbox-workspaces}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: sandbox-workspaces, namespace: default}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: demo-workspaces
  resources: {requests: {storage: 10Gi}}
YAML
kubectl wait --for=jsonpath='{.status.phase}'=Bound pvc/sandbox-workspaces --timeout=60s >/dev/null
# alice and bob may create Sandboxes and exec into pods; only alice may use
# the workspace owner alice.
kubectl create role sandbox-user --verb=create,get,list,watch --resource=sandboxes.sandbox.dev >/dev/null
kubectl create role pod-user --verb=get,list,create --resource=pods,pods/exec >/dev/null
kubectl create rolebinding demo-users --role=sandbox-user --user=alice --user=bob >/dev/null
kubectl create rolebinding demo-pod-users --role=pod-user --user=alice --user=bob >/dev/null
grant_owner default alice alice

echo
echo "alice asks for a Sandbox with her workspace:"
kubectl --as=alice apply -f e2e/demo-sandbox.yaml | sed 's/^/  /'
kubectl wait --for=condition=Ready sandbox/demo --timeout=120s
echo
kubectl get sbx -o wide
echo
kubectl get pods -o wide
POD=$(kubectl get sbx demo -o jsonpath='{.status.podName}')
echo
if [ $real = 1 ]; then
  node=$(kubectl get pod "$POD" -o jsonpath='{.spec.nodeName}')
  echo "The sandbox runs as a process on the real node $node (kubelet, containerd, runc on this machine)."
else
  # kwok runs an exec as a local process in a folder: alice's workspace folder.
  mkdir -p "$DIR/workspaces/alice/workspace"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Exec
metadata: {name: $POD, namespace: default}
spec: {execs: [{local: {workDir: "$DIR/workspaces/alice/workspace"}}]}
YAML
  echo "On kwok no process runs in a sandbox: an exec runs on this machine, as its own user, in alice's folder."
fi
echo "Pod volume mounts:"
kubectl get pod "$POD" -o jsonpath='{range .spec.containers[0].volumeMounts[*]}  {.mountPath} <- {.subPath}{"\n"}{end}'
echo
echo "\$ kubectl --as=alice exec $POD -- id"
kubectl --as=alice exec "$POD" -- id
write='echo hello from alice > /workspace/hello.txt'
[ $real = 1 ] || write='echo hello from alice > hello.txt'
echo "\$ kubectl --as=alice exec $POD -- sh -c '$write'"
kubectl --as=alice exec "$POD" -- sh -c "$write"
f=$DIR/workspaces/alice/workspace/hello.txt
[ -f "$f" ] || { echo "demo: alice's file is not on this machine's disk at $f" >&2; exit 1; }
owner=$(stat -c %u:%g "$f")
content=$(cat "$f")
echo "on disk: $f (owner $owner): $content"
echo
echo "Admission: user bob, who may create Sandboxes but not use alice's workspace, asks for one:"
if out=$(sed -e 's/name: demo$/name: demo-bob/' e2e/demo-sandbox.yaml | kubectl --as=bob apply -f - 2>&1); then
  echo "$out" | sed 's/^/  /'
  echo "bob's Sandbox for alice's workspace: NOT refused" >&2
  exit 1
fi
echo "$out" | sed 's/^/  /'
echo "bob's Sandbox for alice's workspace: refused"
echo
echo "Exec gate: bob, who may exec into pods of the namespace, runs a command in alice's sandbox:"
if out=$(kubectl --as=bob exec "$POD" -- cat /workspace/hello.txt 2>&1); then
  echo "  $out"
  echo "bob's exec into alice's sandbox: NOT refused" >&2
  exit 1
fi
echo "$out" | sed 's/^/  /'
echo "bob's exec into alice's sandbox: refused"
echo
echo "Control plane: export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH"
echo "Controller log: $DIR/controller.log"
if [ -t 0 ] && [ -z "${SBX_DEMO_EXIT:-}" ]; then
  echo "Press Ctrl-C to stop the controller and the control plane."
  wait "$CTL"
fi
