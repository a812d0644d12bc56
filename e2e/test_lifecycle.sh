#!/usr/bin/env bash
# End-to-end: Sandbox lifecycle (contract sections 2, 3 and 5a; issue 16) on a
# real control plane with the admission webhook in force: expiry (Retain and
# Delete), extend and shorten, suspend with two Sandboxes bound, resume under
# the same name and mounts, a resume refused to an identity without `use`, and
# a record of an earlier run refused by the controller, the stored outcome of
# an expired key (after its Sandboxes are deleted and across a restart), the
# controller down across a shutdownTime, racing resumes, crashes at each new
# write, UPDATEs that change anything but lifecycle, and a Sandbox stored by
# the previous version keeping its digest and pod.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1
# The last version before lifecycle (the upgrade test builds and runs it).
PREVIOUS=c0ced9e

setup() {
  admission_up team-a
  grant_editors team-a alice bob
  grant_owner team-a alice alice
}

# main_start [flags...]: the controller serving the webhook (the API server's
# client certificate required), as MAIN_CTL.
main_start() {
  controller_start "main" --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt" "$@"
  MAIN_CTL=$CTL_PID
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }
pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
phase() { jp "$1" sandbox "$2" '{.status.phase}'; }
ready_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Ready")].reason}'; }
bound_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }
bound_message() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].message}'; }
phase_is() { [ "$(phase "$1" "$2")" = "$3" ]; }
pod_exists() { kubectl get pod -n "$1" "$2" >/dev/null 2>&1; }
pod_gone() { ! pod_exists "$1" "$2"; }
sbx_gone() { ! kubectl get sbx -n "$1" "$2" >/dev/null 2>&1; }
pods_of_key() { # pods_of_key NS NAME-OF-A-SANDBOX: pods labelled with its scope digest
  kubectl get pods -n "$1" -l "sandbox.dev/scope-digest=$(jp "$1" sandbox "$2" '{.status.scopeDigest}')" --no-headers 2>/dev/null | grep -c .
}
in_s() { date -u -d "+$1 seconds" +%Y-%m-%dT%H:%M:%SZ; }
has_event() { kubectl get events -n "$1" --field-selector "involvedObject.name=$2,reason=$3" -o name 2>/dev/null | grep -q .; }

# lsbx KUBECONFIG NAME KEY [LIFECYCLE-JSON] [OWNER]: a Sandbox with owner
# (default alice) and key ("-": none) and spec.lifecycle as given.
lsbx() {
  local kc=$1 name=$2 key=$3 lc=${4:-} owner=${5:-alice}
  python3 - "$name" "$key" "$IMG" "$lc" "$owner" >"$E2E_DIR/$name.json" <<'PY'
import json, sys
name, key, img, lc, owner = sys.argv[1:6]
spec = {"image": img, "command": ["sleep", "infinity"]}
if owner != "-":
    spec["workspaceOwner"] = owner
if key != "-":
    spec["idempotencyKey"] = key
if lc:
    spec["lifecycle"] = json.loads(lc)
print(json.dumps({"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                  "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}))
PY
  as "$kc" create -f "$E2E_DIR/$name.json" 2>&1
}
lifecycle_patch() { # lifecycle_patch KUBECONFIG NAME JSON [--dry-run=server]
  as "$1" patch sbx -n team-a "$2" --type merge -p "{\"spec\":{\"lifecycle\":$3}}" ${4:-} 2>&1
}
# resume_refused_dry_run KUBECONFIG NAME: 0 when a server-side dry run of a
# resume of NAME by that identity is refused.
resume_refused_dry_run() {
  ! lifecycle_patch "$1" "$2" '{"suspend":false}' --dry-run=server >/dev/null
}

test_a_expiry_retain() {
  lsbx "$ALICE" exp-r key-exp-r "{\"shutdownTime\":\"$(in_s 6)\"}" >/dev/null || fail "create exp-r"
  wait_for 30 phase_is team-a exp-r Running || fail "exp-r not Running: $(phase team-a exp-r)"
  local pod
  pod=$(pod_of team-a exp-r)
  expect_match "$(jp team-a sandbox exp-r '{.status.podIP}')" '^[0-9.:a-f]+$' "status.podIP while it runs"
  wait_for 30 phase_is team-a exp-r Expired || fail "exp-r not Expired: $(phase team-a exp-r)"
  expect_eq "$(ready_reason team-a exp-r)" Expired "Ready reason"
  wait_for 30 pod_gone team-a "$pod" || fail "pod $pod of an expired Sandbox still there"
  wait_for 10 has_event team-a exp-r SandboxExpired || fail "no SandboxExpired event"
  expect_ok kubectl get sbx -n team-a exp-r
  # Expired is final: no lifecycle change revives it
  local out
  out=$(lifecycle_patch "$ALICE" exp-r "{\"shutdownTime\":\"$(in_s 3600)\"}") && fail "an expired Sandbox was extended"
  expect_match "$out" "expired" "the refusal says it expired"
  expect_match "$(kubectl get sbx -n team-a exp-r)" "Expired" "printer columns"
}

test_b_expiry_delete() {
  lsbx "$ALICE" exp-d key-exp-d "{\"shutdownTime\":\"$(in_s 6)\",\"shutdownPolicy\":\"Delete\"}" >/dev/null || fail "create exp-d"
  wait_for 30 phase_is team-a exp-d Running || fail "exp-d not Running"
  local pod
  pod=$(pod_of team-a exp-d)
  wait_for 40 sbx_gone team-a exp-d || fail "exp-d (shutdownPolicy Delete) not deleted"
  wait_for 30 pod_gone team-a "$pod" || fail "pod $pod still there"
}

test_c_extend_and_shorten() {
  lsbx "$ALICE" ext key-ext "{\"shutdownTime\":\"$(in_s 8)\"}" >/dev/null || fail "create ext"
  wait_for 30 phase_is team-a ext Running || fail "ext not Running"
  lifecycle_patch "$ALICE" ext "{\"shutdownTime\":\"$(in_s 3600)\"}" >/dev/null || fail "extend refused"
  sleep 12
  expect_eq "$(phase team-a ext)" Running "extended past its first shutdownTime"
  expect_match "$(kubectl get sbx -n team-a ext -o wide)" "$(date -u -d '+1 hour' +%Y-%m-%d)" "shutdown printer column"
  lifecycle_patch "$ALICE" ext "{\"shutdownTime\":\"$(in_s -60)\"}" >/dev/null || fail "shorten into the past refused"
  wait_for 20 phase_is team-a ext Expired || fail "a time in the past did not expire it: $(phase team-a ext)"
}

test_d_suspend_two_bound_then_resume() {
  lsbx "$ALICE" sus-1 key-sus >/dev/null || fail "create sus-1"
  lsbx "$ALICE" sus-2 key-sus >/dev/null || fail "create sus-2"
  wait_for 30 phase_is team-a sus-1 Running || fail "sus-1 not Running"
  wait_for 30 phase_is team-a sus-2 Running || fail "sus-2 not Running"
  local pod mounts uid
  pod=$(pod_of team-a sus-1)
  expect_eq "$(pod_of team-a sus-2)" "$pod" "one pod for the scope"
  mounts=$(kubectl get pod -n team-a "$pod" -o jsonpath='{range .spec.containers[0].volumeMounts[*]}{.mountPath}={.subPath} {end}')
  uid=$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.uid}')
  lifecycle_patch "$ALICE" sus-1 '{"suspend":true}' >/dev/null || fail "suspend sus-1"
  wait_for 20 phase_is team-a sus-1 Suspended || fail "sus-1 not Suspended"
  expect_eq "$(ready_reason team-a sus-1)" Suspended "sus-1 Ready reason"
  sleep 3
  pod_exists team-a "$pod" || fail "the pod went while sus-2 still holds it"
  expect_eq "$(phase team-a sus-2)" Running "sus-2 unaffected"
  lifecycle_patch "$ALICE" sus-2 '{"suspend":true}' >/dev/null || fail "suspend sus-2"
  wait_for 20 phase_is team-a sus-2 Suspended || fail "sus-2 not Suspended"
  wait_for 30 pod_gone team-a "$pod" || fail "the pod stays with both Sandboxes suspended"
  has_event team-a sus-2 SandboxSuspended || fail "no SandboxSuspended event"
  # resume: the same name, spec and mounts, one pod
  lifecycle_patch "$ALICE" sus-1 '{"suspend":false}' >/dev/null || fail "resume sus-1 refused"
  wait_for 30 phase_is team-a sus-1 Running || fail "sus-1 not Running after resume: $(phase team-a sus-1) $(bound_message team-a sus-1)"
  expect_eq "$(pod_of team-a sus-1)" "$pod" "resumed under the same name"
  expect_ne "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.uid}')" "$uid" "a new pod"
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{range .spec.containers[0].volumeMounts[*]}{.mountPath}={.subPath} {end}')" \
    "$mounts" "the same mounts"
  expect_eq "$(pods_of_key team-a sus-1)" 1 "one pod after the resume"
  wait_for 10 has_event team-a sus-1 SandboxResumed || fail "no SandboxResumed event"
  expect_eq "$(phase team-a sus-2)" Suspended "sus-2 stays suspended"
  lifecycle_patch "$ALICE" sus-2 '{"suspend":false}' >/dev/null || fail "resume sus-2 refused"
  wait_for 30 phase_is team-a sus-2 Running || fail "sus-2 not Running after resume"
  expect_eq "$(pod_of team-a sus-2)" "$pod" "sus-2 on the same pod"
  expect_eq "$(pods_of_key team-a sus-1)" 1 "still one pod"
}

# A resume is authorized anew: refused at admission to an identity that lost
# `use`; and a record of an earlier run is refused by the controller when the
# webhook is not there to ask.
test_e_resume_authorized_anew() {
  lsbx "$ALICE" rz key-rz '{"suspend":true}' >/dev/null || fail "create rz suspended"
  wait_for 20 phase_is team-a rz Suspended || fail "rz not Suspended: $(phase team-a rz)"
  lifecycle_patch "$ALICE" rz '{"suspend":false}' >/dev/null || fail "alice's first resume refused"
  wait_for 30 phase_is team-a rz Running || fail "rz not Running: $(bound_message team-a rz)"
  lifecycle_patch "$ALICE" rz '{"suspend":true}' >/dev/null || fail "suspend rz"
  wait_for 20 phase_is team-a rz Suspended || fail "rz not Suspended again"
  local out
  out=$(lifecycle_patch "$BOB" rz '{"suspend":false}') && fail "bob resumed alice's sandbox"
  expect_match "$out" 'may not use workspace owner "alice"' "bob's resume names the owner"
  kubectl delete rolebinding -n team-a workspace-alice >/dev/null
  # The webhook caches an allowed SubjectAccessReview answer for 10 s
  # (kube/accesscache.h): the revocation holds within that, which a dry run
  # (the webhooks run on it, sideEffects None; nothing is stored) shows
  # without resuming rz.
  wait_for 15 resume_refused_dry_run "$ALICE" rz || fail "alice's resume still allowed 15 s after her grant went"
  out=$(lifecycle_patch "$ALICE" rz '{"suspend":false}') && fail "alice resumed without use on alice"
  expect_match "$out" '"use" on workspaces.sandbox.dev "alice"' "the refusal names the permission"
  expect_eq "$(phase team-a rz)" Suspended "still suspended"
  # without the webhook, the stored record is of an earlier run
  uninstall_admission
  sleep 1
  lifecycle_patch "$ALICE" rz '{"suspend":false}' >/dev/null || fail "patch without the webhook"
  wait_for 20 sh -c "[ \"\$(kubectl get sbx -n team-a rz -o jsonpath='{.status.conditions[?(@.type==\"Bound\")].reason}')\" = OwnerNotAuthorized ]" ||
    fail "a resume without a new record: $(bound_reason team-a rz)"
  expect_match "$(bound_message team-a rz)" "earlier run" "the controller names the earlier run"
  sleep 2
  expect_eq "$(pods_of_key team-a rz)" 0 "no pod for a resume it cannot verify"
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not reinstalled"
  kubectl create rolebinding -n team-a workspace-alice --role=workspace-alice --user=alice >/dev/null
}

# The stored outcome: within the key's lifetime a new Sandbox of an expired
# generation gets Expired and no pod, also once the expired Sandboxes are
# deleted and the controller restarted.
test_f_late_retry_after_expiry() {
  lsbx "$ALICE" late-1 key-late "{\"shutdownTime\":\"$(in_s 5)\",\"shutdownPolicy\":\"Delete\"}" >/dev/null || fail "create late-1"
  wait_for 30 phase_is team-a late-1 Running || fail "late-1 not Running"
  local pod
  pod=$(pod_of team-a late-1)
  wait_for 40 sbx_gone team-a late-1 || fail "late-1 not deleted"
  wait_for 30 pod_gone team-a "$pod" || fail "late-1's pod still there"
  lsbx "$ALICE" late-2 key-late >/dev/null || fail "create late-2"
  wait_for 20 phase_is team-a late-2 Expired || fail "late-2: $(phase team-a late-2) $(bound_message team-a late-2)"
  expect_match "$(bound_message team-a late-2)" "late-1" "late-2 names the Sandbox whose expiry it shares"
  sleep 2
  pod_gone team-a "$pod" || fail "a pod for a late retry of an expired key"
  main_restart
  lsbx "$ALICE" late-3 key-late >/dev/null || fail "create late-3 after the restart"
  wait_for 30 phase_is team-a late-3 Expired || fail "late-3 after a restart: $(phase team-a late-3)"
  expect_eq "$(phase team-a late-2)" Expired "late-2 after the restart"
  pod_gone team-a "$pod" || fail "a pod after the restart"
}

test_g_controller_down_across_shutdown_time() {
  lsbx "$ALICE" down-1 key-down "{\"shutdownTime\":\"$(in_s 8)\"}" >/dev/null || fail "create down-1"
  wait_for 30 phase_is team-a down-1 Running || fail "down-1 not Running"
  local pod
  pod=$(pod_of team-a down-1)
  controller_stop "$MAIN_CTL"
  sleep 10
  # back after down-1's shutdownTime (the webhook is down with it, so a new
  # Sandbox of the key can only come now, racing the expiry)
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  lsbx "$ALICE" down-2 key-down >/dev/null || fail "create down-2"
  wait_for 30 phase_is team-a down-1 Expired || fail "down-1 not Expired after the restart"
  wait_for 30 phase_is team-a down-2 Expired || fail "down-2: $(phase team-a down-2) $(bound_message team-a down-2)"
  wait_for 30 pod_gone team-a "$pod" || fail "the pod of an expired generation still there"
}

test_h_racing_replicas_resume() {
  controller_start race-b
  local b=$CTL_PID
  lsbx "$ALICE" race key-race >/dev/null || fail "create race"
  wait_for 30 phase_is team-a race Running || fail "race not Running"
  local pod
  pod=$(pod_of team-a race)
  local i
  for i in 1 2 3; do
    lifecycle_patch "$ALICE" race '{"suspend":true}' >/dev/null
    wait_for 20 pod_gone team-a "$pod" || fail "round $i: not released"
    lifecycle_patch "$ALICE" race '{"suspend":false}' >/dev/null
    wait_for 30 phase_is team-a race Running || fail "round $i: not resumed: $(bound_message team-a race)"
    expect_eq "$(pods_of_key team-a race)" 1 "round $i: one pod with two replicas racing"
  done
  controller_stop "$b"
}

# crash_lifecycle POINT: SIGKILL at POINT while a Delete-policy Sandbox
# expires; after a restart: no pod, the Sandbox gone, and a late retry gets
# the stored outcome.
crash_lifecycle() {
  local point=$1 key=crash-$1
  controller_stop "$MAIN_CTL"
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" main_start
  local pid=$MAIN_CTL
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "$point: admission not back"
  # 12 s: on a loaded host the pod takes seconds to Run, and a Sandbox that
  # expired before it was seen Running would leave this test nothing to crash.
  lsbx "$ALICE" "c-$point" "$key" "{\"shutdownTime\":\"$(in_s 12)\",\"shutdownPolicy\":\"Delete\"}" >/dev/null || fail "$point: create"
  wait_for 30 phase_is team-a "c-$point" Running || fail "$point: not Running"
  local pod
  pod=$(pod_of team-a "c-$point")
  wait_dead "$pid" 40 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: died without reaching the point"
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "$point: admission not back"
  wait_for 40 sbx_gone team-a "c-$point" || fail "$point: the Sandbox not deleted after the restart"
  wait_for 30 pod_gone team-a "$pod" || fail "$point: the pod stays"
  lsbx "$ALICE" "r-$point" "$key" >/dev/null || fail "$point: create the retry"
  wait_for 30 phase_is team-a "r-$point" Expired || fail "$point: the retry: $(phase team-a "r-$point")"
  pod_gone team-a "$pod" || fail "$point: a pod for the retry"
}
test_i_crash_after_claim_record() { crash_lifecycle after-claim-record; }
test_i_crash_before_pod_delete() { crash_lifecycle before-pod-delete; }
test_i_crash_after_pod_delete() { crash_lifecycle after-pod-delete; }
test_i_crash_before_sandbox_delete() { crash_lifecycle before-sandbox-delete; }

test_j_only_lifecycle_changes() {
  lsbx "$ALICE" imm key-imm >/dev/null || fail "create imm"
  local out
  out=$(as "$ALICE" patch sbx -n team-a imm --type merge -p '{"spec":{"image":"evil:1"}}' 2>&1) && fail "image changed"
  expect_match "$out" "immutable" "image change refused"
  out=$(as "$ALICE" patch sbx -n team-a imm --type merge -p '{"spec":{"idempotencyKey":"other"}}' 2>&1) && fail "key changed"
  out=$(as "$ALICE" patch sbx -n team-a imm --type merge -p '{"spec":{"args":["x"]}}' 2>&1) && fail "args added"
  out=$(lifecycle_patch "$ALICE" imm '{"shutdownPolicy":"Sometimes"}') && fail "an unknown shutdownPolicy accepted"
  expect_match "$out" "shutdownPolicy" "the policy refusal names the field"
  out=$(lifecycle_patch "$ALICE" imm '{"shutdownTime":"tomorrow"}') && fail "a shutdownTime that is not a time accepted"
  expect_match "$out" "shutdownTime" "the time refusal names the field"
  lifecycle_patch "$ALICE" imm "{\"shutdownTime\":\"$(in_s 3600)\",\"shutdownPolicy\":\"Retain\"}" >/dev/null ||
    fail "a lifecycle change refused"
  wait_for 30 phase_is team-a imm Running || fail "imm not Running"
  # the fingerprint and digest ignore lifecycle: a Sandbox of the same spec and key shares the pod
  lsbx "$ALICE" imm-2 key-imm '{"suspend":false}' >/dev/null || fail "create imm-2"
  wait_for 30 phase_is team-a imm-2 Running || fail "imm-2 not Running"
  expect_eq "$(pod_of team-a imm-2)" "$(pod_of team-a imm)" "lifecycle is not part of the scope"
  expect_eq "$(jp team-a sandbox imm-2 '{.status.specFingerprint}')" "$(jp team-a sandbox imm '{.status.specFingerprint}')" \
    "lifecycle is not part of the fingerprint"
}

# A Sandbox the previous version stored and bound keeps its digest and pod.
# A late retry racing the release on a replica whose claim-record cache lags
# behind its pod cache (SBX_FAULT_DELAYS holds each record event 15 s): when
# the expired generation's pod has left the pod cache, its record is not in
# the record cache yet. The retry still gets the stored outcome, never a pod.
test_l_late_retry_with_a_lagging_record_cache() {
  controller_stop "$MAIN_CTL"
  SBX_FAULT_DELAYS=watch:sandboxclaims=15000 main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  lsbx "$ALICE" lag-1 key-lag "{\"shutdownTime\":\"$(in_s 6)\"}" >/dev/null || fail "create lag-1"
  wait_for 30 phase_is team-a lag-1 Running || fail "lag-1 not Running"
  local pod
  pod=$(pod_of team-a lag-1)
  wait_for 30 pod_gone team-a "$pod" || fail "lag-1's pod still there"
  lsbx "$ALICE" lag-2 key-lag >/dev/null || fail "create lag-2"
  wait_for 20 phase_is team-a lag-2 Expired || fail "lag-2: $(phase team-a lag-2) $(bound_message team-a lag-2)"
  sleep 2
  expect_eq "$(pods_of_key team-a lag-2)" 0 "pods of the expired key"
  main_restart
}

# One release per expiry, even when the pod cache lags behind the Sandbox
# cache (SBX_FAULT_DELAYS holds each pod event 2 s): the reconcile that our
# own status write triggers must not write the claim record and DELETE the pod
# a second time (before: every expiry sent two DELETEs and two record POSTs,
# the second of each answered 409 Conflict; 6.85 requests per expiry in
# hack/bench-expiry.sh).
test_m_one_release_per_expiry() {
  controller_stop "$MAIN_CTL"
  local port; port=$(free_port)
  SBX_FAULT_DELAYS=watch:pods=2000 main_start --metrics-bind-address "127.0.0.1:$port"
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  # 25 s: the counters are read once it runs, before it expires, even on a
  # loaded host where Running takes seconds under the held pod watch.
  lsbx "$ALICE" once-1 key-once "{\"shutdownTime\":\"$(in_s 25)\"}" >/dev/null || fail "create once-1"
  wait_for 40 phase_is team-a once-1 Running || fail "once-1 not Running: $(phase team-a once-1)"
  local pod d0 c0
  pod=$(pod_of team-a once-1)
  d0=$(metric_sum "$port" rest_client_requests_total 'method="DELETE"'); c0=$(metric_sum "$port" rest_client_requests_total 'code="409"')
  wait_for 30 phase_is team-a once-1 Expired || fail "once-1 not Expired"
  wait_for 30 pod_gone team-a "$pod" || fail "once-1's pod still there"
  sleep 3
  expect_eq "$(( $(metric_sum "$port" rest_client_requests_total 'method="DELETE"') - d0 ))" 1 "DELETEs for one expiry"
  expect_eq "$(( $(metric_sum "$port" rest_client_requests_total 'code="409"') - c0 ))" 0 "requests answered 409 Conflict for one expiry"
  main_restart
}

# sandbox_resume_duration_seconds times each resume from when the controller
# saw it. A resume suspended again before its pod was Ready (the nodes
# cordoned: its pod is never scheduled; the owner's folders were prepared
# before) must not start the clock of the next
# one: that one took a second or two, not the minutes since the first.
resume_seconds() { metric_sum "$1" sandbox_resume_duration_seconds_sum; }
resume_count() { metric_sum "$1" sandbox_resume_duration_seconds_count; }
resumes_above() { [ "$(resume_count "$1")" -gt "$2" ]; }
has_pod_name() { [ -n "$(pod_of "$1" "$2")" ]; }
test_n_each_resume_timed_from_its_own_start() {
  local port; port=$(free_port)
  main_restart --metrics-bind-address "127.0.0.1:$port"
  lsbx "$ALICE" rt-1 key-rt >/dev/null || fail "create rt-1"
  wait_for 30 phase_is team-a rt-1 Running || fail "rt-1 not Running: $(phase team-a rt-1)"
  lifecycle_patch "$ALICE" rt-1 '{"suspend":true}' >/dev/null || fail "suspend rt-1"
  wait_for 20 phase_is team-a rt-1 Suspended || fail "rt-1 not Suspended: $(phase team-a rt-1)"
  kubectl cordon $(kubectl get nodes -o name) >/dev/null || fail "cordon the nodes"
  lifecycle_patch "$ALICE" rt-1 '{"suspend":false}' >/dev/null || fail "resume rt-1"
  local pod
  wait_for 30 has_pod_name team-a rt-1 || fail "rt-1 has no pod name"
  pod=$(pod_of team-a rt-1)
  wait_for 30 pod_exists team-a "$pod" || fail "rt-1's pod not made: $(phase team-a rt-1) $(bound_message team-a rt-1)"
  lifecycle_patch "$ALICE" rt-1 '{"suspend":true}' >/dev/null || fail "suspend rt-1 before its pod was Ready"
  wait_for 20 phase_is team-a rt-1 Suspended || fail "rt-1 not Suspended again"
  wait_for 30 pod_gone team-a "$pod" || fail "rt-1's unscheduled pod stays"
  kubectl uncordon $(kubectl get nodes -o name) >/dev/null
  sleep 8
  local n0 s0
  n0=$(resume_count "$port"); s0=$(resume_seconds "$port")
  lifecycle_patch "$ALICE" rt-1 '{"suspend":false}' >/dev/null || fail "resume rt-1 again"
  wait_for 30 phase_is team-a rt-1 Running || fail "rt-1 not Running: $(phase team-a rt-1) $(bound_message team-a rt-1)"
  wait_for 10 resumes_above "$port" "$n0" || fail "no resume timed"
  expect_eq "$(($(resume_count "$port") - n0))" 1 "resumes timed"
  local took=$(($(resume_seconds "$port") - s0))
  [ "$took" -lt 5 ] || fail "the second resume was timed $took s, from the first one's start (8 s and more before it)"
  main_restart
}

# pod_owned_by NS UID: the sandbox pods (those labelled with a scope digest,
# not the workspace preparation's) whose owner references name the object UID.
pod_owned_by() {
  kubectl get pods -n "$1" -l sandbox.dev/scope-digest -o json 2>/dev/null | python3 -c '
import json, sys
uid = sys.argv[1]
print(" ".join(p["metadata"]["name"] for p in json.load(sys.stdin)["items"]
               if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences", []))))' "$2"
}
sbx_uid() { jp team-a sandbox "$1" '{.metadata.uid}'; }

# crash_at_pod_create KIND NAME KEY [LIFECYCLE-JSON] [FLAGS...]: a controller
# (kept as CRASH_CTL, its log KIND.log) that dies right after it created a
# pod, before the Sandbox's status names it; then NAME is created (by alice,
# key KEY) and CRASH_POD is the pod it holds.
crash_at_pod_create() {
  local kind=$1 name=$2 key=$3 lc=${4:-}
  shift 4
  rm -f "$E2E_DIR/once-$kind"
  SBX_FAULT_POINTS=after-pod-create SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$kind" controller_start "$kind" "$@"
  CRASH_CTL=$CTL_PID
}
crash_pod_made() { # crash_pod_made KIND NAME: the crash came and left NAME a pod
  wait_dead "$CRASH_CTL" 40 || { fail "$1: the controller never reached after-pod-create"; controller_stop "$CRASH_CTL"; }
  [ -f "$E2E_DIR/once-$1" ] || fail "$1: the controller died without reaching after-pod-create"
  CRASH_POD=$(pod_owned_by team-a "$(sbx_uid "$2")")
  [ -n "$CRASH_POD" ] || fail "$1: no pod was made before the crash"
  [[ "$CRASH_POD" != *" "* ]] || fail "$1: more than one pod: $CRASH_POD"
  expect_eq "$(pod_of team-a "$2")" "" "$1: the status names no pod yet"
}

# The controller dies right after creating the pod, before the status names
# it, and the Sandbox's shutdownTime passes while it is down: after the
# restart the Sandbox is Expired, its pod released, and a retry of the key
# gets the stored outcome.
test_o_crash_after_pod_create_then_expiry() {
  controller_stop "$MAIN_CTL"
  crash_at_pod_create apc-e "" "" "" --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" \
    --webhook-cert-dir "$WEBHOOK_CERT_DIR" --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  local until=$(($(date +%s) + 12))
  lsbx "$ALICE" apc-e key-apc-e "{\"shutdownTime\":\"$(date -u -d "@$until" +%Y-%m-%dT%H:%M:%SZ)\"}" >/dev/null || fail "create apc-e"
  crash_pod_made apc-e apc-e
  local wait=$((until + 2 - $(date +%s)))
  [ "$wait" -gt 0 ] && sleep "$wait"
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back after the restart"
  wait_for 30 phase_is team-a apc-e Expired || fail "apc-e not Expired after the restart: $(phase team-a apc-e)"
  [ -n "$CRASH_POD" ] && { wait_for 30 pod_gone team-a "$CRASH_POD" || fail "the pod of the expired apc-e still runs: $CRASH_POD"; }
  lsbx "$ALICE" apc-e2 key-apc-e >/dev/null || fail "create the retry"
  wait_for 30 phase_is team-a apc-e2 Expired || fail "the retry of the expired key: $(phase team-a apc-e2)"
}

# The same crash, with two replicas under leader election: the Sandbox is
# suspended before the standby takes the Lease; the standby releases the pod
# the Sandbox holds though its status never named it.
test_p_crash_after_pod_create_then_suspend() {
  controller_stop "$MAIN_CTL"
  grant_controller_leases sandbox-system
  crash_at_pod_create apc-s "" "" "" --leader-elect --leader-election-namespace sandbox-system
  wait_for 60 grep -q '"became leader"' "$E2E_DIR/apc-s.log" || fail "the first replica never led"
  main_start --leader-elect --leader-election-namespace sandbox-system # the standby: it serves the webhook, reconciles once the Lease is free
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  lsbx "$ALICE" apc-s key-apc-s >/dev/null || fail "create apc-s"
  crash_pod_made apc-s apc-s
  lifecycle_patch "$ALICE" apc-s '{"suspend":true}' >/dev/null || fail "suspend apc-s"
  expect_eq "$(pod_of team-a apc-s)" "" "suspended before the standby led (no pod named)"
  wait_for 60 phase_is team-a apc-s Suspended || fail "apc-s not Suspended: $(phase team-a apc-s)"
  [ -n "$CRASH_POD" ] && { wait_for 30 pod_gone team-a "$CRASH_POD" || fail "the pod of the suspended apc-s still runs: $CRASH_POD"; }
  main_restart # without leader election, as the other tests run
}

# A suspended generation whose Sandboxes then expire is expired: a new
# Sandbox of the scope and key gets the stored outcome, with the Retain
# policy (the record says so) and with Delete (after the Sandbox is gone).
suspended_then_expired() {
  local policy=$1 name=sx-${1,,} key=key-sx-${1,,} pod
  lsbx "$ALICE" "$name" "$key" "{\"shutdownTime\":\"$(in_s 20)\",\"shutdownPolicy\":\"$policy\"}" >/dev/null || fail "$policy: create"
  wait_for 30 phase_is team-a "$name" Running || fail "$policy: not Running"
  pod=$(pod_of team-a "$name")
  lifecycle_patch "$ALICE" "$name" '{"suspend":true}' >/dev/null || fail "$policy: suspend"
  wait_for 30 pod_gone team-a "$pod" || fail "$policy: the pod stays suspended"
  if [ "$policy" = Delete ]; then
    wait_for 40 sbx_gone team-a "$name" || fail "$policy: not deleted at its shutdownTime"
  else
    wait_for 40 phase_is team-a "$name" Expired || fail "$policy: not Expired at its shutdownTime"
  fi
  lsbx "$ALICE" "$name-2" "$key" >/dev/null || fail "$policy: create the retry"
  wait_for 30 phase_is team-a "$name-2" Expired ||
    fail "$policy: a new Sandbox of the expired generation: $(phase team-a "$name-2") $(bound_message team-a "$name-2")"
  sleep 2
  pod_gone team-a "$pod" || fail "$policy: a pod for the intent of an expired generation"
}
test_q_suspended_generation_expires_retain() { suspended_then_expired Retain; }
test_q_suspended_generation_expires_delete() { suspended_then_expired Delete; }

# After a suspend and a resume, the pod deleted out of band is reported
# (Failed, PodMissing), not silently re-created: the record of the earlier
# release is not this pod's.
test_r_pod_deleted_after_a_resume() {
  lsbx "$ALICE" pm key-pm >/dev/null || fail "create pm"
  wait_for 30 phase_is team-a pm Running || fail "pm not Running"
  local pod
  pod=$(pod_of team-a pm)
  lifecycle_patch "$ALICE" pm '{"suspend":true}' >/dev/null || fail "suspend pm"
  wait_for 30 pod_gone team-a "$pod" || fail "pm's pod not released"
  lifecycle_patch "$ALICE" pm '{"suspend":false}' >/dev/null || fail "resume pm"
  wait_for 30 phase_is team-a pm Running || fail "pm not resumed"
  delete_pod team-a "$pod" 30 || fail "the resumed pod not deleted"
  wait_for 30 phase_is team-a pm Failed || fail "pm after its pod was deleted: $(phase team-a pm) $(ready_reason team-a pm)"
  expect_eq "$(ready_reason team-a pm)" PodMissing "pm's Ready reason"
  sleep 3
  pod_gone team-a "$pod" || fail "the pod deleted out of band was re-created"
}

# A Sandbox that joins a suspended generation makes its pod for its own
# request: when that comes late (here: waiting for its owner's only quota
# slot) after its requester lost `use` of the owner, no pod is made
# (Pending, OwnerNotAuthorized), as for a new generation.
test_s_join_of_a_suspended_generation_asks_again() {
  grant_owner team-a jw bob
  kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxQuota
metadata: {name: jw, namespace: team-a}
spec: {owner: jw, maxActive: 1, mode: Queue}
YAML
  lsbx "$BOB" jw-a key-jw "" jw >/dev/null || fail "create jw-a"
  wait_for 30 phase_is team-a jw-a Running || fail "jw-a not Running"
  local pod
  pod=$(pod_of team-a jw-a)
  lifecycle_patch "$BOB" jw-a '{"suspend":true}' >/dev/null || fail "suspend jw-a"
  wait_for 30 pod_gone team-a "$pod" || fail "jw-a's pod not released"
  lsbx "$BOB" jw-z key-jw-z "" jw >/dev/null || fail "create jw-z"
  wait_for 30 phase_is team-a jw-z Running || fail "jw-z (the owner's one slot) not Running"
  lsbx "$BOB" jw-c key-jw "" jw >/dev/null || fail "create jw-c (joins jw-a's generation)"
  wait_for 30 has_reason team-a jw-c QuotaWaiting || fail "jw-c not waiting for the slot: $(bound_reason team-a jw-c)"
  kubectl delete rolebinding -n team-a workspace-jw >/dev/null || fail "revoke bob"
  sleep 32 # past the record's 15 s and the kept answers (15 s)
  kubectl delete sbx -n team-a jw-z --wait=false >/dev/null
  wait_for 40 has_reason team-a jw-c OwnerNotAuthorized ||
    fail "jw-c after its requester lost the owner: $(phase team-a jw-c) $(bound_reason team-a jw-c)"
  sleep 2
  pod_gone team-a "$pod" || fail "a pod of owner jw made for a requester who lost it"
  kubectl delete sandboxquota -n team-a jw >/dev/null
  kubectl delete sbx -n team-a jw-a jw-c --wait=false >/dev/null
}

# The holders of a pod are its Sandbox owner references, and a reference
# counts only when that Sandbox is of the pod's scope: owner references
# written by someone else (the pod policy refuses them to everyone but the
# controller; here the controller's own identity, as a stolen token or a
# cluster without the policies would) never keep a pod running past its
# Sandboxes' suspend, nor make a retry of the key Expired.
test_t_holders_of_another_scope_do_not_count() {
  local ctl=$E2E_DIR/controller.kubeconfig pod pod2 ref
  lsbx "$ALICE" fh-other key-fh-other >/dev/null || fail "create fh-other"
  lsbx "$ALICE" fh-old key-fh-old "{\"shutdownTime\":\"$(in_s 1)\",\"shutdownPolicy\":\"Retain\"}" >/dev/null ||
    fail "create fh-old"
  lsbx "$ALICE" fh-a key-fh-a >/dev/null || fail "create fh-a"
  lsbx "$ALICE" fh-b key-fh-b >/dev/null || fail "create fh-b"
  wait_for 30 phase_is team-a fh-other Running || fail "fh-other not Running"
  wait_for 30 phase_is team-a fh-old Expired || fail "fh-old not Expired"
  wait_for 30 phase_is team-a fh-a Running || fail "fh-a not Running"
  wait_for 30 phase_is team-a fh-b Running || fail "fh-b not Running"
  # fh-a's pod also names fh-other (active, another key) as an owner.
  pod=$(pod_of team-a fh-a)
  ref="{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandbox\",\"name\":\"fh-other\",\"uid\":\"$(jp team-a sandbox fh-other '{.metadata.uid}')\"}"
  as "$ctl" patch pod -n team-a "$pod" --type json \
    -p "[{\"op\":\"add\",\"path\":\"/metadata/ownerReferences/-\",\"value\":$ref}]" >/dev/null ||
    fail "add fh-other to $pod's owners"
  lifecycle_patch "$ALICE" fh-a '{"suspend":true}' >/dev/null || fail "suspend fh-a"
  wait_for 30 pod_gone team-a "$pod" || fail "fh-a's pod runs after its only Sandbox was suspended (a holder of another scope counted)"
  # fh-b's pod names only fh-old (expired, another key): a retry of fh-b's
  # key is not that generation's stored outcome.
  pod2=$(pod_of team-a fh-b)
  ref="{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandbox\",\"name\":\"fh-old\",\"uid\":\"$(jp team-a sandbox fh-old '{.metadata.uid}')\"}"
  as "$ctl" patch pod -n team-a "$pod2" --type json \
    -p "[{\"op\":\"replace\",\"path\":\"/metadata/ownerReferences\",\"value\":[$ref]}]" >/dev/null ||
    fail "make fh-old $pod2's only owner"
  lsbx "$ALICE" fh-b2 key-fh-b >/dev/null || fail "create fh-b2 (a retry of fh-b's key)"
  wait_for 30 phase_is team-a fh-b2 Running ||
    fail "fh-b2 (a retry of a live key): $(phase team-a fh-b2) $(ready_reason team-a fh-b2) $(bound_message team-a fh-b2)"
  expect_eq "$(pod_of team-a fh-b2)" "$pod2" "fh-b2's pod"
  kubectl delete sbx -n team-a fh-other fh-old fh-a fh-b fh-b2 --wait=false >/dev/null
}

# A Sandbox that took its owner's only quota slot and is refused before its
# pod could be made (its requester lost the owner meanwhile) holds no slot
# and no place in the line (docs/api.md, "When the right to an owner is
# revoked"): another requester's Sandbox of that owner is bound.
test_u_refused_requester_holds_no_slot() {
  grant_owner team-a jq bob
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: workspace-jq-alice, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: workspace-jq}
subjects: [{kind: User, name: alice}]
---
apiVersion: sandbox.dev/v1alpha1
kind: SandboxQuota
metadata: {name: jq, namespace: team-a}
spec: {owner: jq, maxActive: 1, mode: Queue}
YAML
  # jq's pods are refused for now: jq-a takes the slot and waits.
  refuse_pod_creates team-a jq-paused \
    "!('sandbox.dev/workspace-owner' in (has(object.metadata.annotations) ? object.metadata.annotations : {})) || object.metadata.annotations['sandbox.dev/workspace-owner'] != 'jq'" \
    "jq's pods are paused"
  sleep 3 # the API server enforces the policy within a few seconds
  lsbx "$BOB" jq-a key-jq-a "" jq >/dev/null || fail "create jq-a"
  wait_for 30 eval '[ "$(jp team-a sandboxquota jq "{.status.active}")" = 1 ]' ||
    fail "jq-a took no slot: $(jp team-a sandboxquota jq '{.status}') $(bound_reason team-a jq-a)"
  kubectl delete rolebinding -n team-a workspace-jq >/dev/null || fail "revoke bob"
  sleep 32 # past the record's 15 s and the kept answers (15 s)
  wait_for 40 has_reason team-a jq-a OwnerNotAuthorized ||
    fail "jq-a after its requester lost the owner: $(phase team-a jq-a) $(bound_reason team-a jq-a)"
  allow_pod_creates jq-paused
  lsbx "$ALICE" jq-b key-jq-b "" jq >/dev/null || fail "create jq-b"
  wait_for 30 phase_is team-a jq-b Running ||
    fail "jq-b behind the slot of a refused Sandbox: $(phase team-a jq-b) $(bound_reason team-a jq-b) quota $(jp team-a sandboxquota jq '{.status}')"
  expect_eq "$(pod_of team-a jq-a)" "" "jq-a's pod"
  kubectl delete sandboxquota -n team-a jq >/dev/null
  kubectl delete rolebinding -n team-a workspace-jq-alice >/dev/null
  kubectl delete sbx -n team-a jq-a jq-b --wait=false >/dev/null
}

test_k_upgrade_keeps_digest_and_pod() {
  local src=$E2E_DIR/previous
  mkdir -p "$src"
  git -C "$E2E_ROOT" archive "$PREVIOUS" | tar -x -C "$src" || { fail "cannot read version $PREVIOUS from git"; return; }
  (cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$src/build" -j2 --target sandbox-controller >/dev/null) || { fail "cannot build $PREVIOUS"; return; }
  new_namespace legacy
  controller_stop "$MAIN_CTL"
  uninstall_admission
  kubectl delete sbx -n team-a --all --wait=false >/dev/null
  kubectl apply -f "$src/crd/sandbox.dev_sandboxes.yaml" >/dev/null
  SBX_CONTROLLER_BIN=$src/build/sandbox-controller controller_start old --owner-authorization namespace
  local old=$CTL_PID
  sandbox legacy stored $IMG key-legacy alice >/dev/null || fail "create with the previous version"
  wait_for 30 bound legacy stored || fail "the previous version did not bind it"
  local pod digest fp uid
  pod=$(pod_of legacy stored); digest=$(jp legacy sandbox stored '{.status.scopeDigest}')
  fp=$(jp legacy sandbox stored '{.status.specFingerprint}')
  uid=$(kubectl get pod -n legacy "$pod" -o jsonpath='{.metadata.uid}')
  controller_stop "$old"
  kubectl apply -f "$E2E_ROOT/crd/sandbox.dev_sandboxes.yaml" >/dev/null
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not reinstalled"
  sleep 5
  expect_eq "$(jp legacy sandbox stored '{.status.scopeDigest}')" "$digest" "digest after the upgrade"
  expect_eq "$(jp legacy sandbox stored '{.status.specFingerprint}')" "$fp" "fingerprint after the upgrade"
  expect_eq "$(kubectl get pod -n legacy "$pod" -o jsonpath='{.metadata.uid}')" "$uid" "the same pod after the upgrade"
  expect_eq "$(jp legacy sandbox stored '{.status.phase}')" Running "still Running"
  expect_eq "$(kubectl get sbx -n legacy stored -o jsonpath='{.spec.lifecycle}')" "" "no lifecycle defaulted onto it"
}

setup
e2e_main
