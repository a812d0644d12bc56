#!/usr/bin/env bash
# Sets everything up and shows the product: a local control plane, the CRD,
# the controller, and a demo Sandbox with its Pod. Ctrl-C stops it all.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$PATH:/usr/local/go/bin"
DIR=${SBX_DEMO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-controller/demo}

bash hack/deps.sh
BIN=$(bash hack/build-control-plane.sh)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 >/dev/null
bash hack/cluster.sh down "$DIR" 2>/dev/null || true
rm -rf "$DIR"
export KUBECONFIG
KUBECONFIG=$(bash hack/cluster.sh up "$DIR")
export PATH="$BIN:$PATH"
cleanup() {
  [ -n "${CTL:-}" ] && kill -TERM "$CTL" 2>/dev/null && wait "$CTL" 2>/dev/null
  bash hack/cluster.sh down "$DIR"
}
trap cleanup EXIT

kubectl apply -f crd/sandbox.dev_sandboxes.yaml -f crd/sandbox.dev_sandboxclaims.yaml -f crd/sandbox.dev_sandboxwarmpools.yaml \
  -f crd/sandbox.dev_sandboxquotas.yaml
kubectl wait --for=condition=Established crd/sandboxes.sandbox.dev --timeout=60s
kubectl apply -f manifests/rbac/role.yaml
kubectl create clusterrolebinding sandbox-controller-demo --clusterrole=sandbox-controller --user=sandbox-controller
head -c 48 /dev/urandom | base64 >"$DIR/seal.key"
# The admission webhook: served by the controller on 127.0.0.1, called by the
# API server through the product's webhook configurations (manifests/webhook/).
E2E_DIR=$DIR E2E_ROOT=$ROOT
say() { echo "$*" >&2; }
. e2e/lib_admission.sh
webhook_certs
WEBHOOK_PORT=$(free_port)
./build/sandbox-controller --kubeconfig "$DIR/controller.kubeconfig" --seal-key-file "$DIR/seal.key" \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
  --webhook-client-ca-file "$DIR/pki/webhook-client-ca.crt" 2>"$DIR/controller.log" &
CTL=$!
install_admission "$WEBHOOK_PORT" sandbox-controller

kubectl apply -f - <<'YAML'
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-workspaces}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  hostPath: {path: /srv/sandbox-workspaces}
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
kubectl apply -f e2e/demo-sandbox.yaml
kubectl wait --for=condition=Ready sandbox/demo --timeout=60s
echo
echo "Admission: user bob, who may create Sandboxes but not use alice's workspace, asks for one:"
kubectl create role sandbox-editor --verb=create,get,list --resource=sandboxes.sandbox.dev >/dev/null
kubectl create rolebinding demo-bob --role=sandbox-editor --user=bob >/dev/null
sed 's/name: demo$/name: demo-bob/' e2e/demo-sandbox.yaml | kubectl --as=bob apply -f - 2>&1 | sed 's/^/  /' || true
echo
kubectl get sbx -o wide
echo
kubectl get pods -l app.kubernetes.io/managed-by=sandbox-controller -o wide
echo
echo "Pod volume mounts:"
kubectl get pod "$(kubectl get sbx demo -o jsonpath='{.status.podName}')" \
  -o jsonpath='{range .spec.containers[0].volumeMounts[*]}  {.mountPath} <- {.subPath}{"\n"}{end}'
echo
echo "Control plane: export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH"
echo "Controller log: $DIR/controller.log"
if [ -t 0 ] && [ -z "${SBX_DEMO_EXIT:-}" ]; then
  echo "Press Ctrl-C to stop the controller and the control plane."
  wait "$CTL"
fi
