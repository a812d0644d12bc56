#!/usr/bin/env bash
# End-to-end: the admission trust boundary (issue 15 findings 1, 3 and 4;
# contract sections 2a and 6) on a real control plane, with the real webhook
# port and real identities. The local API server presents a client
# certificate to webhooks (hack/cluster.sh: AdmissionConfiguration), so one
# controller ("gate") authenticates it; a second one ("open") serves its
# webhook without --webhook-client-ca-file, as on a cluster whose API server
# cannot present a certificate: whoever reaches that port can post reviews.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1
REVIEW="python3 $(dirname "$0")/review.py"

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace team-a
  webhook_certs
  GATE_PORT=$(free_port)
  OPEN_PORT=$(free_port)
  OPEN_METRICS=$(free_port)
  controller_start gate --webhook-bind-address "127.0.0.1:$GATE_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  GATE_PID=$CTL_PID
  controller_start open --webhook-bind-address "127.0.0.1:$OPEN_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --metrics-bind-address "127.0.0.1:$OPEN_METRICS"
  OPEN_PID=$CTL_PID
  ALICE=$(user_kubeconfig alice)
  BOB=$(user_kubeconfig bob)
  grant_editors team-a alice bob
  grant_owner team-a alice alice
}

pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
bound_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }
# pods_of_owner NS OWNER: the sandbox pods of NS that mount OWNER's folders
# (not the pods that prepared those folders: prep_owners_of).
pods_of_owner() {
  kubectl get pods -n "$1" -o jsonpath='{range .items[*]}{.metadata.labels.sandbox\.dev/workspace-init}|{.metadata.annotations.sandbox\.dev/workspace-owner}{"\n"}{end}' |
    grep -c "^|$2\$"
}
# prep_owners_of NS OWNER: the Sandboxes (or pools) OWNER's folder preparation
# pods in NS were made for, one per line.
prep_owners_of() {
  kubectl get pods -n "$1" -l sandbox.dev/workspace-init \
    -o jsonpath="{range .items[?(@.metadata.annotations.sandbox\.dev/workspace-owner==\"$2\")]}{.metadata.ownerReferences[*].name}{\"\n\"}{end}"
}
as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

# steal_with ANNOTATIONS-JSON NAME: bob creates NAME for owner alice carrying
# the given annotations (what a minted review handed back).
steal_with() {
  python3 - "$1" "$2" "$IMG" >"$E2E_DIR/$2.json" <<'PY'
import json, sys
ann, name, img = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
print(json.dumps({"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                  "metadata": {"name": name, "namespace": "team-a", "annotations": ann},
                  "spec": {"image": img, "workspaceOwner": "alice"}}))
PY
  as "$BOB" create -f "$E2E_DIR/$2.json" >/dev/null
}

# The API server's webhook client certificate is the only way into the gate
# controller's webhook: no certificate, or a cluster user's certificate, gets
# no answer at all; the API server's own admission calls still work.
test_1_webhook_authenticates_the_api_server() {
  install_admission "$GATE_PORT" sandbox-controller || { fail "the API server cannot reach the gate webhook"; return; }
  as "$ALICE" apply -f - >/dev/null <<YAML || fail "alice's create through the authenticated webhook"
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: alice-1, namespace: team-a}
spec: {image: $IMG, workspaceOwner: alice}
YAML
  wait_for 30 bound team-a alice-1 || fail "alice-1 not bound: $(bound_reason team-a alice-1)"
  # generateName: the webhook names the Sandbox, and its record that name
  local gen
  gen=$(as "$ALICE" create -o jsonpath='{.metadata.name}' -f - <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {generateName: job-, namespace: team-a}
spec: {image: $IMG, workspaceOwner: alice}
YAML
)
  expect_match "$gen" '^job-[bcdfghjklmnpqrstvwxz2456789]{5}$' "generated name"
  wait_for 30 bound team-a "$gen" || fail "$gen not bound: $(bound_reason team-a "$gen")"
  local out
  out=$($REVIEW mint "$GATE_PORT" team-a steal alice system:admin system:masters)
  expect_match "$out" '^refused None' "a review without a client certificate is answered: $out"
  out=$($REVIEW --cert "$E2E_DIR/pki/bob.crt" --key "$E2E_DIR/pki/bob.key" mint "$GATE_PORT" team-a steal alice system:admin system:masters)
  expect_match "$out" '^refused None' "a review with a cluster user's certificate is answered: $out"
  out=$($REVIEW --cert "$E2E_DIR/pki/apiserver-webhook-client.crt" --key "$E2E_DIR/pki/apiserver-webhook-client.key" \
    mint "$GATE_PORT" team-a probe alice alice)
  expect_match "$out" 'owner-authorization' "the API server's certificate is served"
}

# The issue's attack: a review posted straight to a port that does not
# authenticate its caller mints a record; with every admission object deleted,
# bob's Sandbox carrying that record gets no pod.
test_2_minted_record_without_the_webhook_never_mounts() {
  wait_for 30 sh -c "$REVIEW mint $OPEN_PORT team-a x alice alice | grep -q owner-authorization"
  local ann
  ann=$($REVIEW mint "$OPEN_PORT" team-a steal alice system:admin system:masters)
  expect_match "$ann" 'sandbox.dev/owner-authorization' "the open port mints a record (the premise): $ann"
  uninstall_admission
  sleep 2
  steal_with "$ann" steal || fail "bob's create with the minted record was not stored"
  wait_for 30 has_reason team-a steal OwnerNotAuthorized || fail "steal: $(bound_reason team-a steal)"
  sleep 3
  expect_eq "$(pod_of team-a steal)" "" "no pod for the minted record"
  expect_eq "$(pods_of_owner team-a alice)" 2 "pods mounting alice's workspace (alice-1's and job-'s only)"
  expect_eq "$(prep_owners_of team-a alice | grep -c '^steal')" 0 "preparations of alice's folders made for steal"
}

# Installed again, but not covering team-a (its namespaceSelector lists it
# among the excluded namespaces): the webhook is not in force there, so a minted record still mounts
# nothing; and steal, created while no webhook was in force, stays unmounted
# once it is back.
test_3_webhook_not_covering_the_namespace_never_mounts() {
  install_admission "$OPEN_PORT" sandbox-controller || { fail "admission not reinstalled"; return; }
  local w
  for w in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    kubectl patch "$w" sandbox-controller --type json -p \
      '[{"op":"add","path":"/webhooks/0/namespaceSelector/matchExpressions/0/values/-","value":"team-a"}]' >/dev/null
  done
  sleep 2
  local ann
  ann=$($REVIEW mint "$OPEN_PORT" team-a steal-2 alice system:admin system:masters)
  steal_with "$ann" steal-2 || fail "bob's create in the uncovered namespace was not stored"
  wait_for 30 has_reason team-a steal-2 OwnerNotAuthorized || fail "steal-2: $(bound_reason team-a steal-2)"
  expect_eq "$(pod_of team-a steal-2)" "" "no pod for a record made where the webhook is not in force"
  install_admission "$OPEN_PORT" sandbox-controller >/dev/null
  kubectl annotate sbx -n team-a steal note=poke --overwrite >/dev/null 2>&1
  sleep 3
  expect_eq "$(bound_reason team-a steal)" OwnerNotAuthorized "steal after the webhook is back"
  expect_eq "$(pod_of team-a steal)" "" "no pod for steal after the webhook is back"
  expect_eq "$(pods_of_owner team-a alice)" 2 "pods mounting alice's workspace"
  expect_eq "$(prep_owners_of team-a alice | grep -c '^steal')" 0 "preparations of alice's folders made for steal"
}

# Hostile bodies from anyone who reaches an unauthenticated port: eight 3 MiB
# reviews at once cost bounded memory, are refused (413/429) and leave the
# webhook serving.
test_4_hostile_bodies_cost_bounded_memory() {
  local before after codes size
  before=$(hwm_kib "$OPEN_PID")
  # 3 MB: over any Sandbox review; 1.9 MB: under the body cap, but a
  # million JSON values, each a parse allocation
  for size in 3000000 1900000; do
    codes=$($REVIEW flood "$OPEN_PORT" 8 "$size")
    after=$(hwm_kib "$OPEN_PID")
    say "  8 x $size-byte reviews: $codes; VmHWM $before -> $after KiB"
    kill -0 "$OPEN_PID" 2>/dev/null || { fail "the controller died"; return; }
    [[ "$codes" =~ 200 ]] && fail "a crafted $size-byte review was answered 200: $codes"
  done
  [ $((after - before)) -lt 65536 ] || fail "peak RSS grew by $(((after - before) / 1024)) MiB (limit 64)"
  local out
  out=$($REVIEW mint "$OPEN_PORT" team-a after-flood alice alice)
  expect_match "$out" 'owner-authorization' "the webhook serves after the flood"
}

# Refusals cost capped log lines, and a claimed identity is capped before it
# is forwarded as a SubjectAccessReview.
test_5_refusals_and_identities_are_capped() {
  local log=$E2E_DIR/open.log size0 size1 sar0 sar1 out
  size0=$(stat -c %s "$log")
  out=$($REVIEW identity "$OPEN_PORT" 5 900000 0)
  size1=$(stat -c %s "$log")
  say "  5 reviews with 900 kB usernames: $(echo "$out" | cut -c1-60 | sort | uniq -c | tr '\n' ' '); log +$((size1 - size0)) bytes"
  [ $((size1 - size0)) -lt 65536 ] || fail "the log grew by $((size1 - size0)) bytes for 5 refusals"
  [[ "$out" =~ ^200\ True ]] && fail "a 900 kB username was authorized"
  sar0=$(metric_sum "$OPEN_METRICS" rest_client_requests_total 'method="POST"')
  out=$($REVIEW identity "$OPEN_PORT" 1 8 100000)
  sar1=$(metric_sum "$OPEN_METRICS" rest_client_requests_total 'method="POST"')
  say "  a review with 100,000 groups: $out; API POSTs +$((sar1 - sar0))"
  expect_eq "$((sar1 - sar0))" 0 "requests sent for a 100,000-group identity"
  [[ "$out" =~ ^200\ False ]] || fail "a 100,000-group identity was not refused: $out"
}

setup
e2e_main
