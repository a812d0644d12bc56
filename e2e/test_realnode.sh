#!/usr/bin/env bash
# End-to-end on the real node (hack/realnode.sh: kubelet, containerd, runc):
# sandboxes whose processes run. The controller runs with the admission
# webhook and the exec gate as deployed (lib_admission.sh), and its config
# sends every sandbox pod to the real node (nodeSelector and toleration of
# node.sandbox.dev/real); Sandboxes ask for small resources (the machine has
# 2 CPUs). Both workspace modes run: the claim sandbox-workspaces (a hostPath
# PersistentVolume under this suite's folder) and a hostPath root, the
# controller restarted with the other config between them (ctl_mode).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=sbx.local/sandbox:1
E2E_ADMISSION=1
NS=team-a

setup() {
  SBX_REAL_NODE=1 cluster_up
  # The controller's image, for its workspace preparation pods (the
  # config names none: the default sandbox-controller:<version>).
  local version
  version=$(head -n1 "$E2E_ROOT/VERSION")
  SBX_IMAGE_OUT=$E2E_DIR/image SBX_BUILD_DIR=$BUILD_DIR bash "$E2E_ROOT/hack/image.sh" >"$E2E_DIR/image.log" 2>&1 &&
    "$E2E_ROOT/hack/cluster.sh" realnode-import "$E2E_DIR" "$E2E_DIR/image/sandbox-controller-$version.oci.tar" \
      "docker.io/library/sandbox-controller:$version" ||
    { say "the controller's image is not on the real node: $(tail -3 "$E2E_DIR/image.log")"; exit 1; }
  grant_controller_rbac
  PV_ROOT=$E2E_DIR/pv
  WS_ROOT=$E2E_DIR/hostroot
  E2E_WORKSPACE_ROOT=$WS_ROOT  # the policies allow this hostPath root (lib_admission.sh)
  mkdir -p "$PV_ROOT/$NS" "$WS_ROOT"
  kubectl create namespace "$NS" >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: ws-$NS}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: $PV_ROOT/$NS, type: Directory}
  claimRef: {namespace: $NS, name: sandbox-workspaces}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: sandbox-workspaces, namespace: $NS}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: ws-$NS
  resources: {requests: {storage: 1Gi}}
YAML
  local node='  nodeSelector: {node.sandbox.dev/real: "true"}
  tolerations: [{key: node.sandbox.dev/real, operator: Exists, effect: NoSchedule}]'
  printf 'pod:\n%s\n' "$node" >"$E2E_DIR/pvc.yaml"
  printf 'workspace: {mode: hostPath, hostPathRoot: %s}\npod:\n%s\n' "$WS_ROOT" "$node" >"$E2E_DIR/hostpath.yaml"
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  ctl_mode pvc
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice); BOB=$(user_kubeconfig bob)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: agent, namespace: $NS}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [""], resources: [pods, pods/log], verbs: [get, list]}
  - {apiGroups: [""], resources: [pods/exec, pods/portforward], verbs: [get, create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agents, namespace: $NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: agent}
subjects: [{kind: User, name: alice}, {kind: User, name: bob}]
YAML
  grant_owner "$NS" alice alice
  grant_owner "$NS" bob bob
  sed -i "s/namespace: default/namespace: $NS/" "$ALICE" "$BOB"
}

# ctl_mode pvc|hostpath: (re)starts the controller with that workspace
# config, serving the webhook on the same port, and waits until it answers.
ctl_mode() {
  [ -n "${CTL_PID:-}" ] && controller_stop "$CTL_PID"
  MODE=$1
  controller_start "ctl-$1" --config "$E2E_DIR/$1.yaml" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  # The webhook serves only the API server's client certificate.
  wait_for 30 curl -sk -o /dev/null --cert "$E2E_DIR/pki/apiserver-webhook-client.crt" \
    --key "$E2E_DIR/pki/apiserver-webhook-client.key" "https://127.0.0.1:$WEBHOOK_PORT/" ||
    say "the webhook does not answer"
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }

# real_sandbox KUBECONFIG NAME OWNER [KEY]: a Sandbox of the sandbox image
# (sleep infinity, 100m CPU / 64Mi) created as that user.
real_sandbox() {
  as "$1" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: $2, namespace: $NS}
spec:
  image: $IMG
  command: [sleep, infinity]
  resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
  workspaceOwner: $3
  idempotencyKey: ${4:-$2}
YAML
}

ready() { kubectl wait --for=condition=Ready "sandbox/$1" -n "$NS" --timeout="${2:-120}s" >/dev/null 2>&1; }
pod_of() { jp "$NS" sandbox "$1" '{.status.podName}'; }
why_not() { echo "$(jp "$NS" sandbox "$1" '{.status.conditions}') pod: $(kubectl get pod -n "$NS" "$(pod_of "$1")" -o jsonpath='{.status.containerStatuses}' 2>/dev/null)"; }

# owner_dir OWNER SUBDIR: where the owner's folder is on this machine's disk
# in the current mode.
owner_dir() {
  if [ "$MODE" = pvc ]; then echo "$PV_ROOT/$NS/$1/$2"; else echo "$WS_ROOT/$NS/$1/$2"; fi
}

# workspace_writable NAME: alice's Sandbox NAME runs as uid 1000 and writes a
# file in /workspace and one in ~/.claude; both land in her folders on disk,
# owned by 1000:1000.
workspace_writable() {
  local name=$1 pod out
  real_sandbox "$ALICE" "$name" alice >/dev/null || { fail "cannot create $name"; return; }
  ready "$name" || { fail "$name not Ready: $(why_not "$name")"; return; }
  pod=$(pod_of "$name")
  out=$(as "$ALICE" exec -n "$NS" "$pod" -- sh -c \
    'id -u; echo "written in $1" >/workspace/w.txt && echo "config of $1" >"$HOME/.claude/c.txt" && echo wrote' sh "$MODE" 2>&1)
  expect_eq "$out" $'1000\nwrote' "id -u and the two writes as the sandbox's user ($MODE mode)"
  expect_eq "$(cat "$(owner_dir alice workspace)/w.txt" 2>/dev/null)" "written in $MODE" "/workspace/w.txt on disk"
  expect_eq "$(cat "$(owner_dir alice claude)/c.txt" 2>/dev/null)" "config of $MODE" "~/.claude/c.txt on disk"
  expect_eq "$(stat -c %u:%g "$(owner_dir alice workspace)/w.txt" 2>/dev/null)" 1000:1000 "owner of w.txt on disk"
}

# Issue 21 item 2: the owner's folders are writable by the sandbox's user
# in both modes, before the first pod runs.
test_1_workspace_writable_pvc() {
  workspace_writable ws-pvc
}

test_2_workspace_writable_hostpath() {
  ctl_mode hostpath
  workspace_writable ws-hostpath
  ctl_mode pvc
}

setup
e2e_main
