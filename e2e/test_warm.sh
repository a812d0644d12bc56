#!/usr/bin/env bash
# End-to-end: owner-affine warm pools (contract section 8, issue 17) on a real
# control plane with the admission webhook in force: a hit binds a Ready warm
# pod and the pool refills, a miss is a cold pod at once, another owner or
# namespace never gets the pool's pods, twenty Sandboxes of one scope on two
# racing replicas get one pod, a crash at each step of a warm bind leaves one
# pod per scope and no warm pod bound twice or leaked, the pool scales and a
# template change replaces its pods, and lifecycle on a warm-bound pod
# behaves as on a cold one. The pools' settle time is shortened with
# --warm-pool-settle (90 s by default, see docs/api.md).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"
. "$(dirname "$0")/lib_warm.sh"

IMG=registry.local/agent:1.0
E2E_ADMISSION=1
SETTLE=2s

metric() { curl -s "http://127.0.0.1:$MAIN_METRICS/metrics" | grep "^$1"; }

test_a_pool_owner_is_authorized() {
  local out
  out=$(pool "$BOB" team-a bobs-alice 1 alice) && fail "bob created a pool for alice's workspace"
  expect_match "$out" '"use" on workspaces.sandbox.dev "alice"' "the refusal names the owner and permission"
  kubectl get swp -n team-a bobs-alice >/dev/null 2>&1 && fail "the refused pool was stored"
  expect_match "$(kubectl explain sandboxwarmpool.spec.template 2>&1)" "image" "kubectl explain documents the template"
}

test_b_hit_binds_and_pool_refills() {
  pool "$ALICE" team-a alice-pool 2 alice >/dev/null || fail "create alice-pool"
  wait_for 60 ready_is team-a alice-pool 2 || fail "alice-pool not warm: $(jp team-a swp alice-pool '{.status}')"
  sleep 3 # the settle time
  local before t0 t1 pod
  before=$(kubectl get pods -n team-a -o name | sort)
  t0=$(date +%s%N)
  wsbx "$ALICE" team-a hit-1 key-hit alice || fail "create hit-1"
  wait_for 30 phase_is team-a hit-1 Running || fail "hit-1 not Running: $(phase team-a hit-1)"
  t1=$(date +%s%N)
  say "  a warm hit was Running $(((t1 - t0) / 1000000)) ms after its create"
  expect_eq "$(binding team-a hit-1)" Warm "binding"
  expect_match "$(metric sandbox_warm_binds_total)" 'result="hit"\} 1' "the hit is counted"
  pod=$(pod_of team-a hit-1)
  expect_match "$pod" '^sbx-w-' "bound to a warm pod"
  expect_match "$before" "pod/$pod" "the warm pod existed before the Sandbox"
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.labels.sandbox\.dev/pool}')" "" "no longer a pool member"
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.labels.sandbox\.dev/scope-digest}')" \
    "$(jp team-a sandbox hit-1 '{.status.scopeDigest}')" "the scope's digest label"
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.ownerReferences[0].name}')" hit-1 "owned by the Sandbox"
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{range .spec.containers[0].volumeMounts[*]}{.subPath} {end}')" \
    "alice/workspace alice/claude alice/codex alice/gemini " "alice's mounts"
  wait_for 60 ready_is team-a alice-pool 2 || fail "the pool did not refill: $(pool_diag team-a alice-pool)"
  expect_eq "$(pool_pods team-a alice-pool)" 2 "members after the refill"
  # a retry of the same intent adopts the same pod
  wsbx "$ALICE" team-a hit-2 key-hit alice || fail "create hit-2"
  wait_for 30 phase_is team-a hit-2 Running || fail "hit-2 not Running"
  expect_eq "$(pod_of team-a hit-2)" "$pod" "the same intent, the same pod"
  expect_eq "$(binding team-a hit-2)" Adopted "the retry adopts"
  expect_eq "$(pods_of_scope team-a hit-1)" 1 "one pod for the scope"
}

test_c_miss_creates_cold_at_once() {
  # a template of its own: alice-pool's would be a hit
  local img=registry.local/agent:miss
  pool "$ALICE" team-a empty-pool 0 alice "$img" >/dev/null || fail "create empty-pool"
  sleep 3
  local t0 t1
  t0=$(date +%s%N)
  IMG=$img wsbx "$ALICE" team-a miss-1 key-miss alice || fail "create miss-1"
  wait_for 30 phase_is team-a miss-1 Running || fail "miss-1 not Running"
  t1=$(date +%s%N)
  say "  a miss was Running $(((t1 - t0) / 1000000)) ms after its create"
  expect_match "$(pod_of team-a miss-1)" '^sbx-[0-9a-f]{32}$' "a cold pod"
  expect_eq "$(binding team-a miss-1)" Created "binding of a miss"
  expect_match "$(metric sandbox_warm_binds_total)" 'result="miss"' "the miss is counted"
}

test_d_other_owner_or_namespace_never_gets_it() {
  wait_for 60 ready_is team-a alice-pool 2 || fail "alice-pool not warm: $(pool_diag team-a alice-pool)"
  wsbx "$BOB" team-a bob-1 key-bob bob || fail "create bob-1"
  wait_for 30 phase_is team-a bob-1 Running || fail "bob-1 not Running"
  expect_match "$(pod_of team-a bob-1)" '^sbx-[0-9a-f]{32}$' "bob's Sandbox gets a cold pod, not alice's warm one"
  expect_eq "$(kubectl get pod -n team-a "$(pod_of team-a bob-1)" -o jsonpath='{.spec.containers[0].volumeMounts[0].subPath}')" \
    bob/workspace "bob's mounts"
  wsbx "$ALICE" team-b other-ns key-ns alice || fail "create other-ns"
  wait_for 30 phase_is team-b other-ns Running || fail "other-ns not Running"
  expect_match "$(pod_of team-b other-ns)" '^sbx-[0-9a-f]{32}$' "another namespace gets a cold pod"
  expect_eq "$(pool_pods team-a alice-pool)" 2 "alice's pool untouched"
}

test_e_twenty_of_one_scope_on_two_replicas() {
  controller_start race-b --warm-pool-settle "$SETTLE"
  local b=$CTL_PID
  pool "$ALICE" team-a race-pool 5 alice >/dev/null || fail "create race-pool"
  wait_for 60 ready_is team-a race-pool 5 || fail "race-pool not warm: $(pool_diag team-a race-pool)"
  sleep 3
  local i
  rm -f "$E2E_DIR/race-create-failed"
  for i in $(seq 1 20); do
    { wsbx "$ALICE" team-a "r-$i" key-race alice || echo "r-$i" >>"$E2E_DIR/race-create-failed"; } &
  done
  wait
  [ -s "$E2E_DIR/race-create-failed" ] &&
    fail "creates refused: $(tr '\n' ' ' <"$E2E_DIR/race-create-failed")($(grep -h 'Failed calling webhook' "$E2E_DIR/logs/kube-apiserver.log" | tail -2))"
  for i in $(seq 1 20); do wait_for 40 phase_is team-a "r-$i" Running || fail "r-$i not Running: $(phase team-a r-$i)"; done
  local pods
  pods=$(for i in $(seq 1 20); do pod_of team-a "r-$i"; echo; done | sort -u | grep -c .)
  expect_eq "$pods" 1 "twenty Sandboxes of one scope, one pod"
  expect_eq "$(pods_of_scope team-a r-1)" 1 "pods with the scope's digest"
  expect_eq "$(for i in $(seq 1 20); do binding team-a "r-$i"; echo; done | grep -c -E '^(Warm|Created)$')" 1 \
    "one Sandbox bound it, the rest adopted"
  wait_for 60 ready_is team-a race-pool 5 || fail "race-pool did not refill: $(pool_diag team-a race-pool)"
  controller_stop "$b"
}

# crash_warm POINT: SIGKILL at POINT of a warm bind; after a restart: one pod
# for the scope, the pool back to its size, no warm pod bound twice or leaked.
crash_warm() {
  local point=$1
  pool "$ALICE" team-a "cp-$point" 2 alice >/dev/null || fail "$point: create pool"
  wait_for 60 ready_is team-a "cp-$point" 2 || fail "$point: pool not warm"
  sleep 3
  controller_stop "$MAIN_CTL"
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" main_start
  local pid=$MAIN_CTL
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "$point: admission not back"
  wsbx "$ALICE" team-a "c-$point" "key-$point" alice || fail "$point: create"
  wait_dead "$pid" 30 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: died without reaching the point"
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "$point: admission not back"
  wsbx "$ALICE" team-a "c2-$point" "key-$point" alice || fail "$point: create the retry"
  wait_for 40 phase_is team-a "c-$point" Running || fail "$point: not Running after the restart"
  wait_for 40 phase_is team-a "c2-$point" Running || fail "$point: the retry not Running"
  expect_eq "$(pod_of team-a "c2-$point")" "$(pod_of team-a "c-$point")" "$point: one pod for the scope"
  # the warm pod chosen before the crash is the one bound (its pool's
  # author, alice, may still use her owner)
  expect_eq "$(binding team-a "c-$point")" Warm "$point: the take completed after the restart"
  expect_eq "$(pods_of_scope team-a "c-$point")" 1 "$point: pods with the scope's digest"
  wait_for 60 ready_is team-a "cp-$point" 2 || fail "$point: the pool not back to 2"
  sleep 2
  expect_eq "$(pool_pods team-a "cp-$point")" 2 "$point: members (none leaked)"
  # no pod of the namespace is owned by nothing
  local orphans
  orphans=$(kubectl get pods -n team-a -o json | python3 -c 'import json,sys; print(sum(1 for p in json.load(sys.stdin)["items"] if not p["metadata"].get("ownerReferences")))')
  expect_eq "$orphans" 0 "$point: pods without an owner"
}
# A crash after the warm claim, and the chosen warm pod (every member) ends
# while the controller is down: the restarted controller must not complete
# the take on a finished pod (contract 8: only a Ready warm pod is bound; a
# Sandbox bound to it would be Failed for good). The pools look late
# (SBX_FAULT_DELAYS), so the take's completion sees the pod first.
test_f_crash_after_warm_claim_member_finished() {
  local point=after-warm-claim uid p
  # A template of its own: no other test's pool may serve c-fin.
  local IMG=registry.local/agent-fin:1.0
  pool "$ALICE" team-a cp-fin 2 alice >/dev/null || fail "create pool cp-fin"
  wait_for 60 ready_is team-a cp-fin 2 || { fail "cp-fin not warm"; return; }
  sleep 3
  controller_stop "$MAIN_CTL"
  rm -f "$E2E_DIR/once-fin"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-fin" main_start
  local pid=$MAIN_CTL
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  wsbx "$ALICE" team-a c-fin key-fin alice || fail "create c-fin"
  wait_dead "$pid" 30 || { fail "fault point never reached"; controller_stop "$pid"; return; }
  uid=$(kubectl get swp -n team-a cp-fin -o jsonpath='{.metadata.uid}')
  for p in $(kubectl get pods -n team-a -l "sandbox.dev/pool=$uid" -o jsonpath='{.items[*].metadata.name}'); do
    kubectl patch pod -n team-a "$p" --subresource=status --type merge \
      -p '{"status":{"phase":"Failed","conditions":[{"type":"Ready","status":"False"}]}}' >/dev/null || fail "mark $p Failed"
  done
  SBX_FAULT_DELAYS=pool-reconcile=10000 main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back after the restart"
  wait_for 40 phase_is team-a c-fin Running ||
    fail "c-fin after its warm pod finished: $(phase team-a c-fin) $(binding team-a c-fin) $(jp team-a sandbox c-fin '{.status.conditions[?(@.type=="Ready")].reason}')"
  expect_eq "$(binding team-a c-fin)" Created "c-fin's binding (its warm pod had finished)"
  controller_stop "$MAIN_CTL"
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  as "$ALICE" delete swp -n team-a cp-fin >/dev/null
  kubectl delete sbx -n team-a c-fin --wait=false >/dev/null
}
test_f_crash_after_warm_claim() { crash_warm after-warm-claim; }
test_f_crash_after_warm_patch() { crash_warm after-warm-patch; }

test_g_scale_and_template_change() {
  pool "$ALICE" team-b scaled 1 - >/dev/null || fail "create scaled"
  wait_for 60 ready_is team-b scaled 1 || fail "scaled not warm: $(pool_diag team-b scaled)"
  as "$ALICE" scale swp -n team-b scaled --replicas=4 >/dev/null || fail "kubectl scale up"
  wait_for 60 ready_is team-b scaled 4 || fail "not scaled up to 4: $(pool_diag team-b scaled)"
  expect_eq "$(pool_pods team-b scaled)" 4 "members after scaling up"
  as "$ALICE" scale swp -n team-b scaled --replicas=1 >/dev/null || fail "kubectl scale down"
  wait_for 60 sh -c "[ \"\$(kubectl get pods -n team-b -l sandbox.dev/pool=$(kubectl get swp -n team-b scaled -o jsonpath='{.metadata.uid}') --no-headers 2>/dev/null | grep -vc Terminating)\" = 1 ]" ||
    fail "not scaled down to 1"
  as "$ALICE" patch swp -n team-b scaled --type merge -p '{"spec":{"template":{"image":"registry.local/agent:2.0"}}}' >/dev/null ||
    fail "template change"
  wait_for 60 sh -c "kubectl get pods -n team-b -l sandbox.dev/pool -o jsonpath='{range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}' | grep -qx registry.local/agent:2.0 && ! kubectl get pods -n team-b -l sandbox.dev/pool -o jsonpath='{range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}' | grep -qx $IMG" ||
    fail "the template change did not replace the warm pods"
  as "$ALICE" delete swp -n team-b scaled >/dev/null || fail "delete the pool"
  wait_for 90 sh -c "! kubectl get pods -n team-b -l sandbox.dev/pool --no-headers 2>/dev/null | grep -q ." ||
    fail "the pool's pods stay after the pool is deleted"
}

test_h_lifecycle_on_a_warm_bound_pod() {
  wait_for 60 ready_is team-a alice-pool 2 || fail "alice-pool not warm: $(pool_diag team-a alice-pool)"
  wsbx "$ALICE" team-a wl-exp key-wl-exp alice "{\"shutdownTime\":\"$(in_s 8)\"}" || fail "create wl-exp"
  wait_for 30 phase_is team-a wl-exp Running || fail "wl-exp not Running"
  local pod
  pod=$(pod_of team-a wl-exp)
  expect_eq "$(binding team-a wl-exp)" Warm "wl-exp is warm-bound"
  wait_for 30 phase_is team-a wl-exp Expired || fail "wl-exp not Expired"
  wait_for 30 sh -c "! kubectl get pod -n team-a $pod >/dev/null 2>&1" || fail "the warm-bound pod stays after expiry"
  wait_for 60 ready_is team-a alice-pool 2 || fail "alice-pool not warm again: $(pool_diag team-a alice-pool)"
  wsbx "$ALICE" team-a wl-sus key-wl-sus alice || fail "create wl-sus"
  wait_for 30 phase_is team-a wl-sus Running || fail "wl-sus not Running"
  pod=$(pod_of team-a wl-sus)
  expect_eq "$(binding team-a wl-sus)" Warm "wl-sus is warm-bound"
  as "$ALICE" patch sbx -n team-a wl-sus --type merge -p '{"spec":{"lifecycle":{"suspend":true}}}' >/dev/null || fail "suspend"
  wait_for 30 sh -c "! kubectl get pod -n team-a $pod >/dev/null 2>&1" || fail "the warm-bound pod stays suspended"
  as "$ALICE" patch sbx -n team-a wl-sus --type merge -p '{"spec":{"lifecycle":{"suspend":false}}}' >/dev/null || fail "resume"
  wait_for 30 phase_is team-a wl-sus Running || fail "wl-sus not resumed"
  expect_eq "$(pod_of team-a wl-sus)" "$pod" "resumed under the warm pod's name"
  expect_eq "$(kubectl get pod -n team-a "$pod" -o jsonpath='{.metadata.labels.sandbox\.dev/pool}')" "" "the resumed pod is no pool member"
  expect_eq "$(pods_of_scope team-a wl-sus)" 1 "one pod after the resume"
}

# A warm pod that exits or fails never serves: the pool replaces it.
test_j_finished_warm_pod_replaced() {
  pool "$ALICE" team-b fin 1 - >/dev/null || fail "create fin"
  wait_for 60 ready_is team-b fin 1 || fail "fin not warm: $(pool_diag team-b fin)"
  local uid pod
  uid=$(kubectl get swp -n team-b fin -o jsonpath='{.metadata.uid}')
  pod=$(kubectl get pods -n team-b -l "sandbox.dev/pool=$uid" -o jsonpath='{.items[0].metadata.name}')
  kubectl patch pod -n team-b "$pod" --subresource=status --type merge \
    -p '{"status":{"phase":"Failed","conditions":[{"type":"Ready","status":"False"}]}}' >/dev/null ||
    fail "mark $pod Failed"
  wait_for 30 sh -c "! kubectl get pod -n team-b $pod >/dev/null 2>&1" || fail "the failed warm pod $pod stays"
  wait_for 60 ready_is team-b fin 1 || fail "fin not warm again: $(jp team-b swp fin '{.status}')"
  as "$ALICE" delete swp -n team-b fin >/dev/null
}

# A pool deleted with its dependents orphaned (the garbage collector removes
# the pool's owner reference from each warm pod and leaves it running) takes
# its warm pods with it all the same: a warm pod runs its author's command
# over its owner's folders, and its author may have lost the owner since
# (contract section 8); nor may orphans hold warm pods past maxWarm.
# Running, not Ready: only their pool would ever delete them.
live_pool_pods() { # live_pool_pods NS UID: pods labelled with the pool uid UID, not terminating
  kubectl get pods -n "$1" -l "sandbox.dev/pool=$2" \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
    awk 'NF == 1' | grep -c .
}
test_m_an_orphaned_pool_takes_its_warm_pods() {
  pool "$ALICE" team-b orph 2 alice >/dev/null || fail "create orph"
  wait_for 60 ready_is team-b orph 2 || { fail "orph not warm: $(pool_diag team-b orph)"; return; }
  local uid
  uid=$(kubectl get swp -n team-b orph -o jsonpath='{.metadata.uid}')
  as "$ALICE" delete swp -n team-b orph --cascade=orphan --wait=true >/dev/null || fail "alice's orphaning delete of orph"
  wait_for 60 eval '[ "$(live_pool_pods team-b "$uid")" = 0 ]' ||
    fail "orph's warm pods outlive it: $(kubectl get pods -n team-b -l "sandbox.dev/pool=$uid" -o jsonpath='{range .items[*]}{.metadata.name}:{.status.phase} owners {.metadata.ownerReferences} {end}')"
}

# A pool refills as soon as a member goes, also when the pod's watch event
# arrives before the create's response (SBX_FAULT_DELAYS holds every warm
# pod create's response 1.5 s). Before: that create was counted as in flight
# after its pod was seen, so the pool stalled for the in-flight window (30 s)
# before replacing a member.
# A pool in a namespace whose network floor cannot be made (here a policy
# refuses NetworkPolicy creates there) makes no warm pod; each of its
# reconciles tries the floor once and gives its refill turn back. The loop
# over its missing members tried the floor again for each (ten refused POSTs
# in one reconcile) and spent a turn of the refill budget every pool shares
# on each. Pool reconciles are held 3 s, so two attempts within 2 s are one
# reconcile's.
test_n_a_pool_whose_floor_is_refused_tries_it_once() {
  local ns=team-nf
  new_namespace $ns
  REFUSE_RULE='{apiGroups: [networking.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [networkpolicies]}' \
    refuse_requests $ns nf-floor false "e2e: no NetworkPolicy here"
  refused() {
    ! kubectl apply --dry-run=server -f - >/dev/null 2>&1 <<'YAML'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: probe, namespace: team-nf}
spec: {podSelector: {}, policyTypes: [Ingress]}
YAML
  }
  wait_for 30 refused || fail "the policy refusing NetworkPolicies is not enforced"
  controller_stop "$MAIN_CTL"
  SBX_FAULT_DELAYS=pool-reconcile=3000 main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  pool "$KUBECONFIG" $ns nf-pool 10 - >/dev/null || fail "create nf-pool"
  attempts() { grep '"msg":"the network floor cannot be made"' "$E2E_DIR/main.log" | grep '"pool":"nf-pool"'; }
  wait_for 30 attempts || fail "no attempt at nf-pool's floor: $(pool_diag $ns nf-pool)"
  sleep 2
  local first
  first=$(attempts | python3 -c 'import json, sys
from datetime import datetime
ts = [datetime.fromisoformat(json.loads(l)["ts"].replace("Z", "+00:00")) for l in sys.stdin]
print(sum(1 for t in ts if (t - ts[0]).total_seconds() < 2))')
  say "  a pool of 10 whose floor is refused: $first attempts at the floor in its first reconcile"
  expect_eq "$first" 1 "attempts at the floor in one reconcile of a pool of 10"
  expect_eq "$(pool_pods $ns nf-pool)" 0 "warm pods without a floor"
  kubectl delete swp -n $ns nf-pool --wait=false >/dev/null
  allow_pod_creates nf-floor
  controller_stop "$MAIN_CTL"
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
}

test_k_refill_when_the_event_beats_the_response() {
  controller_stop "$MAIN_CTL"
  SBX_FAULT_DELAYS=warm-create-response=1500 main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  pool "$ALICE" team-b rf 1 - >/dev/null || fail "create rf"
  wait_for 30 ready_is team-b rf 1 || fail "rf not warm: $(jp team-b swp rf '{.status}')"
  local uid pod
  uid=$(kubectl get swp -n team-b rf -o jsonpath='{.metadata.uid}')
  pod=$(kubectl get pods -n team-b -l "sandbox.dev/pool=$uid" -o jsonpath='{.items[0].metadata.name}')
  kubectl delete pod -n team-b "$pod" --wait=false >/dev/null || fail "delete $pod"
  wait_for 15 sh -c "kubectl get pods -n team-b -l sandbox.dev/pool=$uid -o name | grep -v pod/$pod | grep -q ." ||
    fail "no replacement for $pod within 15 s"
  wait_for 20 ready_is team-b rf 1 || fail "rf not warm again: $(jp team-b swp rf '{.status}')"
  as "$ALICE" delete swp -n team-b rf >/dev/null
  controller_stop "$MAIN_CTL"
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back after the test"
}

# A warm pod create whose answer is lost (the proxy resets the connection
# after the API server made the pod) is sent again by libcurl on a new
# connection when the lost one was kept alive, and that resend is answered
# AlreadyExists: the pod of that name (the controller names each) is the
# one the lost attempt made. Before: the pool counted it a refused create
# and backed off (1 s, doubling with each, "N failures in a row"), so a pool
# behind lost answers filled late and said BackOff (test_quota's test_f_b
# missed its 20 s so on a loaded machine). A connection reset during its
# TLS handshake loses the request itself: before, the pool then waited the
# in-flight window (30 s) for a pod that was never made. Every status the
# pool is given is watched: none says BackOff; each of three rounds fills
# the pool of 20 within 25 s (a fill takes a few seconds here) and empties
# it. The proxy loses 30 % of answers; the test fails if no create was
# answered AlreadyExists, so it cannot pass without one.
lossy_resends() { grep '"pool":"lossy"' "$E2E_DIR/main.log" | grep -ci 'already exists'; }
test_o_lost_create_answers_never_stall_a_pool() {
  faultproxy_start 0.3 || return
  SBX_E2E_APISERVER_PORT=$PROXY_PORT main_restart
  pool "$ALICE" team-b lossy 0 - >/dev/null || fail "create lossy"
  kubectl get swp -n team-b lossy -w -o jsonpath='{.status.conditions[0].reason}{" "}{.status.conditions[0].message}{"\n"}' \
    >"$E2E_DIR/lossy-status" 2>&1 &
  local watch=$! round t0 took
  for round in 1 2 3; do
    t0=$SECONDS
    pool "$ALICE" team-b lossy 20 - >/dev/null || fail "scale lossy to 20"
    wait_for 90 ready_is team-b lossy 20 || { fail "lossy not full: $(pool_diag team-b lossy)"; break; }
    took=$((SECONDS - t0))
    say "  round $round: 20 warm pods in $took s; creates answered AlreadyExists so far: $(lossy_resends)"
    [ "$took" -lt 25 ] || fail "round $round: the pool of 20 took $took s to fill (it stalled)"
    pool "$ALICE" team-b lossy 0 - >/dev/null || fail "scale lossy to 0"
    wait_for 60 eval '[ "$(pool_pods team-b lossy)" = 0 ]' || { fail "lossy not empty: $(pool_diag team-b lossy)"; break; }
  done
  kill "$watch" 2>/dev/null
  [ "$(lossy_resends)" -gt 0 ] || fail "no warm pod create was answered AlreadyExists in 3 rounds of 20: the test proved nothing"
  local backoffs
  backoffs=$(grep -c '^BackOff' "$E2E_DIR/lossy-status")
  [ "$backoffs" = 0 ] || fail "the pool said BackOff $backoffs times for its own lost creates: $(grep -m1 '^BackOff' "$E2E_DIR/lossy-status")"
  as "$ALICE" delete swp -n team-b lossy >/dev/null
  main_restart
  kill "$PROXY_PID" 2>/dev/null
}

# The work queue keys pools and claim-record collections apart from
# Sandboxes ("pool:", "claim:"): Sandboxes of namespaces named like either
# are reconciled as anywhere else (before: "claim/<name>" was taken for a
# collection and the Sandbox never got a pod).
test_i_namespaces_named_like_queue_keys() {
  local ns
  for ns in claim pool; do
    kubectl create namespace "$ns" >/dev/null || fail "create namespace $ns"
    wsbx "$KUBECONFIG" "$ns" s1 - - ||
      fail "create a Sandbox in $ns"
    wait_for 30 phase_is "$ns" s1 Running || fail "the Sandbox in namespace $ns is not Running: $(phase "$ns" s1)"
  done
}

# A pool that names allow profiles (issue 24 item 2, contract sections 8 and
# 9): naming one needs `use` on it, checked at admission as for a Sandbox;
# the warm pods carry the profiles' label and names, so the controller keeps
# the profiles' policy for them; the profiles are part of the template, so a
# Sandbox binds warm only to a pool naming the same set; a pool whose record
# of that authorization was removed or forged (by a cluster admin, the
# webhook out of the way) makes no warm pods and says why, and so does one
# whose author may no longer use the profile.
PIMG=registry.local/agent:profiles
ppool() { # ppool KUBECONFIG NS NAME REPLICAS PROFILES|-: a pool of PIMG, no owner
  as "$1" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: $3, namespace: $2}
spec:
  replicas: $4
  template:
    image: $PIMG
    command: [sleep, infinity]
$([ "$5" != - ] && echo "    network: {profiles: [$5]}")
YAML
}
psbx() { # psbx KUBECONFIG NS NAME PROFILES|-: a Sandbox of the pools' template
  as "$1" create -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: $3, namespace: $2}
spec:
  image: $PIMG
  command: [sleep, infinity]
$([ "$4" != - ] && echo "  network: {profiles: [$4]}")
YAML
}
members_of() { # members_of NS POOL: its member pods' names, sorted
  kubectl get pods -n "$1" -l "sandbox.dev/pool=$(kubectl get swp -n "$1" "$2" -o jsonpath='{.metadata.uid}')" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null | sort
}
pool_says() { # pool_says NS POOL REASON: its Ready reason is REASON and it has no member
  [ "$(jp "$1" swp "$2" '{.status.conditions[?(@.type=="Ready")].reason}')" = "$3" ] && [ -z "$(members_of "$1" "$2")" ]
}

test_l_pools_naming_profiles() {
  local ns=team-p out uid pod hash plain
  new_namespace "$ns"
  warm_rbac "$ns"
  out=$(usable_profile web alice)
  [ $? -eq 0 ] || { fail "the profile web and alice's right to use it: $out"; return; }
  # bob may not use web: his pool naming it is refused, naming the profile and the permission
  out=$(ppool "$BOB" "$ns" bob-web 1 web) && fail "bob created a pool naming web"
  expect_match "$out" 'may not use network profile "web" for a warm pool' "the refusal names the profile, for a pool"
  expect_match "$out" '"use" on sandboxnetworkprofiles.sandbox.dev "web"' "the refusal names the permission"
  kubectl get swp -n "$ns" bob-web >/dev/null 2>&1 && fail "the refused pool was stored"
  # alice's pool naming web: its warm pods carry the set's label and names, the set's policy exists
  out=$(ppool "$ALICE" "$ns" web-pool 1 web) || { fail "alice's web-pool: $out"; return; }
  expect_eq "$(jp "$ns" swp web-pool '{.spec.template.network.profiles[0]}')" web "the stored template names web"
  wait_for 60 ready_is "$ns" web-pool 1 || { fail "web-pool not warm: $(pool_diag "$ns" web-pool)"; return; }
  pod=$(members_of "$ns" web-pool)
  hash=$(kubectl get pod -n "$ns" "$pod" -o jsonpath='{.metadata.labels.sandbox\.dev/network-profiles}')
  expect_match "$hash" '^[0-9a-f]{16}$' "the warm pod's profile label"
  expect_eq "$(kubectl get pod -n "$ns" "$pod" -o jsonpath='{.metadata.annotations.sandbox\.dev/network-profiles}')" web \
    "the warm pod's profile names"
  wait_for 15 kubectl get networkpolicy -n "$ns" "sandbox-profiles-$hash" ||
    fail "no policy sandbox-profiles-$hash for the warm pods in $ns"
  sleep 3 # the settle time
  # a Sandbox naming no profile does not get web-pool's pod
  out=$(psbx "$ALICE" "$ns" plain-1 -) || fail "plain-1: $out"
  wait_for 30 phase_is "$ns" plain-1 Running || fail "plain-1 not Running: $(phase "$ns" plain-1)"
  expect_eq "$(binding "$ns" plain-1)" Created "a Sandbox naming no profile, beside a pool naming web"
  expect_eq "$(members_of "$ns" web-pool)" "$pod" "web-pool's pod is still its member"
  # a Sandbox naming web binds to it, warm
  out=$(psbx "$ALICE" "$ns" web-1 web) || fail "web-1: $out"
  wait_for 30 phase_is "$ns" web-1 Running || fail "web-1 not Running: $(phase "$ns" web-1)"
  expect_eq "$(binding "$ns" web-1)" Warm "a Sandbox naming web, beside a pool naming web"
  expect_eq "$(pod_of "$ns" web-1)" "$pod" "bound to web-pool's pod"
  expect_eq "$(kubectl get pod -n "$ns" "$pod" -o jsonpath='{.metadata.labels.sandbox\.dev/network-profiles}')" "$hash" \
    "the bound pod keeps the set's label"
  # a pool without profiles: a Sandbox naming web does not bind to it
  as "$ALICE" scale swp -n "$ns" web-pool --replicas=0 >/dev/null || fail "scale web-pool to 0"
  out=$(ppool "$ALICE" "$ns" plain-pool 1 -) || fail "plain-pool: $out"
  wait_for 60 ready_is "$ns" plain-pool 1 || fail "plain-pool not warm: $(pool_diag "$ns" plain-pool)"
  wait_for 30 sh -c "[ -z \"\$(kubectl get pods -n $ns -l sandbox.dev/pool=$(kubectl get swp -n "$ns" web-pool -o jsonpath='{.metadata.uid}') -o name)\" ]" ||
    fail "web-pool's members did not go"
  sleep 3
  plain=$(members_of "$ns" plain-pool)
  expect_eq "$(kubectl get pod -n "$ns" "$plain" -o jsonpath='{.metadata.labels.sandbox\.dev/network-profiles}')" "" \
    "plain-pool's pod has no profile label"
  out=$(psbx "$ALICE" "$ns" web-2 web) || fail "web-2: $out"
  wait_for 30 phase_is "$ns" web-2 Running || fail "web-2 not Running: $(phase "$ns" web-2)"
  expect_eq "$(binding "$ns" web-2)" Created "a Sandbox naming web, beside a pool naming none"
  expect_eq "$(members_of "$ns" plain-pool)" "$plain" "plain-pool's pod is still its member"
  # records removed or forged by a cluster admin (the webhook out of the
  # way, as a broken installation would be): no warm pod, and the pool says why
  as "$ALICE" scale swp -n "$ns" web-pool --replicas=1 >/dev/null || fail "scale web-pool to 1"
  out=$(ppool "$ALICE" "$ns" web-pool2 1 web) || fail "web-pool2: $out"
  wait_for 60 ready_is "$ns" web-pool 1 || fail "web-pool not warm again: $(pool_diag "$ns" web-pool)"
  wait_for 60 ready_is "$ns" web-pool2 1 || fail "web-pool2 not warm: $(pool_diag "$ns" web-pool2)"
  uninstall_admission
  kubectl annotate swp -n "$ns" web-pool sandbox.dev/network-authorization- >/dev/null ||
    fail "cannot remove web-pool's record"
  kubectl annotate swp -n "$ns" web-pool2 --overwrite \
    sandbox.dev/network-authorization=v3.1.1.0000000000000000000000000000000000000000000000000000000000000000 >/dev/null ||
    fail "cannot forge web-pool2's record"
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back"
  wait_for 30 pool_says "$ns" web-pool NetworkProfileNotAuthorized ||
    fail "web-pool without its record: $(pool_diag "$ns" web-pool)"
  wait_for 30 pool_says "$ns" web-pool2 NetworkProfileNotAuthorized ||
    fail "web-pool2 with a forged record: $(pool_diag "$ns" web-pool2)"
  expect_match "$(jp "$ns" swp web-pool '{.status.conditions[?(@.type=="Ready")].message}')" 'network profiles web' \
    "the pool's condition names the profiles"
  as "$ALICE" scale swp -n "$ns" web-pool --replicas=3 >/dev/null || fail "scale web-pool to 3"
  sleep 5
  expect_eq "$(members_of "$ns" web-pool)" "" "web-pool's members 5 s after a scale to 3"
  # the author loses `use` on web: a change of the pool asks anew, its warm pods go
  as "$ALICE" patch sbx -n "$ns" web-1 --type merge -p '{"spec":{"lifecycle":{"suspend":true}}}' >/dev/null ||
    fail "suspend web-1"
  out=$(ppool "$ALICE" "$ns" web-pool3 1 web) || fail "web-pool3: $out"
  wait_for 60 ready_is "$ns" web-pool3 1 || fail "web-pool3 not warm: $(pool_diag "$ns" web-pool3)"
  wait_for 30 phase_is "$ns" web-1 Suspended || fail "web-1 not Suspended: $(phase "$ns" web-1)"
  kubectl delete clusterrolebinding profile-web-users >/dev/null || fail "cannot revoke alice's use of web"
  local revoked=$SECONDS
  wait_for 20 sh -c "! KUBECONFIG=$ALICE kubectl auth can-i use sandboxnetworkprofiles.sandbox.dev/web >/dev/null" ||
    fail "alice may still use web"
  as "$ALICE" scale swp -n "$ns" web-pool3 --replicas=2 >/dev/null || fail "scale web-pool3 to 2"
  wait_for 30 pool_says "$ns" web-pool3 NetworkProfileNotAuthorized ||
    fail "web-pool3 of a revoked author: $(pool_diag "$ns" web-pool3)"
  expect_match "$(jp "$ns" swp web-pool3 '{.status.conditions[?(@.type=="Ready")].message}')" 'alice may no longer use network profile web' \
    "the pool's condition names the author and the profile"
  # ... and her resume of web-1, which names web, is refused once the
  # webhook's cached answer (10 s) is over
  sleep $((revoked + 11 > SECONDS ? revoked + 11 - SECONDS : 0))
  out=$(as "$ALICE" patch sbx -n "$ns" web-1 --type merge -p '{"spec":{"lifecycle":{"suspend":false}}}' 2>&1) &&
    fail "alice resumed web-1 without use on web"
  expect_match "$out" 'may not use network profile "web" to resume this Sandbox' "the resume's refusal names the profile"
  expect_eq "$(phase "$ns" web-1)" Suspended "web-1 after the refused resume"
  as "$ALICE" delete swp -n "$ns" web-pool web-pool2 web-pool3 plain-pool >/dev/null
}

warm_setup
e2e_main
