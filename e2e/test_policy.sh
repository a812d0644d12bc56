#!/usr/bin/env bash
# End-to-end: the ValidatingAdmissionPolicies of manifests/webhook/ (contract
# sections 4, 6 and 7) on a real control plane, through the real API server,
# as real identities: mallory (a tenant who may create pods, Deployments and
# Jobs in team-a), alice (Sandboxes and her own owner) and the controller's
# own client certificate (user sandbox-controller, the identity the policies
# are rendered for). The controller runs with the webhook and a hostPath
# workspace root, and the policies are rendered with the same root (as the
# Helm chart does from the controller config).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1
ROOT=/srv/sbx-policy-root
E2E_WORKSPACE_ROOT=$ROOT

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace team-a
  webhook_certs
  printf 'workspace: {mode: hostPath, hostPathRoot: %s}\n' "$ROOT" >"$E2E_DIR/config.yaml"
  WEBHOOK_PORT=$(free_port)
  controller_start main --config "$E2E_DIR/config.yaml" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR"
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice); MALLORY=$(user_kubeconfig mallory)
  CONTROLLER=$E2E_DIR/controller.kubeconfig
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-editor, namespace: team-a}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [sandbox.dev], resources: [workspaces], resourceNames: [alice], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-editor-alice, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-editor}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: workloads, namespace: team-a}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list, create, delete, update, patch]}
  - {apiGroups: [apps], resources: [deployments], verbs: [get, list, create, delete]}
  - {apiGroups: [batch], resources: [jobs], verbs: [get, list, create, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: workloads-mallory, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: workloads}
subjects: [{kind: User, name: mallory}]
YAML
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }
pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
pod_gone() { ! kubectl get pod -n "$1" "$2" >/dev/null 2>&1; }

# pod_json NAME VOLUME [MOUNT]: a pod (JSON, namespace team-a, never
# scheduled: it only has to be admitted) with the one volume VOLUME (JSON)
# mounted by its container as MOUNT (JSON; default: whole, at /data).
pod_json() {
  local mount=${3:-'{"name":"v","mountPath":"/data"}'}
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"team-a"},"spec":{"schedulerName":"none","restartPolicy":"Never","containers":[{"name":"c","image":"busybox","volumeMounts":[%s]}],"volumes":[%s]}}' \
    "$1" "$mount" "$2"
}
claim_volume='{"name":"v","persistentVolumeClaim":{"claimName":"sandbox-workspaces"}}'
host_volume() { printf '{"name":"v","hostPath":{"path":"%s"}}' "$1"; }

# create_as KUBECONFIG JSON: kubectl create of JSON as someone; prints kubectl's output.
create_as() { as "$1" create -f - 2>&1 <<<"$2"; }

# refused_by POLICY OUT: OUT is a refusal by that ValidatingAdmissionPolicy.
refused_by() { [[ "$2" == *"ValidatingAdmissionPolicy '$1'"* ]]; }

# Contract 4: the workspace root (the claim, in pvc mode) is mounted only by
# the controller's pods. A tenant who may create pods is refused, whether the
# pod is hers or a workload controller's (the pod CREATE is what counts).
test_1_workspace_claim_refused_to_tenants() {
  local out
  out=$(create_as "$MALLORY" "$(pod_json whole-claim "$claim_volume")") && fail "mallory mounted the whole claim"
  refused_by sandbox-controller-workspace "$out" || fail "whole claim: not refused by the workspace policy: $out"
  expect_match "$out" "workspace root" "the refusal says why"
  out=$(create_as "$MALLORY" "$(pod_json alice-subpath "$claim_volume" '{"name":"v","mountPath":"/w","subPath":"alice/claude"}')") &&
    fail "mallory mounted alice/claude of the claim"
  refused_by sandbox-controller-workspace "$out" || fail "subPath alice/claude: not refused by the workspace policy: $out"
  # another claim, and no volume at all: admitted (the policy is about the workspace root only)
  out=$(create_as "$MALLORY" "$(pod_json other-claim '{"name":"v","persistentVolumeClaim":{"claimName":"other-claim"}}')") ||
    fail "a pod mounting another claim was refused: $out"
  out=$(as "$MALLORY" run plain -n team-a --image=busybox --restart=Never 2>&1) || fail "an ordinary pod was refused: $out"
  # A Deployment and a Job whose pods mount the claim: their controllers' pod
  # creates are refused (FailedCreate, no pod); twins with an emptyDir get theirs.
  local kind
  for kind in deployment job; do
    as "$MALLORY" apply -f - >/dev/null <<YAML || fail "create the ${kind}s"
$(workload "$kind" "$kind-claim" '{persistentVolumeClaim: {claimName: sandbox-workspaces}}')
---
$(workload "$kind" "$kind-empty" '{emptyDir: {}}')
YAML
    wait_for 60 workload_pods_are "$kind-empty" 1 || fail "the $kind-empty $kind got no pod"
    wait_for 60 failed_create_by_policy "$kind-claim" || fail "no FailedCreate of the workspace policy for $kind-claim"
    expect_eq "$(workload_pods "$kind-claim")" 0 "pods of $kind-claim"
  done
}

# workload KIND NAME VOLUME: a Deployment or Job (YAML) whose pod mounts VOLUME (YAML flow).
workload() {
  local tpl
  tpl="    metadata: {labels: {app: $2}}
    spec:
      restartPolicy: $([ "$1" = job ] && echo Never || echo Always)
      containers: [{name: c, image: busybox, volumeMounts: [{name: v, mountPath: /data}]}]
      volumes: [{name: v, $(echo "$3" | sed 's/^{//; s/}$//')}]"
  if [ "$1" = deployment ]; then
    printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: team-a}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: %s}}\n  template:\n%s\n' "$2" "$2" "$tpl"
  else
    printf 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: %s, namespace: team-a}\nspec:\n  backoffLimit: 0\n  template:\n%s\n' "$2" "$tpl"
  fi
}
workload_pods() { kubectl get pods -n team-a -l "app=$1" --no-headers 2>/dev/null | wc -l; }
workload_pods_are() { [ "$(workload_pods "$1")" -eq "$2" ]; }
# failed_create_by_policy NAME: a FailedCreate event (on the Job, or on the
# Deployment's ReplicaSet) names the workspace policy.
failed_create_by_policy() {
  kubectl get events -n team-a --field-selector reason=FailedCreate \
    -o jsonpath='{range .items[*]}{.involvedObject.name} {.message}{"\n"}{end}' 2>/dev/null |
    grep "^$1" | grep -q "ValidatingAdmissionPolicy 'sandbox-controller-workspace'"
}

# The hostPath root: the root itself, anything under it, any ancestor, and any
# path that cannot be checked lexically are refused; its siblings are not.
test_2_workspace_hostpath_refused_to_tenants() {
  local p out i=0
  for p in "$ROOT" "$ROOT/" "$ROOT/team-a/alice/claude" /srv /srv/ / "/srv//sbx-policy-root" \
    "/srv/./sbx-policy-root" "srv/sbx-policy-root" "/srv/x/../sbx-policy-root"; do
    i=$((i + 1))
    out=$(create_as "$MALLORY" "$(pod_json "host-$i" "$(host_volume "$p")")") && fail "mallory mounted hostPath $p"
    [[ "$p" == *..* ]] && continue # the API's own validation refuses '..' first
    refused_by sandbox-controller-workspace "$out" || fail "hostPath $p: not refused by the workspace policy: $out"
  done
  for p in /var/log "$ROOT-other" /srv/other; do
    i=$((i + 1))
    out=$(create_as "$MALLORY" "$(pod_json "host-$i" "$(host_volume "$p")")") || fail "hostPath $p refused: $out"
  done
}

# The controller's own pods do mount the workspace (their owner's folders).
test_3_controller_pods_mount_their_owner() {
  sandbox_as_alice ws-1 task-ws alice || fail "alice's Sandbox refused"
  wait_for 60 bound team-a ws-1 || fail "ws-1 not bound: $(jp team-a sandbox ws-1 '{.status.conditions}')"
  expect_eq "$(kubectl get pod -n team-a "$(pod_of team-a ws-1)" -o jsonpath='{.spec.volumes[*].hostPath.path}')" \
    "$ROOT/team-a/alice/workspace $ROOT/team-a/alice/claude $ROOT/team-a/alice/codex $ROOT/team-a/alice/gemini" \
    "ws-1's hostPath volumes"
}
sandbox_as_alice() { KUBECONFIG=$ALICE sandbox team-a "$1" $IMG "$2" "$3" >/dev/null; }

setup
e2e_main
