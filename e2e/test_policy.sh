#!/usr/bin/env bash
# End-to-end: the ValidatingAdmissionPolicies of manifests/webhook/ (contract
# sections 4, 6 and 7) on a real control plane, through the real API server,
# as real identities: mallory (a tenant who may create pods, Deployments and
# Jobs in team-a), eve (the built-in edit role in team-a), alice (Sandboxes
# and her own owner) and the controller's own client certificate (user
# sandbox-controller, the identity the policies are rendered for). The
# controller runs with the webhook and a hostPath workspace root, and the
# policies are rendered with the same root (as the Helm chart does from the
# controller config).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"
. "$(dirname "$0")/lib_warm.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1
ROOT=/srv/sbx-policy-root
E2E_WORKSPACE_ROOT=$ROOT

# start_controller NAME CONFIG: the controller with the webhook, its pid in
# MAIN_CTL; returns once the webhook listens.
start_controller() {
  controller_start "$1" --config "$2" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt" --warm-pool-settle 2
  MAIN_CTL=$CTL_PID
  # It serves the webhook once its caches synced: a create made before that
  # is refused (failurePolicy Fail; the final CI at dd8a7fd failed test_9_b
  # so, the create 5 ms ahead of the listener).
  wait_for 30 listening "$WEBHOOK_PORT" || say "controller $1 does not serve the webhook on $WEBHOOK_PORT"
}

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace team-a
  webhook_certs
  printf 'workspace: {mode: hostPath, hostPathRoot: %s}\n' "$ROOT" >"$E2E_DIR/config.yaml"
  WEBHOOK_PORT=$(free_port)
  start_controller main "$E2E_DIR/config.yaml"
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice); MALLORY=$(user_kubeconfig mallory)
  CONTROLLER=$E2E_DIR/controller.kubeconfig
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-editor, namespace: team-a}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [sandbox.dev], resources: [sandboxes/status], verbs: [get, update, patch]}
  - {apiGroups: [sandbox.dev], resources: [sandboxwarmpools], verbs: [get, list, watch, create, update, patch, delete]}
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
  - {apiGroups: [""], resources: [pods/status], verbs: [get, update, patch]}
  - {apiGroups: [""], resources: [pods/binding, bindings], verbs: [create]}
  - {apiGroups: [apps], resources: [deployments], verbs: [get, list, create, delete]}
  - {apiGroups: [batch], resources: [jobs], verbs: [get, list, create, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: workloads-mallory, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: workloads}
subjects: [{kind: User, name: mallory}]
---
# More than manifests/rbac grants the controller (pod subresources, exec,
# bindings), so that what refuses them below is admission, not RBAC: a
# stolen token of a controller someone granted too much is still confined.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-controller-extra}
rules:
  - {apiGroups: [""], resources: [pods/status, pods/ephemeralcontainers, pods/resize], verbs: [get, update, patch]}
  - {apiGroups: [""], resources: [pods/binding, bindings, pods/eviction, pods/exec], verbs: [create, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-controller-extra}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-controller-extra}
subjects: [{kind: User, name: sandbox-controller}]
YAML
}

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

# Contract 4, on the storage side: the workspace claim is neither copied (a
# CSI clone through spec.dataSource or spec.dataSourceRef; a VolumeSnapshot)
# nor swapped (deleted, or made under its name before the administrator
# makes it) by eve, a tenant with the built-in edit role (which grants
# PersistentVolumeClaim create and delete). Server dry runs throughout: a
# missing refusal fails the test without taking the suite's claim away.
# The snapshot policy was installed while this cluster had no VolumeSnapshot
# CRD; a minimal one of the external-snapshotter's group, applied here,
# is all it needs to apply.
test_1_b_workspace_claim_neither_copied_nor_swapped() {
  local out field
  kubectl create namespace claimless >/dev/null 2>&1
  kubectl create rolebinding eve-edit -n team-a --clusterrole=edit --user=eve >/dev/null 2>&1
  kubectl create rolebinding eve-edit -n claimless --clusterrole=edit --user=eve >/dev/null 2>&1
  EVE=$(user_kubeconfig eve)
  wait_for 20 bash -c "[ \"\$(kubectl auth can-i delete persistentvolumeclaims -n claimless --as=eve)\" = yes ]" ||
    { fail "edit grants eve no claims"; return; }
  # (a) a clone of the workspace claim, through either field, is refused to
  # eve and to the cluster admin alike (as a pod mounting it is)
  for field in dataSource dataSourceRef; do
    out=$(dry_run_as "$EVE" "$(pvc_json copy team-a "$field" sandbox-workspaces)") &&
      fail "eve cloned the workspace claim through $field"
    refused_by sandbox-controller-workspace-claim "$out" || fail "a clone through $field: not refused by the claim policy: $out"
    expect_match "$out" "may not be cloned from the workspace claim" "the refusal of a clone through $field says why"
  done
  out=$(kubectl create --dry-run=server -f - 2>&1 <<<"$(pvc_json copy team-a dataSource sandbox-workspaces)") &&
    fail "the cluster admin cloned the workspace claim"
  refused_by sandbox-controller-workspace-claim "$out" || fail "the admin's clone: not refused by the claim policy: $out"
  # (b) a clone of another claim, and a claim of her own: admitted
  for field in dataSource dataSourceRef; do
    out=$(dry_run_as "$EVE" "$(pvc_json copy team-a "$field" other-claim)") ||
      fail "a clone of another claim through $field was refused: $out"
  done
  out=$(dry_run_as "$EVE" "$(pvc_json own team-a)") || fail "eve's own claim was refused: $out"
  # (c) eve deletes the workspace claim: refused; the admin may
  out=$(as "$EVE" delete pvc -n team-a sandbox-workspaces --dry-run=server 2>&1) && fail "eve deleted the workspace claim"
  refused_by sandbox-controller-workspace-claim "$out" || fail "eve's delete: not refused by the claim policy: $out"
  expect_match "$out" "deleted only by administrators" "the refusal of the delete says why"
  out=$(kubectl delete pvc -n team-a sandbox-workspaces --dry-run=server 2>&1) ||
    fail "the admin's delete of the workspace claim was refused: $out"
  # ... nor makes it where the administrator has not yet (the install step is theirs)
  out=$(dry_run_as "$EVE" "$(pvc_json sandbox-workspaces claimless)") && fail "eve made the workspace claim in claimless"
  refused_by sandbox-controller-workspace-claim "$out" || fail "eve's workspace claim: not refused by the claim policy: $out"
  expect_match "$out" "created only by administrators" "the refusal of the create says why"
  out=$(kubectl create --dry-run=server -f - 2>&1 <<<"$(pvc_json sandbox-workspaces claimless)") ||
    fail "the admin's create of the workspace claim was refused: $out"
  expect_eq "$(jp team-a pvc sandbox-workspaces '{.status.phase}')" Bound "the suite's workspace claim"
  # (d) VolumeSnapshots: the policy is there without the CRD, and applies once it is installed
  kubectl get validatingadmissionpolicy sandbox-controller-workspace-snapshots >/dev/null 2>&1 ||
    fail "the snapshot policy was not installed without its CRD"
  kubectl get crd volumesnapshots.snapshot.storage.k8s.io >/dev/null 2>&1 &&
    fail "the cluster had the VolumeSnapshot CRD already: the install without it is not shown"
  # (a CRD of a *.k8s.io group carries its approval, as the external-snapshotter's does)
  crd_stub snapshot.storage.k8s.io VolumeSnapshot volumesnapshots \
    https://github.com/kubernetes-csi/external-snapshotter/pull/419 || { fail "the VolumeSnapshot CRD"; return; }
  kubectl apply -f - >/dev/null <<YAML || { fail "eve's snapshot rights"; return; }
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: snapshots, namespace: team-a}
rules:
  - {apiGroups: [snapshot.storage.k8s.io], resources: [volumesnapshots], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: snapshots-eve, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: snapshots}
subjects: [{kind: User, name: eve}]
YAML
  wait_for 20 snapshot_refused || fail "no snapshot refusal after 20 s: $(dry_run_as "$EVE" "$(snapshot_json snap-ws sandbox-workspaces)")"
  out=$(dry_run_as "$EVE" "$(snapshot_json snap-ws sandbox-workspaces)") && fail "eve took a VolumeSnapshot of the workspace claim"
  refused_by sandbox-controller-workspace-snapshots "$out" || fail "a snapshot of the claim: not refused by the snapshot policy: $out"
  expect_match "$out" "VolumeSnapshot may not be taken of the workspace claim" "the refusal of the snapshot says why"
  out=$(dry_run_as "$EVE" "$(snapshot_json snap-other other-claim)") || fail "a VolumeSnapshot of another claim was refused: $out"
  kubectl delete crd volumesnapshots.snapshot.storage.k8s.io --wait=false >/dev/null 2>&1
  kubectl delete namespace claimless --wait=false >/dev/null 2>&1
  return 0
}

# dry_run_as KUBECONFIG JSON: a server dry run of creating JSON as someone; prints kubectl's output.
dry_run_as() { as "$1" create --dry-run=server -f - 2>&1 <<<"$2"; }
# pvc_json NAME NS [FIELD CLAIM]: a 1Gi claim (JSON) whose FIELD (dataSource or
# dataSourceRef) names the claim CLAIM.
pvc_json() {
  local src=""
  [ -n "${3:-}" ] && src=$(printf ',"%s":{"kind":"PersistentVolumeClaim","name":"%s"}' "$3" "$4")
  printf '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"%s","namespace":"%s"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}%s}}' \
    "$1" "$2" "$src"
}
# snapshot_json NAME CLAIM: a VolumeSnapshot (JSON, namespace team-a) of the claim CLAIM.
snapshot_json() {
  printf '{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"%s","namespace":"team-a"},"spec":{"source":{"persistentVolumeClaimName":"%s"}}}' \
    "$1" "$2"
}
snapshot_refused() { refused_by sandbox-controller-workspace-snapshots "$(dry_run_as "$EVE" "$(snapshot_json snap-wait sandbox-workspaces)")"; }

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

# ctl_create NAME [PYTHON]: creates sandbox_pod_json NAME (changed by PYTHON)
# in team-a as the controller's identity; prints kubectl's output.
ctl_create() { create_as "$CONTROLLER" "$(sandbox_pod_json "$1" team-a "${2:-}")"; }
# ctl_refused WHAT OUT: OUT is a refusal by the confinement policy.
ctl_refused() { refused_by sandbox-controller-confinement "$2" || fail "$1: not refused by the confinement policy: $2"; }
binding_json() { printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"%s"%s},"target":{"kind":"Node","name":"kwok-node-0"}}' "$1" "${2:-}"; }

# Contract 7: where RBAC cannot narrow a right (pods in every namespace),
# admission does. The controller's identity creates sandbox pods only: named
# sbx-, with its labels, each mounting only its owner's folders, and nothing
# a sandbox pod never has (privileges, host namespaces, other service
# accounts, Secrets).
test_4_controller_creates_only_sandbox_pods() {
  local out
  out=$(ctl_create sbx-c-ok) || fail "the controller's sandbox pod was refused: $out"
  out=$(ctl_create sbx-c-host "p['spec']['volumes'] = [{'name': 'workspaces', 'hostPath': {'path': '$ROOT/team-a/alice/workspace', 'type': 'DirectoryOrCreate'}}]
del p['spec']['containers'][0]['volumeMounts'][0]['subPath']") || fail "a sandbox pod with its owner's hostPath was refused: $out"
  out=$(ctl_create sbx-w-pool-1 "p['metadata']['labels'].pop('sandbox.dev/scope-digest'); p['metadata']['labels']['sandbox.dev/pool'] = 'warm'") ||
    fail "a warm-pool pod was refused: $out"
  out=$(ctl_create ordinary) && fail "the controller created a pod not named sbx-"
  ctl_refused "a pod not named sbx-" "$out"
  local what m i=0
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(ctl_create "sbx-c-bad-$i" "$m") && { fail "the controller created a pod with $what"; continue; }
    ctl_refused "$what" "$out"
  done <<CASES
no managed-by label|p['metadata']['labels'].pop('app.kubernetes.io/managed-by')
neither digest nor pool label|p['metadata']['labels'].pop('sandbox.dev/scope-digest')
the whole claim|del p['spec']['containers'][0]['volumeMounts'][0]['subPath']
another owner's subPath|p['spec']['containers'][0]['volumeMounts'][0]['subPath'] = 'bob/workspace'
the owner's whole folder|p['spec']['containers'][0]['volumeMounts'][0]['subPath'] = 'alice'
a subPathExpr|m = p['spec']['containers'][0]['volumeMounts'][0]; del m['subPath']; m['subPathExpr'] = 'alice/\$(X)'
no owner annotation|p['metadata']['annotations'] = {}
the claim in an init container|p['spec']['initContainers'] = [{'name': 'i', 'image': 'x', 'volumeMounts': [{'name': 'workspaces', 'mountPath': '/w'}]}]
the claim as a block device|c = p['spec']['containers'][0]; c['volumeMounts'] = []; c['volumeDevices'] = [{'name': 'workspaces', 'devicePath': '/dev/w'}]
another owner's hostPath|p['spec']['volumes'].append({'name': 'h', 'hostPath': {'path': '$ROOT/team-a/bob/workspace'}})
another namespace's hostPath|p['spec']['volumes'].append({'name': 'h', 'hostPath': {'path': '$ROOT/team-b/alice/workspace'}})
the hostPath root|p['spec']['volumes'].append({'name': 'h', 'hostPath': {'path': '$ROOT'}})
another hostPath|p['spec']['volumes'].append({'name': 'h', 'hostPath': {'path': '/etc'}})
an unclean hostPath|p['spec']['volumes'].append({'name': 'h', 'hostPath': {'path': '$ROOT/team-a/alice/./x'}})
a privileged container|p['spec']['containers'][0]['securityContext'] = {'privileged': True}
the host network|p['spec']['hostNetwork'] = True
the host PID namespace|p['spec']['hostPID'] = True
another service account|p['spec']['serviceAccountName'] = 'admin'
a Secret volume|p['spec']['volumes'].append({'name': 's', 'secret': {'secretName': 'anything'}})
a projected Secret|p['spec']['volumes'].append({'name': 's', 'projected': {'sources': [{'secret': {'name': 'anything'}}]}})
an env var from a Secret|p['spec']['containers'][0]['env'] = [{'name': 'T', 'valueFrom': {'secretKeyRef': {'name': 'anything', 'key': 'k'}}}]
env from a Secret|p['spec']['containers'][0]['envFrom'] = [{'secretRef': {'name': 'anything'}}]
CASES
}

# The one pod of the controller that runs as root: the workspace preparation
# pod (controller/sandbox/wsprep.h), admitted in exactly the shape the
# controller builds (hack/tools/sbx-wsprep-pod prints it), in both workspace
# modes, mounting only its owner's folders. Root or an added capability in
# any other shape is refused, and so is a preparation pod changed in any way
# that gives it more.
test_4b_controller_workspace_init_pods() {
  local tool="$BUILD_DIR/sbx-wsprep-pod" out hostp pvcp what m i=0
  [ -x "$tool" ] || { fail "sbx-wsprep-pod not built ($tool)"; return; }
  hostp=$("$tool" team-a alice registry.local/sandbox-controller:1 "$E2E_DIR/config.yaml") &&
    pvcp=$("$tool" team-a alice registry.local/sandbox-controller:1) || { fail "sbx-wsprep-pod failed"; return; }
  out=$(create_as "$CONTROLLER" "$(pod_with "$hostp" "p['metadata']['name'] += '-h'")") ||
    fail "the controller's preparation pod (hostPath mode) was refused: $out"
  out=$(create_as "$CONTROLLER" "$(pod_with "$pvcp" "p['metadata']['name'] += '-p'")") ||
    fail "the controller's preparation pod (pvc mode) was refused: $out"
  # The delete, on a copy with no owner: the garbage collector takes a pod
  # whose owner (the Sandbox "s" the tool names) does not exist, and took
  # the -h pod before its delete once ('NotFound').
  out=$(create_as "$CONTROLLER" "$(pod_with "$hostp" "p['metadata']['name'] += '-d'; del p['metadata']['ownerReferences']")") ||
    fail "the controller's preparation pod without an owner was refused: $out"
  out=$(as "$CONTROLLER" delete pod -n team-a "$(pod_with "$hostp" "print(p['metadata']['name'] + '-d'); exit()")" --wait=false 2>&1) ||
    fail "the controller could not delete its preparation pod: $out"
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(create_as "$CONTROLLER" "$(pod_with "$hostp" "p['metadata']['name'] += '-$i'; $m")") &&
      { fail "the controller created a preparation pod with $what"; continue; }
    ctl_refused "$what" "$out"
  done <<CASES
a fourth capability|c['securityContext']['capabilities']['add'].append('SYS_ADMIN')
capabilities not dropped|del c['securityContext']['capabilities']['drop']
privilege escalation|c['securityContext']['allowPrivilegeEscalation'] = True
a privileged container|c['securityContext']['privileged'] = True; c['securityContext']['allowPrivilegeEscalation'] = True
a second container|p['spec']['containers'].append(dict(c, name='two'))
an init container|p['spec']['initContainers'] = [dict(c, name='i')]
a service account token|p['spec']['automountServiceAccountToken'] = True
restartPolicy Always|p['spec']['restartPolicy'] = 'Always'
an emptyDir|p['spec']['volumes'].append({'name': 'e', 'emptyDir': {}}); c['volumeMounts'].append({'name': 'e', 'mountPath': '/e'})
another claim|p['spec']['volumes'].append({'name': 'o', 'persistentVolumeClaim': {'claimName': 'other'}})
another owner's folder|p['spec']['volumes'][0]['hostPath']['path'] = '$ROOT/team-a/bob/workspace'
the owner's whole folder|p['spec']['volumes'][0]['hostPath']['path'] = '$ROOT/team-a/alice'
the host network|p['spec']['hostNetwork'] = True
a sandbox pod's digest label|p['metadata']['labels']['sandbox.dev/scope-digest'] = '0' * 32
a name not sbx-init-|p['metadata']['name'] = 'sbx-' + p['metadata']['name'][9:]
no preparation label|del p['metadata']['labels']['sandbox.dev/workspace-init']
CASES
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(create_as "$CONTROLLER" "$(pod_with "$pvcp" "p['metadata']['name'] += '-$i'; $m")") &&
      { fail "the controller created a preparation pod with $what"; continue; }
    ctl_refused "$what" "$out"
  done <<CASES
another owner's subPath|c['volumeMounts'][0]['subPath'] = 'bob/workspace'
the whole claim|del c['volumeMounts'][0]['subPath']
CASES
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(ctl_create "sbx-c-root-$i" "$m") && { fail "the controller created a sandbox pod with $what"; continue; }
    ctl_refused "$what" "$out"
  done <<CASES
root|p['spec']['securityContext']['runAsUser'] = 0
runAsNonRoot off|p['spec']['securityContext']['runAsNonRoot'] = False
no runAsNonRoot|del p['spec']['securityContext']['runAsNonRoot']
a container as root|p['spec']['containers'][0]['securityContext']['runAsUser'] = 0
a container with runAsNonRoot off|p['spec']['containers'][0]['securityContext']['runAsNonRoot'] = False
an added capability|p['spec']['containers'][0]['securityContext']['capabilities']['add'] = ['CHOWN']
the preparation label, as root|p['metadata']['labels']['sandbox.dev/workspace-init'] = 'x'; p['spec']['securityContext']['runAsUser'] = 0
CASES
}

# The NetworkPolicy probe's pods (controller/sandbox/netprobe.h), admitted in
# the shape the controller builds (hack/tools/sbx-netprobe-pod prints it) and
# deleted; as root, with a capability, a volume of the host or the workspace
# claim, or without its own name and label, refused.
test_4c_controller_netprobe_pods() {
  local tool="$BUILD_DIR/sbx-netprobe-pod" out target client what m i=0
  [ -x "$tool" ] || { fail "sbx-netprobe-pod not built ($tool)"; return; }
  target=$("$tool" team-a target registry.local/sandbox-controller:1) &&
    client=$("$tool" team-a client registry.local/sandbox-controller:1) || { fail "sbx-netprobe-pod failed"; return; }
  out=$(create_as "$CONTROLLER" "$target") || fail "the controller's probe target pod was refused: $out"
  out=$(create_as "$CONTROLLER" "$client") || fail "the controller's probe client pod was refused: $out"
  out=$(as "$CONTROLLER" delete pod -n team-a sbx-netprobe-target-1 sbx-netprobe-client-1 --wait=false 2>&1) ||
    fail "the controller could not delete its probe pods: $out"
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(create_as "$CONTROLLER" "$(pod_with "$target" "p['metadata']['name'] += '-$i'; $m")") &&
      { fail "the controller created a probe pod with $what"; continue; }
    ctl_refused "$what" "$out"
  done <<CASES
root|p['spec']['securityContext']['runAsUser'] = 0
runAsNonRoot off|p['spec']['securityContext']['runAsNonRoot'] = False; c['securityContext']['runAsNonRoot'] = False
an added capability|c['securityContext']['capabilities']['add'] = ['NET_ADMIN']
the host network|p['spec']['hostNetwork'] = True
a hostPath volume|p['spec']['volumes'] = [{'name': 'h', 'hostPath': {'path': '/etc'}}]
the workspace claim whole|p['spec']['volumes'] = [{'name': 'w', 'persistentVolumeClaim': {'claimName': 'sandbox-workspaces'}}]; c['volumeMounts'] = [{'name': 'w', 'mountPath': '/w'}]
no probe label|del p['metadata']['labels']['sandbox.dev/netprobe']
a name not sbx-netprobe-|p['metadata']['name'] = 'sbx-x' + p['metadata']['name'][12:]
CASES
}

# pod_with JSON PYTHON: JSON (a pod) changed by PYTHON statements on p and c
# (its first container); prints the result.
pod_with() {
  python3 - "$1" "$2" <<'PY'
import json, sys
p = json.loads(sys.argv[1])
c = p['spec']['containers'][0]
exec(sys.argv[2])
print(json.dumps(p))
PY
}

# ... changes only sandbox pods, and only their metadata; deletes only them;
# never writes through a subresource.
test_5_controller_changes_and_deletes_only_sandbox_pods() {
  local out
  as "$MALLORY" run victim -n team-a --image=busybox --restart=Never >/dev/null 2>&1 || fail "mallory's victim pod"
  out=$(as "$CONTROLLER" label pod -n team-a sbx-c-ok example.com/bound=yes 2>&1) || fail "the controller's metadata patch was refused: $out"
  out=$(as "$CONTROLLER" patch pod -n team-a sbx-c-ok \
    -p '{"spec":{"containers":[{"name":"sandbox","image":"evil"}]}}' 2>&1) && fail "the controller changed the image of a sandbox pod"
  ctl_refused "a spec change" "$out"
  out=$(as "$CONTROLLER" label pod -n team-a victim example.com/x=y 2>&1) && fail "the controller labelled mallory's pod"
  ctl_refused "a patch of another pod" "$out"
  out=$(as "$CONTROLLER" delete pod -n team-a victim --wait=false 2>&1) && fail "the controller deleted mallory's pod"
  ctl_refused "a delete of another pod" "$out"
  out=$(as "$CONTROLLER" patch pod -n team-a sbx-c-ok --subresource=status --type merge \
    -p '{"status":{"message":"x"}}' 2>&1) && fail "the controller wrote pods/status"
  ctl_refused "pods/status" "$out"
  out=$(as "$CONTROLLER" patch pod -n team-a sbx-c-ok --subresource=ephemeralcontainers --type merge \
    -p '{"spec":{"ephemeralContainers":[{"name":"e","image":"busybox"}]}}' 2>&1) && fail "the controller added an ephemeral container"
  ctl_refused "pods/ephemeralcontainers" "$out"
  out=$(as "$CONTROLLER" create --raw /api/v1/namespaces/team-a/pods/sbx-c-ok/binding -f - 2>&1 <<<"$(binding_json sbx-c-ok)") &&
    fail "the controller bound a pod (pods/binding)"
  ctl_refused "pods/binding" "$out"
  out=$(as "$CONTROLLER" create --raw /api/v1/namespaces/team-a/bindings -f - 2>&1 <<<"$(binding_json sbx-c-ok)") &&
    fail "the controller bound a pod (bindings)"
  ctl_refused "bindings" "$out"
  out=$(as "$CONTROLLER" create --raw /api/v1/namespaces/team-a/pods/victim/eviction -f - 2>&1 \
    <<<'{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"victim"}}') && fail "the controller evicted mallory's pod"
  ctl_refused "pods/eviction" "$out"
  out=$(as "$CONTROLLER" exec -n team-a victim -- true 2>&1) && fail "the controller ran a command in mallory's pod"
  ctl_refused "pods/exec" "$out"
  out=$(as "$CONTROLLER" delete pod -n team-a sbx-c-ok --wait=false 2>&1) || fail "the controller could not delete its sandbox pod: $out"
  # the real controller's own writes pass: a second Sandbox of the same intent
  # is adopted (its ownerReference patched onto the pod)
  sandbox_as_alice ws-2 task-ws alice || fail "ws-2 refused"
  wait_for 60 bound team-a ws-2 || fail "ws-2 not bound: $(jp team-a sandbox ws-2 '{.status.conditions}')"
  expect_eq "$(jp team-a sandbox ws-2 '{.status.binding}')" Adopted "ws-2 binding"
  expect_eq "$(kubectl get pod -n team-a "$(pod_of team-a ws-2)" -o jsonpath='{range .metadata.ownerReferences[*]}{.name}{"\n"}{end}' | sort | tr '\n' ' ')" \
    "ws-1 ws-2 " "owners of the shared pod"
}

# Deletes by anyone but the controller are never matched: a tenant's, the
# garbage collector's, the namespace controller's.
test_6_deletes_by_others_never_refused() {
  local pod
  pod=$(pod_of team-a ws-1)
  as "$MALLORY" delete pod -n team-a victim --wait=false >/dev/null || fail "mallory could not delete her pod"
  as "$ALICE" delete sandbox -n team-a ws-1 ws-2 --wait=false >/dev/null || fail "alice could not delete her Sandboxes"
  wait_for 90 pod_gone team-a "$pod" || fail "the garbage collector did not delete $pod"
  as "$MALLORY" delete deployment -n team-a deployment-empty --wait=false >/dev/null || fail "delete deployment-empty"
  wait_for 90 workload_pods_are deployment-empty 0 || fail "the pods of deployment-empty were not collected"
  kubectl create namespace doomed >/dev/null
  create_as "$CONTROLLER" "$(sandbox_pod_json sbx-doomed doomed)" >/dev/null || fail "the controller's pod in doomed"
  kubectl run plain -n doomed --image=busybox --restart=Never >/dev/null || fail "a pod in doomed"
  kubectl delete namespace doomed --wait=false >/dev/null
  wait_for 90 sh -c '! kubectl get namespace doomed' || fail "namespace doomed not deleted: $(kubectl get pods -n doomed 2>&1)"
}

# Contract 4: reserved sandbox.dev/ metadata is the controller's, through
# every door: pods/status (UPDATE) writes labels and annotations, and a
# Binding's annotations (pods/binding, bindings) are copied onto the pod.
test_7_status_and_binding_keep_reserved_metadata() {
  sandbox_as_alice ws-3 task-ws3 alice || fail "ws-3 refused"
  wait_for 60 bound team-a ws-3 || fail "ws-3 not bound"
  local pod out
  pod=$(pod_of team-a ws-3)
  # the scheduler's binding and kwok's status updates of a sandbox pod pass
  wait_for 60 sh -c "[ \"\$(kubectl get pod -n team-a $pod -o jsonpath='{.status.phase}')\" = Running ]" ||
    fail "$pod not scheduled and Running"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --subresource=status --type merge \
    -p '{"metadata":{"labels":{"sandbox.dev/scope-digest":"ffffffffffffffffffffffffffffffff"}}}' 2>&1) &&
    fail "mallory changed the digest label of $pod through pods/status"
  refused_by sandbox-controller-pods "$out" || fail "pods/status label change: $out"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --subresource=status --type merge \
    -p '{"metadata":{"annotations":{"sandbox.dev/seal":null}}}' 2>&1) && fail "mallory removed the seal of $pod through pods/status"
  refused_by sandbox-controller-pods "$out" || fail "pods/status annotation removal: $out"
  expect_eq "$(jp team-a pod "$pod" '{.metadata.labels.sandbox\.dev/scope-digest}')" "$(jp team-a sandbox ws-3 '{.status.scopeDigest}')" \
    "the digest label of $pod"
  # her own pods: no reserved key through pods/status or a Binding; ordinary ones pass
  create_as "$MALLORY" "$(pod_json own-1 '{"name":"v","emptyDir":{}}')" >/dev/null || fail "mallory's own-1"
  create_as "$MALLORY" "$(pod_json own-2 '{"name":"v","emptyDir":{}}')" >/dev/null || fail "mallory's own-2"
  out=$(as "$MALLORY" patch pod -n team-a own-1 --subresource=status --type merge \
    -p '{"metadata":{"labels":{"sandbox.dev/scope-digest":"0123"}}}' 2>&1) && fail "mallory added a reserved label through pods/status"
  refused_by sandbox-controller-pods "$out" || fail "pods/status reserved label on own-1: $out"
  out=$(as "$MALLORY" patch pod -n team-a own-1 --subresource=status --type merge \
    -p '{"metadata":{"labels":{"example.com/note":"hi"}}}' 2>&1) || fail "an ordinary label through pods/status: $out"
  expect_eq "$(jp team-a pod own-1 '{.metadata.labels.example\.com/note}')" hi "ordinary label through pods/status"
  out=$(as "$MALLORY" create --raw /api/v1/namespaces/team-a/pods/own-1/binding -f - 2>&1 \
    <<<"$(binding_json own-1 ',"annotations":{"sandbox.dev/seal":"forged"}')") && fail "mallory's Binding carried a reserved annotation"
  refused_by sandbox-controller-pods "$out" || fail "pods/binding with a reserved annotation: $out"
  out=$(as "$MALLORY" create --raw /api/v1/namespaces/team-a/bindings -f - 2>&1 \
    <<<"$(binding_json own-2 ',"annotations":{"sandbox.dev/workspace-owner":"alice"}')") && fail "mallory's Binding (bindings) carried a reserved annotation"
  refused_by sandbox-controller-pods "$out" || fail "bindings with a reserved annotation: $out"
  expect_eq "$(jp team-a pod own-1 '{.metadata.annotations}')" "" "own-1 annotations"
  out=$(as "$MALLORY" create --raw /api/v1/namespaces/team-a/pods/own-1/binding -f - 2>&1 \
    <<<"$(binding_json own-1 ',"annotations":{"example.com/placed":"yes"}')") || fail "an ordinary Binding: $out"
  expect_eq "$(jp team-a pod own-1 '{.spec.nodeName}')" kwok-node-0 "own-1 bound"
}

# The network floor and a profile's policy select sandbox pods by
# app.kubernetes.io/managed-by and app.kubernetes.io/name (docs/operations.md,
# "The network floor"): a tenant who may label pods must not take a sandbox
# pod out of them, through either door; an ordinary label still passes.
test_7_b_floor_labels_of_sandbox_pods_are_the_controllers() {
  sandbox_as_alice ws-7b task-ws7b alice || fail "ws-7b refused"
  wait_for 60 bound team-a ws-7b || fail "ws-7b not bound"
  local pod out
  pod=$(pod_of team-a ws-7b)
  out=$(as "$MALLORY" label pod -n team-a "$pod" app.kubernetes.io/name=web --overwrite 2>&1) &&
    fail "mallory relabelled $pod out of its network floor"
  refused_by sandbox-controller-pods "$out" || fail "name label change: $out"
  out=$(as "$MALLORY" label pod -n team-a "$pod" app.kubernetes.io/managed-by- 2>&1) &&
    fail "mallory removed the managed-by label of $pod"
  refused_by sandbox-controller-pods "$out" || fail "managed-by label removal: $out"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --subresource=status --type merge \
    -p '{"metadata":{"labels":{"app.kubernetes.io/name":"web"}}}' 2>&1) &&
    fail "mallory relabelled $pod through pods/status"
  refused_by sandbox-controller-pods "$out" || fail "pods/status name label change: $out"
  out=$(as "$MALLORY" label pod -n team-a "$pod" example.com/note=hi 2>&1) || fail "an ordinary label on $pod: $out"
  expect_eq "$(jp team-a pod "$pod" '{.metadata.labels.app\.kubernetes\.io/name}/{.metadata.labels.app\.kubernetes\.io/managed-by}')" \
    sandbox/sandbox-controller "the labels the floor selects $pod by"
}

# The controller counts a pod's Sandbox owner references as the Sandboxes
# holding it (contract 5a: the pod goes when none of them is active; a new
# Sandbox of an expired generation gets the stored outcome). A tenant who may
# patch pods must not add or change them: naming a Sandbox of hers would keep
# alice's pod (and workspace) running past alice's suspend, or make alice's
# retries Expired. Removing one passes, as the garbage collector does (the
# controller then puts back those of Sandboxes still bound to the pod, or
# deletes a pod none holds: test_7_d, test_7_e).
test_7_c_owner_references_of_sandbox_pods_are_the_controllers() {
  sandbox_as_alice ws-7c task-ws7c alice || fail "ws-7c refused"
  wait_for 60 bound team-a ws-7c || fail "ws-7c not bound"
  local pod out forged
  pod=$(pod_of team-a ws-7c)
  forged='{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","name":"m-old","uid":"00000000-0000-4000-8000-000000000001"}'
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --type json --dry-run=server \
    -p "[{\"op\":\"add\",\"path\":\"/metadata/ownerReferences/-\",\"value\":$forged}]" 2>&1) &&
    fail "mallory added an owner reference to $pod"
  refused_by sandbox-controller-pods "$out" || fail "owner reference added: $out"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --type json --dry-run=server \
    -p "[{\"op\":\"replace\",\"path\":\"/metadata/ownerReferences\",\"value\":[$forged]}]" 2>&1) &&
    fail "mallory replaced the owner references of $pod"
  refused_by sandbox-controller-pods "$out" || fail "owner references replaced: $out"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --type json --dry-run=server \
    -p '[{"op":"replace","path":"/metadata/ownerReferences/0/controller","value":false}]' 2>&1) &&
    fail "mallory changed the controller flag of $pod's owner reference"
  refused_by sandbox-controller-pods "$out" || fail "owner reference changed: $out"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --type json --dry-run=server \
    -p '[{"op":"remove","path":"/metadata/ownerReferences/0"}]' 2>&1) ||
    fail "removing an owner reference (as the garbage collector does) was refused: $out"
  expect_eq "$(jp team-a pod "$pod" '{.metadata.ownerReferences[*].name}')" ws-7c "the owner references of $pod"
}

# owners POD: the names of the owners of pod POD in team-a.
owners() { jp team-a pod "$1" '{.metadata.ownerReferences[*].name}'; }
# pod_state POD: its phase, deletion and owners, for a failure message.
pod_state() { jp team-a pod "$1" '{.status.phase} deleting "{.metadata.deletionTimestamp}" owners "{.metadata.ownerReferences[*].name}"'; }

# Contract 4 and 5a: a pod runs while a Sandbox bound to it is active, and
# goes with the last one. A Sandbox deleted with its dependents orphaned
# (--cascade=orphan): the garbage collector removes its owner reference and
# leaves the pod running, alice's command over her folders past any
# revocation, and nothing would ever lifecycle it. The controller deletes a
# sandbox pod no Sandbox holds; one another Sandbox still holds stays.
test_7_d_a_sandbox_deleted_orphaning_takes_its_pod() {
  sandbox_as_alice ws-7d task-ws7d alice || fail "ws-7d refused"
  sandbox_as_alice ws-7d2 task-ws7d alice || fail "ws-7d2 refused"
  wait_for 60 bound team-a ws-7d || { fail "ws-7d not bound"; return; }
  wait_for 60 bound team-a ws-7d2 || { fail "ws-7d2 not bound"; return; }
  local pod
  pod=$(pod_of team-a ws-7d)
  expect_eq "$(pod_of team-a ws-7d2)" "$pod" "ws-7d2 shares ws-7d's pod"
  as "$ALICE" delete sandbox -n team-a ws-7d --cascade=orphan --wait=true >/dev/null || fail "alice's orphaning delete of ws-7d"
  wait_for 30 eval '[ "$(owners "$pod")" = ws-7d2 ]' || fail "$pod after ws-7d went: $(pod_state "$pod")"
  sleep 2
  expect_eq "$(jp team-a pod "$pod" '{.metadata.deletionTimestamp}')" "" "$pod while ws-7d2 holds it: deleting"
  as "$ALICE" delete sandbox -n team-a ws-7d2 --cascade=orphan --wait=true >/dev/null || fail "alice's orphaning delete of ws-7d2"
  wait_for 60 pod_gone team-a "$pod" || fail "$pod outlives its Sandboxes (--cascade=orphan): $(pod_state "$pod")"
}

# The same by a tenant who may patch pods: removing owner references passes
# admission (test_7_c; the garbage collector does so), so mallory strips
# every reference from alice's pod, then alice deletes her Sandbox as usual:
# the garbage collector had nothing to collect. While ws-7e is active the
# controller puts its reference back; once it is gone, the pod goes.
test_7_e_owner_references_removed_then_the_sandbox_deleted() {
  sandbox_as_alice ws-7e task-ws7e alice || fail "ws-7e refused"
  wait_for 60 bound team-a ws-7e || { fail "ws-7e not bound"; return; }
  local pod out
  pod=$(pod_of team-a ws-7e)
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]' 2>&1) ||
    fail "mallory's removal of $pod's owner references: $out"
  wait_for 30 eval '[ "$(owners "$pod")" = ws-7e ]' || fail "$pod's reference to active ws-7e not restored: $(pod_state "$pod")"
  out=$(as "$MALLORY" patch pod -n team-a "$pod" --type json -p '[{"op":"remove","path":"/metadata/ownerReferences"}]' 2>&1) ||
    fail "mallory's second removal of $pod's owner references: $out"
  as "$ALICE" delete sandbox -n team-a ws-7e --wait=true >/dev/null || fail "alice's delete of ws-7e"
  wait_for 60 pod_gone team-a "$pod" || fail "$pod outlives ws-7e (owner references removed): $(pod_state "$pod")"
}

# Updates of a Sandbox being deleted skip both webhooks (finalizer removals
# must never wait for them): its reserved metadata is still the controller's,
# and its finalizers and garbage collection still go through. A Sandbox
# being deleted is not active (contract section 5a), though a tenant's
# finalizer holds it: its pod runs on only while another Sandbox of the
# intent (term-2) is active, and goes once none is. The status (lifecycle
# facts) is written by the controller alone.
test_8_terminating_sandboxes_and_status() {
  as "$ALICE" apply -f - >/dev/null <<YAML || fail "create term-1"
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: term-1, namespace: team-a, finalizers: [example.com/hold]}
spec: {image: $IMG, idempotencyKey: task-term, workspaceOwner: alice}
YAML
  wait_for 60 bound team-a term-1 || fail "term-1 not bound"
  local digest out pod
  digest=$(jp team-a sandbox term-1 '{.metadata.labels.sandbox\.dev/scope-digest}')
  expect_match "$digest" '^[0-9a-f]{32}$' "term-1's digest label"
  sandbox_as_alice term-2 task-term alice || fail "term-2 refused"
  wait_for 60 bound team-a term-2 || fail "term-2 not bound"
  pod=$(pod_of team-a term-1)
  expect_eq "$(pod_of team-a term-2)" "$pod" "term-2's pod (the same intent as term-1)"
  as "$ALICE" delete sandbox -n team-a term-1 --wait=false >/dev/null || fail "delete term-1"
  out=$(as "$ALICE" annotate sandbox -n team-a term-1 sandbox.dev/requested-by=bob --overwrite 2>&1) &&
    fail "alice rewrote requested-by of a terminating Sandbox"
  refused_by sandbox-controller-sandboxes "$out" || fail "reserved annotation changed: $out"
  out=$(as "$ALICE" label sandbox -n team-a term-1 sandbox.dev/scope-digest=ffffffffffffffffffffffffffffffff --overwrite 2>&1) &&
    fail "alice rewrote the digest label of a terminating Sandbox"
  refused_by sandbox-controller-sandboxes "$out" || fail "digest label changed: $out"
  out=$(as "$ALICE" label sandbox -n team-a term-1 sandbox.dev/scope-digest- 2>&1) &&
    fail "alice removed the digest label of a terminating Sandbox"
  refused_by sandbox-controller-sandboxes "$out" || fail "digest label removed: $out"
  out=$(as "$ALICE" annotate sandbox -n team-a term-1 sandbox.dev/owner-authorization- 2>&1) &&
    fail "alice removed the record of a terminating Sandbox"
  refused_by sandbox-controller-sandboxes "$out" || fail "record removed: $out"
  out=$(as "$ALICE" annotate sandbox -n team-a term-1 sandbox.dev/extra=1 2>&1) && fail "alice added a reserved annotation"
  refused_by sandbox-controller-sandboxes "$out" || fail "reserved annotation added: $out"
  expect_eq "$(jp team-a sandbox term-1 '{.metadata.labels.sandbox\.dev/scope-digest}')" "$digest" "term-1's digest label"
  out=$(as "$ALICE" annotate sandbox -n team-a term-1 example.com/note=bye 2>&1) || fail "an ordinary annotation refused: $out"
  # term-2 is active: the pod it shares with term-1 stays
  sleep 5
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.name} {.metadata.deletionTimestamp}' 2>&1)" "$pod " \
    "$pod (held by term-2) 5 s after term-1's delete"
  bound team-a term-2 || fail "term-2 unbound while term-1 terminates: $(jp team-a sandbox term-2 '{.status.conditions}')"
  # term-2 gone: term-1, terminating, holds the pod alone and does not keep it
  as "$ALICE" delete sandbox -n team-a term-2 --wait=false >/dev/null || fail "delete term-2"
  wait_for 60 pod_gone team-a "$pod" ||
    fail "term-1's pod $pod stays 60 s after the other holder went (term-1 terminating): $(kubectl get pod -n team-a "$pod" -o jsonpath='{.status.phase} owners {.metadata.ownerReferences[*].name}' 2>&1)"
  out=$(as "$ALICE" patch sandbox -n team-a term-1 --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' 2>&1) ||
    fail "finalizer removal refused: $out"
  wait_for 30 sh -c '! kubectl get sandbox -n team-a term-1' || fail "term-1 not deleted"
  # foreground deletion: the garbage collector's finalizer goes after the pod
  sandbox_as_alice fg-1 task-fg alice || fail "fg-1 refused"
  wait_for 60 bound team-a fg-1 || fail "fg-1 not bound"
  local pod
  pod=$(pod_of team-a fg-1)
  as "$ALICE" delete sandbox -n team-a fg-1 --cascade=foreground --wait=false >/dev/null || fail "delete fg-1"
  wait_for 90 sh -c '! kubectl get sandbox -n team-a fg-1' || fail "fg-1 (foreground) not deleted: $(kubectl get sandbox -n team-a fg-1 -o jsonpath='{.metadata.finalizers}')"
  expect_ok pod_gone team-a "$pod"
  # status: refused to alice and to the cluster admin, the controller's own pass
  out=$(as "$ALICE" patch sandbox -n team-a ws-3 --subresource=status --type merge -p '{"status":{"phase":"Failed"}}' 2>&1) &&
    fail "alice wrote the status of ws-3"
  refused_by sandbox-controller-sandboxes "$out" || fail "alice's status write: $out"
  out=$(kubectl patch sandbox -n team-a ws-3 --subresource=status --type merge -p '{"status":{"podName":"sbx-elsewhere"}}' 2>&1) &&
    fail "the admin wrote the status of ws-3"
  refused_by sandbox-controller-sandboxes "$out" || fail "the admin's status write: $out"
  expect_eq "$(jp team-a sandbox ws-3 '{.status.phase}')" Running "ws-3's phase"
  out=$(as "$CONTROLLER" patch sandbox -n team-a ws-3 --subresource=status --type merge -p '{"status":{"phase":"Running"}}' 2>&1) ||
    fail "the controller's status write refused: $out"
}

# ctl_dry_run NAME [PYTHON [NS]]: a server dry run of sandbox_pod_json NAME NS
# (default team-a; changed by PYTHON) as the controller's identity; prints
# kubectl's output.
ctl_dry_run() { as "$CONTROLLER" create --dry-run=server -f - 2>&1 <<<"$(sandbox_pod_json "$1" "${3:-team-a}" "${2:-}")"; }
# ctl_refuses_each PREFIX: for each line WHAT|PYTHON of stdin, the dry run of
# a pod changed by PYTHON (named PREFIX-N) is refused by the confinement policy.
ctl_refuses_each() {
  local what m out i=0
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(ctl_dry_run "$1-$i" "$m") && { fail "the controller's identity created a pod with $what"; continue; }
    ctl_refused "$what" "$out"
  done
}

# Issue 23, finding 2: the confinement admits for the controller's identity
# only the shape the controller builds (an allow-list), not merely no
# privileged container. The reviewer's server dry run, in kube-system and in
# a tenant namespace: an sbx- pod as root with SYS_ADMIN, SYS_PTRACE and
# NET_ADMIN, seccomp and AppArmor Unconfined, a hostPort, a pinned nodeName,
# tolerating everything, mounting another application's claim, a ConfigMap
# and a projected token for any audience; then each of those alone.
test_9_a_controller_pod_shape_is_an_allow_list() {
  local ns out
  kubectl create configmap app-config -n team-a --from-literal=k=v >/dev/null 2>&1
  pod_settings_classes || fail "the cluster's classes"
  for ns in kube-system team-a; do
    out=$(ctl_dry_run sbx-review "$REVIEW_POD" "$ns") &&
      { fail "the reviewer's pod was admitted for the controller in $ns"; continue; }
    ctl_refused "the reviewer's pod in $ns" "$out"
  done
  out=$(ctl_dry_run sbx-shape) ||
    fail "the controller's own shape was refused: $out"
  ctl_refuses_each sbx-shape <<CASES
root (runAsUser 0)|p['spec']['securityContext']['runAsUser'] = 0; p['spec']['securityContext']['runAsNonRoot'] = False
a container as root|p['spec']['containers'][0]['securityContext']['runAsUser'] = 0
no runAsNonRoot|del p['spec']['securityContext']['runAsNonRoot']
SYS_ADMIN|p['spec']['containers'][0]['securityContext']['capabilities']['add'] = ['SYS_ADMIN']
SYS_PTRACE|p['spec']['containers'][0]['securityContext']['capabilities']['add'] = ['SYS_PTRACE']
NET_ADMIN|p['spec']['containers'][0]['securityContext']['capabilities']['add'] = ['NET_ADMIN']
capabilities not dropped|p['spec']['containers'][0]['securityContext']['capabilities'] = {}
privilege escalation|p['spec']['containers'][0]['securityContext']['allowPrivilegeEscalation'] = True
seccomp Unconfined|p['spec']['securityContext']['seccompProfile'] = {'type': 'Unconfined'}
a container's seccomp Unconfined|p['spec']['containers'][0]['securityContext']['seccompProfile'] = {'type': 'Unconfined'}
no seccomp profile|del p['spec']['securityContext']['seccompProfile']
AppArmor Unconfined|p['spec']['containers'][0]['securityContext']['appArmorProfile'] = {'type': 'Unconfined'}
AppArmor Unconfined (annotation)|p['metadata']['annotations']['container.apparmor.security.beta.kubernetes.io/sandbox'] = 'unconfined'
SELinux options|p['spec']['securityContext']['seLinuxOptions'] = {'type': 'spc_t'}
a sysctl|p['spec']['securityContext']['sysctls'] = [{'name': 'kernel.shm_rmid_forced', 'value': '0'}]
the root supplemental group|p['spec']['securityContext']['supplementalGroups'] = [0]
an unmasked /proc|p['spec']['hostUsers'] = False; p['spec']['containers'][0]['securityContext']['procMount'] = 'Unmasked'
a hostPort|p['spec']['containers'][0]['ports'] = [{'containerPort': 80, 'hostPort': 8080}]
a pinned nodeName|p['spec']['nodeName'] = 'kwok-node-0'
a node affinity|p['spec']['affinity'] = {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {'nodeSelectorTerms': [{'matchFields': [{'key': 'metadata.name', 'operator': 'In', 'values': ['kwok-node-0']}]}]}}}
a node selector|p['spec']['nodeSelector'] = {'kubernetes.io/hostname': 'kwok-node-0'}
tolerating everything|p['spec']['tolerations'] = [{'operator': 'Exists'}]
a priority class|p['spec']['priorityClassName'] = 'system-node-critical'
a runtime class|p['spec']['runtimeClassName'] = 'unconfined'
an image pull secret|p['spec']['imagePullSecrets'] = [{'name': 'someone-elses'}]
a shared process namespace|p['spec']['shareProcessNamespace'] = True
the host user namespace|p['spec']['hostUsers'] = True
a service account token|p['spec']['automountServiceAccountToken'] = True
another application's claim|p['spec']['volumes'].append({'name': 'app', 'persistentVolumeClaim': {'claimName': 'app-data'}}); p['spec']['containers'][0]['volumeMounts'].append({'name': 'app', 'mountPath': '/app'})
a ConfigMap|p['spec']['volumes'].append({'name': 'cm', 'configMap': {'name': 'app-config'}})
a projected token for any audience|p['spec']['serviceAccountName'] = 'default'; p['spec']['volumes'].append({'name': 'tok', 'projected': {'sources': [{'serviceAccountToken': {'audience': 'vault', 'path': 't'}}]}})
an emptyDir in memory|p['spec']['volumes'].append({'name': 'm', 'emptyDir': {'medium': 'Memory'}})
a second container|p['spec']['containers'].append({'name': 'side', 'image': 'x', 'securityContext': p['spec']['containers'][0]['securityContext']})
an init container|p['spec']['initContainers'] = [{'name': 'i', 'image': 'x', 'securityContext': p['spec']['containers'][0]['securityContext']}]
CASES
}

# netpol_json NAME NS LABELS SPEC: a NetworkPolicy (JSON; LABELS and SPEC are JSON objects).
netpol_json() {
  printf '{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"%s","namespace":"%s","labels":%s},"spec":%s}' \
    "$1" "$2" "$3" "$4"
}
# The floor as the controller renders it with this suite's config (no
# network section: DNS to kube-system's kube-dns pods, nothing in), and a
# policy that allows everything to every pod.
NETPOL_FLOOR_LABELS='{"app.kubernetes.io/managed-by":"sandbox-controller","sandbox.dev/network-floor":"true"}'
NETPOL_FLOOR_SPEC='{"podSelector":{"matchLabels":{"app.kubernetes.io/managed-by":"sandbox-controller"},"matchExpressions":[{"key":"app.kubernetes.io/name","operator":"In","values":["sandbox","sandbox-workspace-init"]}]},"policyTypes":["Ingress","Egress"],"egress":[{"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},"podSelector":{"matchLabels":{"k8s-app":"kube-dns"}}}],"ports":[{"protocol":"UDP","port":53},{"protocol":"TCP","port":53}]}]}'
NETPOL_ALLOW_ALL='{"podSelector":{},"policyTypes":["Ingress","Egress"],"ingress":[{}],"egress":[{}]}'
# The enforcement probe's policy before it probed egress: ingress to the
# target on 8081 alone (it read "enforced" on a cluster enforcing no egress rule).
NETPOL_PROBE_OLD_SPEC='{"podSelector":{"matchLabels":{"sandbox.dev/netprobe":"target"}},"policyTypes":["Ingress"],"ingress":[{"ports":[{"protocol":"TCP","port":8081}]}]}'
NETPOL_MANAGED='{"app.kubernetes.io/managed-by":"sandbox-controller"}'
# ctl_netpol VERB JSON: kubectl VERB (create, replace) --dry-run=server of JSON
# as the controller's identity; prints kubectl's output.
ctl_netpol() { as "$CONTROLLER" "$1" --dry-run=server -f - 2>&1 <<<"$2"; }
netpol_refused() { refused_by sandbox-controller-network-confinement "$1"; }
allow_all_refused() { netpol_refused "$(ctl_netpol create "$(netpol_json allow-all team-a '{}' "$NETPOL_ALLOW_ALL")")"; }

# Threat T36: RBAC lets the controller write NetworkPolicies in every
# namespace and the tenants' policy (sandbox-controller-network) lets it
# through; sandbox-controller-network-confinement confines its identity to
# the policies it keeps. As that identity, server dry runs: an
# allow-everything policy under another name, or under the floor's name and
# labels, in team-a and kube-system, refused; deleting or rewriting a
# tenant's policy (and kube-system's) refused; a policy named, labelled and
# shaped like the floor, or like a set of profiles' policy, admitted, and so
# is deleting the namespace's real floor when there is one. The enforcement
# probe's policies sbx-netprobe and sbx-netprobe-egress (as the controller
# builds them, sbx-netprobe-pod prints them): created, and sbx-netprobe
# written over an older ingress-only one, in their shapes only; that older
# shape, allow-everything under either name, or the one's shape under the
# other's name refused, and so is rewriting a tenant's policy named
# sbx-netprobe (no managed-by label).
test_9_d_controller_network_policies_are_its_own() {
  local out tenant system profiles probe egress old
  tenant=$(netpol_json team-default-deny team-a '{}' '{"podSelector":{},"policyTypes":["Ingress","Egress"]}')
  system=$(netpol_json sbx-e2e-deny kube-system '{}' '{"podSelector":{"matchLabels":{"sbx-e2e":"none"}},"policyTypes":["Ingress"]}')
  kubectl apply -f - >/dev/null <<<"$tenant" || { fail "the admin's policy in team-a"; return; }
  kubectl apply -f - >/dev/null <<<"$system" || { fail "the admin's policy in kube-system"; return; }
  # The API server loads a policy a moment after it is stored.
  wait_for 20 allow_all_refused ||
    fail "an allow-everything policy of the controller's identity in team-a: $(ctl_netpol create "$(netpol_json allow-all team-a '{}' "$NETPOL_ALLOW_ALL")")"
  out=$(ctl_netpol create "$(netpol_json allow-all kube-system '{}' "$NETPOL_ALLOW_ALL")") &&
    fail "the controller's identity created an allow-everything policy in kube-system"
  netpol_refused "$out" || fail "allow-everything in kube-system: $out"
  out=$(ctl_netpol create "$(netpol_json sandbox-floor team-a "$NETPOL_FLOOR_LABELS" "$NETPOL_ALLOW_ALL")")
  netpol_refused "$out" || fail "an allow-everything policy under the floor's name and labels: $out"
  out=$(as "$CONTROLLER" delete networkpolicy -n team-a team-default-deny --dry-run=server 2>&1) &&
    fail "the controller's identity deleted a tenant's policy"
  netpol_refused "$out" || fail "delete of a tenant's policy: $out"
  out=$(as "$CONTROLLER" delete networkpolicy -n kube-system sbx-e2e-deny --dry-run=server 2>&1) &&
    fail "the controller's identity deleted a policy of kube-system"
  netpol_refused "$out" || fail "delete of a policy of kube-system: $out"
  out=$(ctl_netpol replace "$(netpol_json team-default-deny team-a "$NETPOL_FLOOR_LABELS" '{"podSelector":{},"policyTypes":["Ingress","Egress"],"egress":[{}]}')") &&
    fail "the controller's identity rewrote a tenant's policy"
  netpol_refused "$out" || fail "rewrite of a tenant's policy: $out"
  # Its own: the floor (AlreadyExists when the namespace has one: admission
  # let it through, the store refused the name) and a set's policy.
  out=$(ctl_netpol create "$(netpol_json sandbox-floor team-a "$NETPOL_FLOOR_LABELS" "$NETPOL_FLOOR_SPEC")") ||
    [[ "$out" == *AlreadyExists* || "$out" == *"already exists"* ]] || fail "the floor's create refused: $out"
  profiles=$(netpol_json sandbox-profiles-0123456789abcdef team-a \
    '{"app.kubernetes.io/managed-by":"sandbox-controller","sandbox.dev/network-floor":"profiles","sandbox.dev/network-profiles":"0123456789abcdef"}' \
    '{"podSelector":{"matchLabels":{"app.kubernetes.io/managed-by":"sandbox-controller","app.kubernetes.io/name":"sandbox","sandbox.dev/network-profiles":"0123456789abcdef"}},"policyTypes":["Egress"],"egress":[{"to":[{"ipBlock":{"cidr":"192.0.2.0/24"}}],"ports":[{"protocol":"TCP","port":8080}]}]}')
  out=$(ctl_netpol create "$profiles") || fail "a set of profiles' policy refused: $out"
  if kubectl get networkpolicy -n team-a sandbox-floor >/dev/null 2>&1; then
    out=$(as "$CONTROLLER" delete networkpolicy -n team-a sandbox-floor --dry-run=server 2>&1) ||
      fail "the controller's delete of its floor refused: $out"
  else
    say "  no floor in team-a now: its delete not tried"
  fi
  probe=$("$BUILD_DIR/sbx-netprobe-pod" team-a policy) || { fail "sbx-netprobe-pod policy failed"; return; }
  old=$(netpol_json sbx-netprobe team-a "$NETPOL_MANAGED" "$NETPOL_PROBE_OLD_SPEC")
  egress=$("$BUILD_DIR/sbx-netprobe-pod" team-a egress-policy) || { fail "sbx-netprobe-pod egress-policy failed"; return; }
  out=$(ctl_netpol create "$probe") || fail "the probe's policy refused: $out"
  out=$(ctl_netpol create "$egress") || fail "the probe's egress policy refused: $out"
  out=$(ctl_netpol create "$(netpol_json sbx-netprobe-egress team-a "$NETPOL_MANAGED" "$NETPOL_ALLOW_ALL")") &&
    fail "the controller's identity created an allow-everything policy under the probe's egress name"
  netpol_refused "$out" || fail "allow-everything under the probe's egress name: $out"
  out=$(ctl_netpol create "${probe//\"sbx-netprobe\"/\"sbx-netprobe-egress\"}") &&
    fail "the controller's identity created the probe's ingress policy under its egress name"
  netpol_refused "$out" || fail "the probe's ingress policy under its egress name: $out"
  out=$(ctl_netpol create "$old") && fail "the controller's identity created the older ingress-only probe policy"
  netpol_refused "$out" || fail "the older ingress-only probe policy: $out"
  out=$(ctl_netpol create "$(netpol_json sbx-netprobe team-a "$NETPOL_MANAGED" "$NETPOL_ALLOW_ALL")") &&
    fail "the controller's identity created an allow-everything policy under the probe's name"
  netpol_refused "$out" || fail "allow-everything under the probe's name: $out"
  # An older controller's policy is there: written over in the new shape only.
  kubectl create -f - >/dev/null <<<"$old" || { fail "the admin's older probe policy in team-a"; return; }
  out=$(ctl_netpol replace "$probe") || fail "the probe's policy over the older one refused: $out"
  out=$(ctl_netpol replace "$old") && fail "the controller's identity rewrote the probe's policy ingress-only"
  netpol_refused "$out" || fail "a rewrite to the older ingress-only shape: $out"
  out=$(ctl_netpol replace "$(netpol_json sbx-netprobe team-a "$NETPOL_MANAGED" "$NETPOL_ALLOW_ALL")") &&
    fail "the controller's identity rewrote the probe's policy to allow everything"
  netpol_refused "$out" || fail "a rewrite of the probe's policy to allow everything: $out"
  kubectl replace -f - >/dev/null <<<"$(netpol_json sbx-netprobe team-a '{}' "$NETPOL_PROBE_OLD_SPEC")" ||
    fail "the admin's unlabelled policy sbx-netprobe"
  out=$(ctl_netpol replace "$probe") && fail "the controller's identity rewrote a tenant's policy named sbx-netprobe"
  netpol_refused "$out" || fail "a rewrite of a tenant's policy named sbx-netprobe: $out"
  kubectl delete networkpolicy -n team-a sbx-netprobe --ignore-not-found >/dev/null 2>&1
  kubectl delete networkpolicy -n team-a team-default-deny --ignore-not-found >/dev/null 2>&1
  kubectl delete networkpolicy -n kube-system sbx-e2e-deny --ignore-not-found >/dev/null 2>&1
  return 0
}
# opts_config MODE: the controller config (JSON, a subset of YAML) of test_9_b in workspace MODE.
opts_config() {
  python3 - "$1" "$ROOT" "$POD_SETTINGS" <<'PY'
import json, sys
mode, root, pod = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ws = {'mode': mode}
if mode == 'hostPath':
    ws['hostPathRoot'] = root
print(json.dumps({'workspace': ws, 'pod': pod}))
PY
}

# pod_has_settings NS POD: the pod carries every setting of POD_SETTINGS.
pod_has_settings() {
  local got
  got=$(kubectl get pod -n "$1" "$2" -o json | python3 -c '
import json, sys
p = json.load(sys.stdin); s = p["spec"]; m = p["metadata"]
tol = sorted(t["key"] for t in s.get("tolerations", []))
print(s.get("nodeSelector"), tol, s.get("priorityClassName"), s.get("runtimeClassName"),
      [x["name"] for x in s.get("imagePullSecrets", [])], m["labels"].get("team"), m["annotations"].get("example.com/cost-center"))')
  expect_eq "$got" "{'example.com/pool': 'sandboxes'} ['dedicated', 'node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable', 'spot'] sandbox-low ${3:-gvisor} ['regcred'] platform 42" \
    "the settings of $2"
}

# ... and the controller's own pods, with every setting of its config, are
# still admitted: cold, ownerless, with a runtime class the Sandbox names,
# warm (made by the pool and bound), resumed, in hostPath and in pvc mode.
# Settings other than the configured ones are refused.
test_9_b_controller_pods_with_every_setting_admitted() {
  pod_settings_classes || fail "the cluster's classes"
  kubectl label node --all example.com/pool=sandboxes --overwrite >/dev/null
  E2E_POLICY_POD_SETTINGS=$POD_SETTINGS install_policies sandbox-controller || { fail "policies with the pod settings"; return; }
  controller_stop "$MAIN_CTL"
  opts_config hostPath >"$E2E_DIR/opts-hostpath.yaml"
  start_controller opts-hostpath "$E2E_DIR/opts-hostpath.yaml"
  local out pod
  sandbox_as_alice opt-cold task-opt-cold alice || fail "opt-cold refused"
  KUBECONFIG=$ALICE sandbox team-a opt-none $IMG task-opt-none - >/dev/null || fail "opt-none refused"
  as "$ALICE" apply -f - >/dev/null <<YAML || fail "opt-kata refused"
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: opt-kata, namespace: team-a}
spec: {image: $IMG, idempotencyKey: task-opt-kata, workspaceOwner: alice, runtimeClassName: kata}
YAML
  pool "$ALICE" team-a opt-pool 1 alice >/dev/null || fail "opt-pool refused"
  for s in opt-cold opt-none opt-kata; do
    wait_for 60 phase_is team-a $s Running || { fail "$s not Running: $(jp team-a sandbox $s '{.status.conditions}')"; continue; }
  done
  pod_has_settings team-a "$(pod_of team-a opt-cold)"
  pod_has_settings team-a "$(pod_of team-a opt-none)"
  pod_has_settings team-a "$(pod_of team-a opt-kata)" kata
  wait_for 60 ready_is team-a opt-pool 1 || fail "opt-pool not warm: $(pool_diag team-a opt-pool)"
  sleep 3 # the settle time
  wsbx "$ALICE" team-a opt-warm task-opt-warm alice || fail "opt-warm refused"
  wait_for 60 phase_is team-a opt-warm Running || fail "opt-warm not Running: $(jp team-a sandbox opt-warm '{.status.conditions}')"
  expect_eq "$(binding team-a opt-warm)" Warm "opt-warm's binding"
  pod_has_settings team-a "$(pod_of team-a opt-warm)"
  pod=$(pod_of team-a opt-cold)
  as "$ALICE" patch sbx -n team-a opt-cold --type merge -p '{"spec":{"lifecycle":{"suspend":true}}}' >/dev/null || fail "suspend opt-cold"
  wait_for 30 pod_gone team-a "$pod" || fail "opt-cold's pod stays suspended"
  as "$ALICE" patch sbx -n team-a opt-cold --type merge -p '{"spec":{"lifecycle":{"suspend":false}}}' >/dev/null || fail "resume opt-cold"
  wait_for 60 phase_is team-a opt-cold Running || fail "opt-cold not Running after its resume: $(jp team-a sandbox opt-cold '{.status.conditions}')"
  pod_has_settings team-a "$(pod_of team-a opt-cold)"
  controller_stop "$MAIN_CTL"
  opts_config pvc >"$E2E_DIR/opts-pvc.yaml"
  start_controller opts-pvc "$E2E_DIR/opts-pvc.yaml"
  sandbox_as_alice opt-pvc task-opt-pvc alice || fail "opt-pvc refused"
  wait_for 60 bound team-a opt-pvc || fail "opt-pvc not bound: $(jp team-a sandbox opt-pvc '{.status.conditions}')"
  pod=$(pod_of team-a opt-pvc)
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.spec.volumes[*].persistentVolumeClaim.claimName} {.spec.containers[0].volumeMounts[0].subPath}')" \
    "sandbox-workspaces alice/workspace" "opt-pvc's pod mounts its owner's folders of the claim"
  pod_has_settings team-a "$pod"
  # other settings than the configured ones stay refused
  ctl_refuses_each sbx-opt <<CASES
another node selector|p['spec']['nodeSelector'] = {'example.com/pool': 'other'}
another toleration|p['spec']['tolerations'] = [{'key': 'dedicated', 'operator': 'Exists'}]
a configured toleration for longer|p['spec']['tolerations'] = [{'key': 'spot', 'operator': 'Exists', 'effect': 'NoExecute', 'tolerationSeconds': 3600}]
another priority class|p['spec']['priorityClassName'] = 'system-node-critical'
a runtime class not allowed|p['spec']['runtimeClassName'] = 'unconfined'
another image pull secret|p['spec']['imagePullSecrets'] = [{'name': 'someone-elses'}]
CASES
  out=$(ctl_dry_run sbx-opt-all "$SETTINGS_POD") ||
    fail "the configured settings were refused: $out"
  # back to the suite's controller and policies
  as "$ALICE" delete swp -n team-a opt-pool --wait=false >/dev/null
  as "$ALICE" delete sbx -n team-a opt-cold opt-none opt-kata opt-warm opt-pvc --wait=false >/dev/null
  controller_stop "$MAIN_CTL"
  install_policies sandbox-controller || fail "the suite's policies again"
  start_controller main "$E2E_DIR/config.yaml"
}

# gate_copies: the pod and confinement policies rendered for the user "gate",
# renamed *-gate, bound in kube-system only (where no other copy of the pod
# policy applies and the suite's confinement, rendered for the controller,
# never matches "gate"), with validations that refuse whatever reaches them.
gate_copies() {
  render_policies gate | python3 -c '
import json, sys
doc = json.load(sys.stdin)
out = []
for x in doc["items"]:
    if x["metadata"]["name"] not in ("sandbox-controller-pods", "sandbox-controller-confinement"):
        continue
    x["metadata"]["name"] += "-gate"
    if x["kind"] == "ValidatingAdmissionPolicy":
        x["spec"]["validations"] = [{"expression": "false", "message": "reached the validations"}]
    else:
        x["spec"]["policyName"] += "-gate"
        x["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}
    out.append(x)
doc["items"] = out
print(json.dumps(doc))'
}
gate_dry_run() { kubectl create --dry-run=server --as=gate --as-group=system:masters -f - 2>&1 <<<"$(sandbox_pod_json "$1" kube-system "${2:-}")"; }
gate_enforced() { [[ "$(gate_dry_run sbx-gate-wait "p['spec']['hostNetwork'] = True")" == *"reached the validations"* ]]; }

# The "breaks-a-rule" match condition (hack/policy-gate.py) of the pod and
# confinement policies: a request that passes every rule stops at the match
# conditions, so the API server builds the policy's CEL input once instead of
# four times; a request that breaks a rule goes on to the validations. Shown
# with copies whose validations refuse all they see: compliant requests are
# admitted (they never reached the validations), others refused.
test_9_c_compliant_requests_stop_at_the_match_conditions() {
  local out
  gate_copies | kubectl apply -f - >/dev/null || { fail "the gate copies"; return; }
  wait_for 20 gate_enforced || { fail "the gate copies are not enforced: $(gate_dry_run sbx-gate-wait "p['spec']['hostNetwork'] = True")"; return; }
  out=$(gate_dry_run sbx-gate-ok) || fail "a compliant sandbox pod reached the confinement's validations: $out"
  out=$(gate_dry_run sbx-gate-pool "p['metadata']['labels'].pop('sandbox.dev/scope-digest'); p['metadata']['labels']['sandbox.dev/pool'] = 'warm'") ||
    fail "a compliant warm-pool pod reached the confinement's validations: $out"
  local what m i=0
  while IFS='|' read -r what m; do
    i=$((i + 1))
    out=$(gate_dry_run "sbx-gate-bad-$i" "$m") && { fail "a pod with $what was admitted by the gate copy"; continue; }
    [[ "$out" == *"sandbox-controller-confinement-gate"*"reached the validations"* ]] ||
      fail "a pod with $what: not refused at the confinement's validations: $out"
  done <<CASES
a name not sbx-|p['metadata']['name'] = 'ordinary'
no managed-by label|p['metadata']['labels'].pop('app.kubernetes.io/managed-by')
another owner's folder|p['spec']['containers'][0]['volumeMounts'][0]['subPath'] = 'bob/workspace'
root|p['spec']['securityContext']['runAsUser'] = 0; p['spec']['securityContext']['runAsNonRoot'] = False
SYS_ADMIN|p['spec']['containers'][0]['securityContext']['capabilities']['add'] = ['SYS_ADMIN']
a node selector|p['spec']['nodeSelector'] = {'kubernetes.io/hostname': 'kwok-node-0'}
a Secret|p['spec']['volumes'].append({'name': 's', 'secret': {'secretName': 'x'}})
CASES
  # a real pod (not a dry run) for the updates and the delete below
  kubectl create --as=gate --as-group=system:masters -f - >/dev/null 2>&1 <<<"$(sandbox_pod_json sbx-gate-live kube-system)" ||
    { fail "the compliant pod sbx-gate-live was refused"; return; }
  # someone else (the admin) updates it: the pod policy's rules
  out=$(kubectl label pod -n kube-system sbx-gate-live team=platform --dry-run=server 2>&1) ||
    fail "a compliant update of a sandbox pod reached the pod policy's validations: $out"
  out=$(kubectl label pod -n kube-system sbx-gate-live sandbox.dev/scope-digest=forged --overwrite --dry-run=server 2>&1) &&
    fail "a changed reserved label was admitted by the pod policy's gate copy"
  [[ "$out" == *"sandbox-controller-pods-gate"*"reached the validations"* ]] ||
    fail "a changed reserved label: not refused at the pod policy's validations: $out"
  # the controller's identity (here "gate") changes its metadata and deletes it
  out=$(kubectl label pod -n kube-system sbx-gate-live team=platform --as=gate --as-group=system:masters --dry-run=server 2>&1) ||
    fail "the controller's compliant update reached the confinement's validations: $out"
  out=$(kubectl delete pod -n kube-system sbx-gate-live --as=gate --as-group=system:masters --wait=false 2>&1) ||
    fail "the controller's delete of its pod reached the confinement's validations: $out"
  gate_copies | kubectl delete -f - >/dev/null 2>&1
  kubectl delete pod -n kube-system sbx-gate-live --wait=false >/dev/null 2>&1
  return 0
}

setup
e2e_main
