#!/usr/bin/env bash
# Helpers for the warm pool suites (test_warm.sh, test_isolation.sh): the
# users' RBAC, pools and Sandboxes of the pools' template created as a user,
# and what a test reads of them. Source after lib.sh and lib_admission.sh;
# IMG is the pools' image, SETTLE their settle time (--warm-pool-settle).

# warm_rbac NS...: in each NS, alice and bob may edit Sandboxes and pools
# (and scale pools); alice may use the owner alice, bob the owner bob.
warm_rbac() {
  local ns
  for ns; do
    kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-editor, namespace: $ns}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes, sandboxwarmpools], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [sandbox.dev], resources: [sandboxwarmpools/scale], verbs: [get, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-editors, namespace: $ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-editor}
subjects: [{kind: User, name: alice}, {kind: User, name: bob}]
YAML
    grant_owner "$ns" alice alice
    grant_owner "$ns" bob bob
  done
}

# warm_setup: admission_up with namespaces team-a and team-b, and warm_rbac
# in both.
warm_setup() {
  admission_up team-a team-b
  warm_rbac team-a team-b
}

# main_start [flags...]: the controller "main" serving the webhook on
# WEBHOOK_PORT, pools settling after SETTLE, its metrics on MAIN_METRICS; the
# environment (SBX_FAULT_DELAYS, ...) is the caller's.
main_start() {
  MAIN_METRICS=$(free_port)
  controller_start "main" --metrics-bind-address "127.0.0.1:$MAIN_METRICS" --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" \
    --webhook-cert-dir "$WEBHOOK_CERT_DIR" --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt" \
    --warm-pool-settle "$SETTLE" "$@"
  MAIN_CTL=$CTL_PID
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }
# usable_profile NAME USER: the allow profile NAME (TCP 8080 to 192.0.2.0/24,
# a documentation range no test sends to) and USER's right to use it
# (ClusterRole and ClusterRoleBinding profile-NAME-users); prints kubectl's errors.
usable_profile() {
  kubectl apply -f - 2>&1 >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: $1}
spec:
  egress: [{cidr: 192.0.2.0/24, ports: [{protocol: TCP, port: 8080}]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: profile-$1-users}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxnetworkprofiles], resourceNames: [$1], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: profile-$1-users}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: profile-$1-users}
subjects: [{kind: User, name: $2}]
YAML
}
pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
binding() { jp "$1" sandbox "$2" '{.status.binding}'; }
phase() { jp "$1" sandbox "$2" '{.status.phase}'; }
phase_is() { [ "$(phase "$1" "$2")" = "$3" ]; }
ready_is() { [ "$(jp "$1" swp "$2" '{.status.readyReplicas}')" = "$3" ]; }
pool_diag() { # pool_diag NS POOL: its status and its pods, for a failure message
  local uid
  uid=$(kubectl get swp -n "$1" "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null)
  printf 'status %s; pods %s' "$(jp "$1" swp "$2" '{.status.replicas}/{.status.readyReplicas} {.status.conditions[0].message}')" \
    "$(kubectl get pods -n "$1" -l "sandbox.dev/pool=$uid" -o jsonpath='{range .items[*]}{.metadata.name}:{.status.phase}{.metadata.deletionTimestamp} {end}' 2>/dev/null)"
}
pool_pods() { # pool_pods NS POOL: names of the pool's member pods, not terminating
  local uid
  uid=$(kubectl get swp -n "$1" "$2" -o jsonpath='{.metadata.uid}')
  kubectl get pods -n "$1" -l "sandbox.dev/pool=$uid" \
    -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{end}{range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null | grep -c .
}
pods_of_scope() { # pods_of_scope NS SANDBOX
  kubectl get pods -n "$1" -l "sandbox.dev/scope-digest=$(jp "$1" sandbox "$2" '{.status.scopeDigest}')" --no-headers 2>/dev/null | grep -c .
}
in_s() { date -u -d "+$1 seconds" +%Y-%m-%dT%H:%M:%SZ; }

# pool KUBECONFIG NS NAME REPLICAS OWNER [IMAGE]
pool() {
  local kc=$1 ns=$2 name=$3 n=$4 owner=$5 img=${6:-$IMG}
  as "$kc" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: $name, namespace: $ns}
spec:
  replicas: $n
  $([ "$owner" != - ] && echo "workspaceOwner: $owner")
  template: {image: $img, command: [sleep, infinity]}
YAML
}

# wsbx KUBECONFIG NS NAME KEY OWNER [LIFECYCLE-JSON]: a Sandbox of the pools'
# template (only a server dry run with WSBX_DRY_RUN=1).
wsbx() {
  local kc=$1 ns=$2 name=$3 key=$4 owner=$5 lc=${6:-}
  python3 - "$ns" "$name" "$key" "$owner" "$IMG" "$lc" >"$E2E_DIR/$ns-$name.json" <<'PY'
import json, sys
ns, name, key, owner, img, lc = sys.argv[1:7]
spec = {"image": img, "command": ["sleep", "infinity"]}
if key != "-":
    spec["idempotencyKey"] = key
if owner != "-":
    spec["workspaceOwner"] = owner
if lc:
    spec["lifecycle"] = json.loads(lc)
print(json.dumps({"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                  "metadata": {"name": name, "namespace": ns}, "spec": spec}))
PY
  as "$kc" create ${WSBX_DRY_RUN:+--dry-run=server} -f "$E2E_DIR/$ns-$name.json" >/dev/null 2>&1
}
