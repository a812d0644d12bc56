#!/usr/bin/env bash
# End-to-end: isolation that lasts (issue 23), as real identities (alice,
# bob with client certificates) with the admission webhook in force:
# - a pool's author who loses "use" on its owner keeps no warm pod: scaling
#   the pool creates none, its members go, the pool says why;
# - a warm bind racing a scale-down of the pool, under a pod watch held 3 s
#   behind (SBX_FAULT_DELAYS), keeps its pod;
# - twenty quota-blocked pools of one namespace leave the refill budget to
#   another namespace's pool (its fill time printed, alone and beside them);
# - pods/proxy into a sandbox pod is gated like exec, and a Service cannot
#   select sandbox pods.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"
. "$(dirname "$0")/lib_warm.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1
SETTLE=2s

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace team-a
  new_namespace team-b
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice)
  BOB=$(user_kubeconfig bob)
  warm_rbac team-a team-b
}

# main_start [flags...]: the controller "main" serving the webhook; the
# environment (SBX_FAULT_DELAYS, ...) is the caller's.
main_start() {
  MAIN_METRICS=$(free_port)
  controller_start "main" --metrics-bind-address "127.0.0.1:$MAIN_METRICS" --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" \
    --webhook-cert-dir "$WEBHOOK_CERT_DIR" --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt" \
    --warm-pool-settle "$SETTLE" "$@"
  MAIN_CTL=$CTL_PID
}

# main_restart [flags...]: main stopped and started again, the webhook in force.
main_restart() {
  controller_stop "$MAIN_CTL"
  main_start "$@"
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back after a restart"
}

binding_is() { [ "$(binding "$1" "$2")" = "$3" ]; }

# Finding 3: a pool acting on a stale member list (its pod watch 3 s behind)
# must not delete the pod a warm bind has just taken. Bob, who may scale
# alice's pool but not use her owner, scales it to 0 the moment the bind is
# reported.
test_3_a_bind_racing_a_scale_down_keeps_its_pod() {
  pool "$ALICE" team-b race3 3 alice >/dev/null || fail "create race3"
  wait_for 60 ready_is team-b race3 3 || fail "race3 not warm: $(pool_diag team-b race3)"
  SBX_FAULT_DELAYS=watch:pods=3000 main_restart
  sleep 3 # the settle time, counted again by the new process
  wsbx "$ALICE" team-b s3 key-s3 alice || fail "create s3"
  wait_for 20 binding_is team-b s3 Warm || fail "s3 not bound warm: $(binding team-b s3) $(phase team-b s3)"
  as "$BOB" scale swp -n team-b race3 --replicas=0 >/dev/null || fail "bob's scale to 0"
  local pod uid
  pod=$(pod_of team-b s3)
  uid=$(jp team-b sandbox s3 '{.status.podUID}')
  # The held watch delivers the take's and the deletes' events 3 s apart
  # each: s3 sees its pod gone (if it went) well within 20 s.
  sleep 20
  expect_eq "$(kubectl get pod -n team-b "$pod" -o jsonpath='{.metadata.uid}{.metadata.deletionTimestamp}' 2>/dev/null)" \
    "$uid" "the bound pod $pod is there and not being deleted"
  expect_eq "$(phase team-b s3)" Running "s3's phase"
  expect_eq "$(pool_pods team-b race3)" 0 "the pool's members after the scale to 0"
  main_restart
}

setup
e2e_main
