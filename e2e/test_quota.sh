#!/usr/bin/env bash
# End-to-end: per-owner quotas (contract section 10, issue 25) under the chaos
# harness of test_idempotency.sh: two controllers race, both behind
# hack/faultproxy, which loses one answer in five after the API server has
# acted on the request. Proven: 50 concurrent creates by one owner with a
# quota of 5 give exactly 5 pods (never 6, watched throughout); freed slots
# are taken in arrival order; Reject mode's refusal is the stored outcome of
# the key (a later retry is refused too, a new key is not); a resume counts;
# Sandboxes of one intent count once; warm pods stop at maxWarm, and pools
# of one owner filling together never pass it (one controller, and racing
# replicas: each warm pod holds a warm slot; a warm slot whose pod never
# came goes, the next warm pod takes over a taken one's slot, and one left
# by a Sandbox that ended goes to another pool); the
# controller's default quota; the quota's status; with the webhook,
# admission refuses early naming the owner, the limit and the count; a
# resume never runs in the slot of the pod it replaces (going with it),
# waits behind those that waited before it was resumed and keeps its place
# ahead of those that came after it (across a restart, or when something
# else held it up first), and gives back the slot it took when it is
# suspended again (or expires) before its pod was made; a quota counts the
# pods that ran before it applied; a warm take a crash cut short waits for
# a slot once its own was given back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0

setup() {
  cluster_up
  grant_controller_rbac
}

# racing_controllers [FLAGS...]: the faultproxy (a fifth of the answers
# lost) and two controllers through it; sets RACE_PIDS.
racing_controllers() {
  faultproxy_start 0.2 || return
  SBX_E2E_APISERVER_PORT=$PROXY_PORT controller_start quota-a "$@"
  RACE_PIDS=("$CTL_PID")
  SBX_E2E_APISERVER_PORT=$PROXY_PORT controller_start quota-b "$@"
  RACE_PIDS+=("$CTL_PID")
}

stop_racing() {
  local p
  for p in "${RACE_PIDS[@]}"; do controller_stop "$p"; done
  kill "$PROXY_PID" 2>/dev/null
}

# quota NS NAME OWNER|- MAX_ACTIVE|- MODE [MAX_WARM]
quota() {
  {
    echo "apiVersion: sandbox.dev/v1alpha1"
    echo "kind: SandboxQuota"
    echo "metadata: {name: $2, namespace: $1}"
    echo "spec:"
    [ "$3" != - ] && echo "  owner: $3"
    [ "$4" != - ] && echo "  maxActive: $4"
    echo "  mode: $5"
    [ -n "${6:-}" ] && echo "  maxWarm: $6"
    true
  } | kubectl apply -f - >/dev/null
}

# warm_pool NS REPLICAS: alice's pool "pool" of the Sandboxes' template.
warm_pool() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: pool, namespace: $1}
spec: {replicas: $2, workspaceOwner: alice, template: {image: $IMG}}
YAML
}

reason_of() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }
phase_of() { jp "$1" sandbox "$2" '{.status.phase}'; }
count_reason() {
  kubectl get sbx -n "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Bound")].reason}{"\n"}{end}' |
    grep -cx "$2"
}
slots() { kubectl get sbxclaim -n "$1" -o jsonpath='{range .items[*]}{.spec.state}{"\n"}{end}' | grep -cx Slot; }
# pods_live NS: sandbox pods not being deleted.
pods_live() {
  kubectl get pods -n "$1" -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' |
    awk 'NF == 1' | wc -l
}
# sandbox_pods NS: pods that run for Sandboxes (the scope digest label: a
# warm pod has it once taken), not being deleted.
sandbox_pods() {
  kubectl get pods -n "$1" -l sandbox.dev/scope-digest \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' |
    awk 'NF == 1' | wc -l
}

# set_suspend NS NAME true|false: suspends (or resumes) the Sandbox.
set_suspend() { kubectl patch sbx "$2" -n "$1" --type merge -p "{\"spec\":{\"lifecycle\":{\"suspend\":$3}}}" >/dev/null; }
# suspended_and_freed NS NAME: NAME is Suspended, and NS has no sandbox pod and no slot left.
suspended_and_freed() { [ "$(phase_of "$1" "$2")" = Suspended ] && [ "$(pods_live "$1")" = 0 ] && [ "$(slots "$1")" = 0 ]; }
# suspend_and_free NS NAME: suspends NAME and waits until its pod and slot went.
suspend_and_free() {
  set_suspend "$1" "$2" true
  wait_for 60 suspended_and_freed "$1" "$2" ||
    fail "$2 not suspended, or its slot not gone: $(phase_of "$1" "$2"), $(pods_live "$1") pods, $(slots "$1") slots"
}

# watch_max NS SECONDS OUT [COUNT]: the most pods seen (COUNT NS, default
# pods_live), polled, into OUT.
watch_max() {
  local end=$((SECONDS + $2)) max=0 n count=${4:-pods_live}
  while [ $SECONDS -lt $end ]; do
    n=$("$count" "$1")
    [ "$n" -gt "$max" ] && max=$n
    sleep 0.2
  done
  echo "$max" >"$3"
}

test_a_fifty_concurrent_creates_quota_of_five() {
  new_namespace qa
  quota qa alice alice 5 Queue
  racing_controllers || return
  watch_max qa 45 "$E2E_DIR/qa.max" &
  local watcher=$! i jobs=()
  for i in $(seq 1 50); do
    sandbox qa s-$i $IMG "key-$i" alice >/dev/null & jobs+=($!)
  done
  wait "${jobs[@]}"
  wait_for 120 bound_count_is qa 5 || fail "not 5 bound: $(count_bound qa)"
  wait_for 120 eval '[ "$(count_reason qa QuotaWaiting)" = 45 ]' || fail "not 45 waiting: $(count_reason qa QuotaWaiting)"
  wait "$watcher"
  expect_eq "$(cat "$E2E_DIR/qa.max")" 5 "the most pods seen at once"
  expect_eq "$(pod_count qa)" 5 "pods"
  expect_eq "$(count_bound qa)" 5 "bound"
  expect_eq "$(slots qa)" 5 "quota slots held"
  wait_for 60 eval '[ "$(jp qa sandboxquota alice "{.status.active}/{.status.waiting}")" = 5/45 ]' ||
    fail "quota status: $(jp qa sandboxquota alice '{.status}')"
  expect_match "$(jp qa sandbox s-1 '{.status.conditions[?(@.type=="Bound")].message}')$(jp qa sandbox s-50 '{.status.conditions[?(@.type=="Bound")].message}')" \
    "alice.*5" "the waiting message names the owner and the limit"
  stop_racing
}

test_b_freed_slots_taken_in_arrival_order() {
  new_namespace qb
  quota qb alice alice 2 Queue
  racing_controllers || return
  sandbox qb a1 $IMG ka1 alice >/dev/null
  sandbox qb a2 $IMG ka2 alice >/dev/null
  wait_for 60 bound_count_is qb 2 || fail "a1, a2 not bound"
  # waiters in arrival order z4, y3, x2, w1 (the reverse of their names),
  # created in separate seconds
  local w
  for w in z4 y3 x2 w1; do
    sandbox qb "$w" $IMG "k$w" alice >/dev/null
    sleep 1.2
  done
  wait_for 60 eval '[ "$(count_reason qb QuotaWaiting)" = 4 ]' || fail "not 4 waiting: $(count_reason qb QuotaWaiting)"
  kubectl delete sbx a1 -n qb >/dev/null
  wait_for 60 bound qb z4 || fail "z4 (the first waiter) not bound after a1 went"
  sleep 3
  expect_eq "$(count_reason qb QuotaWaiting)" 3 "the others still wait"
  kubectl delete sbx a2 -n qb >/dev/null
  wait_for 60 bound qb y3 || fail "y3 (the second waiter) not bound after a2 went"
  sleep 3
  expect_eq "$(reason_of qb x2)$(reason_of qb w1)" QuotaWaitingQuotaWaiting "x2 and w1 still wait"
  kubectl delete sbx z4 -n qb >/dev/null
  wait_for 60 bound qb x2 || fail "x2 not bound after z4 went"
  sleep 3
  expect_eq "$(reason_of qb w1)" QuotaWaiting "w1 still waits"
  expect_eq "$(pods_live qb)" 2 "never more than the quota"
  stop_racing
}

test_c_reject_mode_is_a_stored_outcome() {
  new_namespace qc
  quota qc alice alice 2 Reject
  racing_controllers || return
  sandbox qc r1 $IMG kr1 alice >/dev/null
  sandbox qc r2 $IMG kr2 alice >/dev/null
  wait_for 60 bound_count_is qc 2 || fail "r1, r2 not bound"
  sandbox qc r3 $IMG kr3 alice >/dev/null
  wait_for 60 eval '[ "$(reason_of qc r3)" = QuotaExceeded ]' || fail "r3: $(reason_of qc r3)"
  expect_eq "$(phase_of qc r3)" Rejected "phase"
  expect_match "$(jp qc sandbox r3 '{.status.conditions[?(@.type=="Bound")].message}')" "alice.*2 of 2" "message"
  wait_for 30 eval 'kubectl get sbxclaim -n qc -o jsonpath="{range .items[*]}{.spec.state} {.spec.sandbox}{\"\\n\"}{end}" | grep -qx "Rejected r3"' ||
    fail "no Rejected record for r3's key"
  kubectl delete sbx r1 -n qc >/dev/null
  wait_for 60 eval '[ "$(slots qc)" = 1 ]' || fail "r1's slot not freed: $(slots qc)"
  # a retry of r3's intent (same key and spec) gets the stored outcome, not the free slot
  sandbox qc r3-retry $IMG kr3 alice >/dev/null
  wait_for 60 eval '[ "$(reason_of qc r3-retry)" = QuotaExceeded ]' || fail "r3-retry: $(reason_of qc r3-retry)"
  expect_eq "$(phase_of qc r3-retry)" Rejected "the retry's phase"
  # a new intent takes it
  sandbox qc r4 $IMG kr4 alice >/dev/null
  wait_for 60 bound qc r4 || fail "r4 not bound: $(reason_of qc r4)"
  sleep 2
  expect_eq "$(pods_live qc)" 2 "pods"
  expect_eq "$(phase_of qc r3)$(phase_of qc r3-retry)" RejectedRejected "the refused stay refused"
  stop_racing
}

test_d_a_resume_counts() {
  new_namespace qd
  quota qd alice alice 1 Queue
  racing_controllers || return
  sandbox qd s1 $IMG ks1 alice >/dev/null
  wait_for 60 bound qd s1 || fail "s1 not bound"
  set_suspend qd s1 true
  wait_for 60 eval '[ "$(phase_of qd s1)" = Suspended ] && [ "$(pods_live qd)" = 0 ]' || fail "s1 not suspended"
  wait_for 60 eval '[ "$(slots qd)" = 0 ]' || fail "the suspended s1 still holds a slot"
  sandbox qd s2 $IMG ks2 alice >/dev/null
  wait_for 60 bound qd s2 || fail "s2 not bound while s1 is suspended"
  set_suspend qd s1 false
  wait_for 60 eval '[ "$(reason_of qd s1)" = QuotaWaiting ]' || fail "the resume of s1 does not wait: $(reason_of qd s1)"
  sleep 3
  expect_eq "$(pods_live qd)" 1 "one pod: the resume counts"
  kubectl delete sbx s2 -n qd >/dev/null
  wait_for 60 eval '[ "$(phase_of qd s1)" = Running ]' || fail "s1 not resumed after s2 went: $(phase_of qd s1)"
  expect_eq "$(pods_live qd)" 1 "pods"
  stop_racing
}

test_e_one_intent_counts_once() {
  new_namespace qe
  quota qe alice alice 1 Queue
  racing_controllers || return
  local i jobs=()
  for i in 1 2 3 4; do sandbox qe same-$i $IMG one-key alice >/dev/null & jobs+=($!); done
  wait "${jobs[@]}"
  wait_for 60 bound_count_is qe 4 || fail "the 4 Sandboxes of one intent not all bound: $(count_bound qe)"
  expect_eq "$(pod_count qe)" 1 "one pod"
  wait_for 30 eval '[ "$(slots qe)" = 1 ]' || fail "slots: $(slots qe)"
  stop_racing
}

test_f_warm_pods_stop_at_max_warm() {
  new_namespace qf
  quota qf alice alice - Queue 2
  racing_controllers --warm-pool-settle 1s || return
  warm_pool qf 4
  wait_for 60 eval '[ "$(kubectl get pods -n qf -l sandbox.dev/pool --no-headers 2>/dev/null | wc -l)" -ge 2 ]' ||
    fail "no warm pods"
  sleep 5
  expect_eq "$(kubectl get pods -n qf -l sandbox.dev/pool --no-headers | wc -l)" 2 "warm pods at maxWarm"
  wait_for 30 eval '[ "$(jp qf sandboxquota alice "{.status.warm}")" = 2 ]' || fail "quota status: $(jp qf sandboxquota alice '{.status}')"
  expect_match "$(jp qf sandboxwarmpool pool '{.status.conditions[0].message}')" "quota" "the pool says why it is not full"
  stop_racing
}

# A lowered maxWarm applies to the pools it governs at once, a full pool's
# too: its extras go. The quota's change queued the owners' waiting
# Sandboxes but no pool, so a full pool with nothing else to look at (no
# author to ask about again: --owner-authorization namespace) kept what it
# had. Raised again, the pool fills up to its replicas.
warm_count() { kubectl get pods -n "$1" -l sandbox.dev/pool --field-selector=status.phase!=Failed --no-headers 2>/dev/null |
  awk '$3 != "Terminating"' | grep -c .; }
test_f_b_a_changed_max_warm_applies_at_once() {
  new_namespace qfb
  quota qfb alice alice - Queue 2
  racing_controllers --warm-pool-settle 1s || return
  warm_pool qfb 2
  wait_for 60 eval '[ "$(jp qfb swp pool "{.status.readyReplicas}")" = 2 ]' || fail "the pool is not full: $(jp qfb swp pool '{.status}')"
  sleep 3
  quota qfb alice alice - Queue 1
  wait_for 20 eval '[ "$(warm_count qfb)" -eq 1 ]' || fail "warm pods 20 s after maxWarm went to 1: $(warm_count qfb)"
  quota qfb alice alice - Queue 2
  wait_for 20 eval '[ "$(warm_count qfb)" -eq 2 ]' || fail "warm pods 20 s after maxWarm went back to 2: $(warm_count qfb)"
  stop_racing
}

test_g_namespace_quota_and_the_controllers_default() {
  new_namespace qg
  printf 'quota:\n  maxActive: 1\n  mode: Queue\n' >"$E2E_DIR/quota-default.yaml"
  racing_controllers --config "$E2E_DIR/quota-default.yaml" || return
  # no SandboxQuota: the controller's default, per owner; ownerless count as one owner
  sandbox qg b1 $IMG kb1 bob >/dev/null
  sandbox qg b2 $IMG kb2 bob >/dev/null
  sandbox qg c1 $IMG kc1 carol >/dev/null
  sandbox qg n1 $IMG >/dev/null
  sandbox qg n2 $IMG >/dev/null
  wait_for 60 bound_count_is qg 3 || fail "not 3 bound (one each of bob, carol, ownerless): $(count_bound qg)"
  wait_for 60 eval '[ "$(count_reason qg QuotaWaiting)" = 2 ]' || fail "not 2 waiting: $(count_reason qg QuotaWaiting)"
  # a namespace-wide SandboxQuota replaces the default; an owner's own replaces that
  quota qg all - 2 Queue
  wait_for 60 bound_count_is qg 5 || fail "the namespace quota of 2 did not let b2 and n2 in: $(count_bound qg)"
  wait_for 60 eval '[ "$(jp qg sandboxquota all "{.status.active}")" = 5 ]' || fail "status: $(jp qg sandboxquota all '{.status}')"
  expect_match "$(jp qg sandboxquota all '{.status.owners[*].owner}')" "bob" "per-owner status"
  stop_racing
}

test_h_admission_refuses_early() {
  new_namespace qh
  E2E_ADMISSION=1 controller_with_webhook
  local c=$CTL_PID
  install_admission "$WEBHOOK_PORT" || { fail "admission not installed"; controller_stop "$c"; return; }
  quota qh alice alice 1 Reject
  sandbox qh h1 $IMG kh1 alice >/dev/null
  wait_for 60 bound qh h1 || fail "h1 not bound"
  local out
  out=$(sandbox qh h2 $IMG kh2 alice) && fail "the create past the quota was admitted: $out"
  expect_match "$out" 'alice.*1 of 1.*SandboxQuota qh/alice' "the refusal names owner, count, limit and quota"
  # a retry of h1's intent is no new sandbox: admitted
  out=$(sandbox qh h1-again $IMG kh1 alice) || fail "a retry of h1's intent was refused: $out"
  wait_for 60 bound qh h1-again || fail "h1-again not bound"
  expect_eq "$(pod_count qh)" 1 "pods"
  uninstall_admission
  controller_stop "$c"
}

# The early refusal is for a new intent that takes a slot now (contract
# sections 5a, 10): alice's a is bound, then suspended (its slot freed), and
# c takes the only slot; b, with a's key and spec, joins a's suspended
# generation and waits for a slot as a resume does (in either mode):
# admitted, QuotaWaiting, bound once c goes. A Sandbox created suspended
# takes no slot: admitted too.
test_h_admission_admits_what_takes_no_new_slot() {
  new_namespace qhb
  E2E_ADMISSION=1 controller_with_webhook
  local c=$CTL_PID out
  install_admission "$WEBHOOK_PORT" || { fail "admission not installed"; controller_stop "$c"; return; }
  quota qhb alice alice 1 Reject
  sandbox qhb a $IMG kha alice >/dev/null
  wait_for 60 bound qhb a || fail "a not bound: $(reason_of qhb a)"
  suspend_and_free qhb a
  sandbox qhb c $IMG khc alice >/dev/null
  wait_for 60 bound qhb c || fail "c not bound: $(reason_of qhb c)"
  out=$(sandbox qhb b $IMG kha alice) || fail "b (a's intent, its generation suspended) was refused: $out"
  wait_for 60 eval '[ "$(reason_of qhb b)" = QuotaWaiting ]' || fail "b does not wait for a slot: $(phase_of qhb b) $(reason_of qhb b)"
  out=$(kubectl apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: s, namespace: qhb}
spec: {image: $IMG, idempotencyKey: khs, workspaceOwner: alice, lifecycle: {suspend: true}}
YAML
  ) || fail "a Sandbox created suspended was refused: $out"
  wait_for 30 eval '[ "$(phase_of qhb s)" = Suspended ]' || fail "s not Suspended: $(phase_of qhb s)"
  sleep 2
  expect_eq "$(pods_live qhb)/$(slots qhb)" 1/1 "pods/slots (c's)"
  kubectl delete sbx c -n qhb >/dev/null
  wait_for 60 bound qhb b || fail "b not bound after c went: $(phase_of qhb b) $(reason_of qhb b)"
  expect_eq "$(pods_live qhb)" 1 "pods"
  uninstall_admission
  controller_stop "$c"
}

# The controller SIGKILLed right after it took a quota slot (before the
# pod) and right after it stored a Reject outcome (before the status): after
# a restart, one pod per intent, the slot it took is the pod's (no second
# slot, no slot leaked to a waiter), the refusal stays the key's outcome.
test_i_crash_after_quota_writes() {
  new_namespace qi
  quota qi alice alice 1 Reject
  local point pid
  point=after-quota-slot
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" controller_start "crash-$point"
  pid=$CTL_PID
  sandbox qi c1 $IMG kc1 alice >/dev/null
  wait_dead "$pid" 30 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: the controller died without reaching the point"
  expect_eq "$(slots qi)" 1 "$point: the slot was taken before the crash"
  point=after-quota-reject-record
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" controller_start "crash-$point"
  pid=$CTL_PID
  wait_for 40 bound qi c1 || fail "c1 not bound after the restart: $(reason_of qi c1)"
  sandbox qi c2 $IMG kc2 alice >/dev/null
  wait_dead "$pid" 30 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: the controller died without reaching the point"
  controller_start after-crashes
  pid=$CTL_PID
  wait_for 40 eval '[ "$(reason_of qi c2)" = QuotaExceeded ]' || fail "c2 after the restart: $(reason_of qi c2)"
  expect_match "$(jp qi sandbox c2 '{.status.conditions[?(@.type=="Bound")].message}')" "alice.*1 of 1" "c2's message"
  sandbox qi c1-again $IMG kc1 alice >/dev/null
  wait_for 40 bound qi c1-again || fail "c1-again (one intent with c1) not bound"
  sleep 2
  expect_eq "$(pod_count qi)" 1 "pods"
  expect_eq "$(slots qi)" 1 "slots"
  expect_eq "$(kubectl get pods -n qi -o jsonpath='{.items[0].metadata.name}')" \
    "$(kubectl get sbxclaim -n qi -o jsonpath='{range .items[?(@.spec.state=="Slot")]}{.metadata.ownerReferences[0].name}{end}')" \
    "the slot is owned by the pod"
  controller_stop "$pid"
}

# A Sandbox unbound for another reason than the quota (here the API refuses
# its pod: a policy) holds its slot but is not in the line: the next one
# binds in the free slot instead of waiting behind it.
test_j_a_sandbox_stuck_otherwise_holds_no_one_back() {
  new_namespace qj
  refuse_pod_creates qj quota-paused-image "object.spec.containers.all(c, c.image != 'registry.local/paused:1')" \
    "this image is paused"
  sleep 3
  quota qj alice alice 2 Queue
  controller_start quota-j
  local pid=$CTL_PID
  sandbox qj stuck registry.local/paused:1 kj1 alice >/dev/null
  wait_for 30 eval '[ "$(reason_of qj stuck)" = Waiting ]' || fail "stuck: $(reason_of qj stuck)"
  sleep 1.1 # next arrives after stuck (creation times are in whole seconds; "next" < "stuck")
  sandbox qj next $IMG kj2 alice >/dev/null
  wait_for 20 bound qj next || fail "next waits behind a Sandbox that holds its slot: $(reason_of qj next)"
  expect_eq "$(slots qj)" 2 "slots: the stuck one's and next's"
  allow_pod_creates quota-paused-image
  controller_stop "$pid"
}

# A resume must never count a slot that is going away with the pod before
# it: its slot cache still shows the old pod's slot (the slot's deletion
# reaches the controller late, SBX_FAULT_DELAYS), so the resume must wait for
# a slot of its own rather than run in one the garbage collector removes.
# Then a second Sandbox of the owner must wait: one pod at most, throughout.
test_k_a_resume_never_takes_a_dying_slot() {
  new_namespace qk
  quota qk alice alice 1 Queue
  SBX_FAULT_DELAYS=watch-delete:sandboxclaims=8000 controller_start quota-k
  local pid=$CTL_PID
  sandbox qk s1 $IMG kk1 alice >/dev/null
  wait_for 60 bound qk s1 || fail "s1 not bound"
  suspend_and_free qk s1
  watch_max qk 40 "$E2E_DIR/qk.max" &
  local watcher=$!
  set_suspend qk s1 false
  wait_for 40 eval '[ "$(phase_of qk s1)" = Running ]' || fail "s1 not resumed: $(phase_of qk s1) $(reason_of qk s1)"
  sandbox qk s2 $IMG kk2 alice >/dev/null
  wait_for 30 eval '[ "$(reason_of qk s2)" = QuotaWaiting ]' || fail "s2 does not wait: $(reason_of qk s2)"
  wait "$watcher"
  expect_eq "$(cat "$E2E_DIR/qk.max")" 1 "the most pods seen at once"
  expect_eq "$(pods_live qk)" 1 "pods"
  expect_eq "$(slots qk)" 1 "quota slots held"
  expect_eq "$(kubectl get sbxclaim -n qk -o jsonpath='{range .items[?(@.spec.state=="Slot")]}{.metadata.ownerReferences[0].uid}{end}')" \
    "$(kubectl get pods -n qk -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init -o jsonpath='{.items[0].metadata.uid}')" \
    "the slot is owned by the running pod"
  controller_stop "$pid"
}

# A quota applied to an owner whose sandboxes already run (made before it,
# or by a controller without quotas: no slot holds them) counts them: no
# new pod starts until the owner is below the limit, and its status says so.
test_l_a_quota_counts_the_pods_made_before_it() {
  new_namespace ql
  controller_start quota-l
  local pid=$CTL_PID i
  for i in 1 2 3; do sandbox ql a$i $IMG kl$i alice >/dev/null; done
  wait_for 60 bound_count_is ql 3 || fail "not 3 bound: $(count_bound ql)"
  quota ql alice alice 2 Queue
  wait_for 20 eval '[ "$(jp ql sandboxquota alice "{.status.active}")" = 3 ]' ||
    fail "the quota's status does not count the 3 pods: $(jp ql sandboxquota alice '{.status}')"
  sandbox ql a4 $IMG kl4 alice >/dev/null
  wait_for 30 eval '[ "$(reason_of ql a4)" = QuotaWaiting ]' || fail "a4 does not wait: $(reason_of ql a4)"
  expect_match "$(jp ql sandbox a4 '{.status.conditions[?(@.type=="Bound")].message}')" "alice holds 3 of 2" "a4's message"
  kubectl delete sbx a1 -n ql >/dev/null
  wait_for 30 eval '[ "$(pods_live ql)" = 2 ]' || fail "a1's pod not gone: $(pods_live ql)"
  sleep 3
  expect_eq "$(reason_of ql a4)" QuotaWaiting "a4 with 2 of 2 held"
  kubectl delete sbx a2 -n ql >/dev/null
  wait_for 30 bound ql a4 || fail "a4 not bound once alice held 1 of 2: $(reason_of ql a4)"
  expect_eq "$(pods_live ql)" 2 "pods"
  controller_stop "$pid"
}

# A warm take cut short by a crash (the generation's claim written, the
# take not made) and then suspended gives its slot back; resumed, the take
# waits for a slot like any resume, never runs past the quota.
test_m_an_unfinished_warm_take_waits_for_a_slot() {
  new_namespace qm
  quota qm alice alice 1 Queue
  local point=after-warm-claim pid
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" controller_start crash-m --warm-pool-settle 1s
  pid=$CTL_PID
  warm_pool qm 1
  wait_for 60 eval '[ "$(jp qm sandboxwarmpool pool "{.status.readyReplicas}")" = 1 ]' || fail "the pool is not warm"
  sleep 2
  sandbox qm s1 $IMG km1 alice >/dev/null
  wait_dead "$pid" 30 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: the controller died without reaching the point"
  set_suspend qm s1 true
  controller_start quota-m --warm-pool-settle 1s
  pid=$CTL_PID
  wait_for 30 eval '[ "$(phase_of qm s1)" = Suspended ] && [ "$(slots qm)" = 0 ]' ||
    fail "s1 not suspended, or its slot kept: $(phase_of qm s1), $(slots qm) slots"
  sandbox qm s2 registry.local/other:1 km2 alice >/dev/null # not the pool's template: a cold pod
  wait_for 60 bound qm s2 || fail "s2 not bound: $(reason_of qm s2)"
  watch_max qm 20 "$E2E_DIR/qm.max" sandbox_pods &
  local watcher=$!
  set_suspend qm s1 false
  wait_for 30 eval '[ "$(reason_of qm s1)" = QuotaWaiting ]' || fail "the resumed s1 does not wait: $(reason_of qm s1)"
  wait "$watcher"
  expect_eq "$(cat "$E2E_DIR/qm.max")" 1 "the most sandbox pods seen at once"
  kubectl delete sbx s2 -n qm >/dev/null
  wait_for 60 bound qm s1 || fail "s1 not bound once s2 went: $(reason_of qm s1)"
  expect_eq "$(sandbox_pods qm)" 1 "sandbox pods"
  controller_stop "$pid"
}

# A slot that reaches the cache after its pod counts once: each event of
# the sandboxclaims watch is held 15 s (SBX_FAULT_DELAYS), so when r2 comes
# the cache has r1's pod but not r1's slot. r2 must take the second slot of
# two. Counting r1's pod as holding none, and then r1's slot again when the
# create of that slot's name conflicted, made r2 "2 of 2": in Reject mode a
# stored refusal of its key with a slot free (test_c failed so under the
# racing controllers in the CI at f02634c).
test_n_a_slot_seen_late_counts_once() {
  new_namespace qn
  quota qn alice alice 2 Reject
  SBX_FAULT_DELAYS=watch:sandboxclaims=15000 controller_start quota-n
  local pid=$CTL_PID
  sleep 2 # the quota in the cache, past its watch's first event
  sandbox qn r1 $IMG kn1 alice >/dev/null
  wait_for 90 eval '[ "$(pods_live qn)" = 1 ]' || fail "r1's pod not made: $(phase_of qn r1) $(reason_of qn r1)"
  sandbox qn r2 $IMG kn2 alice >/dev/null
  wait_for 90 eval '[ "$(pods_live qn)" = 2 ] || [ "$(phase_of qn r2)" = Rejected ]' ||
    fail "r2 has no pod and is not refused: $(phase_of qn r2) $(reason_of qn r2)"
  expect_ne "$(phase_of qn r2)" Rejected "r2's phase ($(reason_of qn r2): $(jp qn sandbox r2 '{.status.conditions[?(@.type=="Bound")].message}'))"
  expect_eq "$(pods_live qn)" 2 "pods"
  expect_eq "$(kubectl get sbxclaim -n qn -o jsonpath='{range .items[*]}{.spec.state}{"\n"}{end}' | grep -cx Rejected)" 0 \
    "stored refusals"
  controller_stop "$pid"
}

# A slot that reaches the cache after its pod still goes to its pod: the
# handoff at the bind found no slot in the cache, and no later reconcile of
# the Sandbox came; the slot's arrival in the cache sends its Sandbox to
# look again.
test_n_b_a_slot_seen_late_goes_to_its_pod() {
  new_namespace qnb
  quota qnb alice alice 1 Queue
  SBX_FAULT_DELAYS=watch:sandboxclaims=10000 controller_start quota-nb
  local pid=$CTL_PID
  sleep 2
  sandbox qnb r1 $IMG knb1 alice >/dev/null
  wait_for 60 eval '[ "$(pods_live qnb)" = 1 ]' || fail "r1's pod not made: $(phase_of qnb r1) $(reason_of qnb r1)"
  local pod_uid
  pod_uid=$(kubectl get pods -n qnb -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init -o jsonpath='{.items[*].metadata.uid}')
  wait_for 40 eval '[ "$(kubectl get sbxclaim -n qnb -o jsonpath="{range .items[?(@.spec.state==\"Slot\")]}{.metadata.ownerReferences[0].uid}{end}")" = "$pod_uid" ]' ||
    fail "the slot is not its pod's 40 s after the pod: owners $(kubectl get sbxclaim -n qnb -o jsonpath='{range .items[*]}{.metadata.ownerReferences[*].kind}{end}')"
  controller_stop "$pid"
}

# A resume waits its turn: it arrived when it was resumed, so a Sandbox of
# the owner that was already waiting (created after the resumed one, but
# before its resume) takes the freed slot first; the resume takes the next.
test_o_a_resume_waits_its_turn() {
  new_namespace qo
  quota qo alice alice 1 Queue
  racing_controllers || return
  sandbox qo s1 $IMG ko1 alice >/dev/null
  wait_for 60 bound qo s1 || fail "s1 not bound"
  suspend_and_free qo s1
  sandbox qo r1 $IMG ko2 alice >/dev/null
  wait_for 60 bound qo r1 || fail "r1 not bound"
  sandbox qo r2 $IMG ko3 alice >/dev/null
  wait_for 60 eval '[ "$(reason_of qo r2)" = QuotaWaiting ]' || fail "r2 does not wait: $(reason_of qo r2)"
  sleep 1.2 # the resume arrives in a later second than r2
  set_suspend qo s1 false
  wait_for 60 eval '[ "$(reason_of qo s1)" = QuotaWaiting ]' || fail "the resume of s1 does not wait: $(reason_of qo s1)"
  kubectl delete sbx r1 -n qo >/dev/null
  wait_for 60 bound qo r2 || fail "r2 (waiting before the resume) not bound after r1 went: r2 $(reason_of qo r2), s1 $(phase_of qo s1) $(reason_of qo s1)"
  sleep 3
  expect_eq "$(phase_of qo s1)/$(reason_of qo s1)" Suspended/QuotaWaiting "the resume still waits"
  expect_eq "$(pods_live qo)" 1 "pods"
  kubectl delete sbx r2 -n qo >/dev/null
  wait_for 60 eval '[ "$(phase_of qo s1)" = Running ]' || fail "s1 not resumed after r2 went: $(phase_of qo s1) $(reason_of qo s1)"
  expect_eq "$(pods_live qo)" 1 "pods"
  stop_racing
}

# A resume keeps its place in the line across a restart of the controllers:
# it was resumed (and waited) before r2 was created, so when r1 goes it is
# bound first, though the controllers that bind it started after both.
test_p_a_resume_keeps_its_turn_across_a_restart() {
  new_namespace qp
  quota qp alice alice 1 Queue
  racing_controllers || return
  sandbox qp s1 $IMG kp1 alice >/dev/null
  wait_for 60 bound qp s1 || fail "s1 not bound"
  suspend_and_free qp s1
  sandbox qp r1 $IMG kp2 alice >/dev/null
  wait_for 60 bound qp r1 || fail "r1 not bound"
  set_suspend qp s1 false
  wait_for 60 eval '[ "$(reason_of qp s1)" = QuotaWaiting ]' || fail "the resume of s1 does not wait: $(reason_of qp s1)"
  sleep 1.2 # r2 arrives in a later second than the resume
  sandbox qp r2 $IMG kp3 alice >/dev/null
  wait_for 60 eval '[ "$(reason_of qp r2)" = QuotaWaiting ]' || fail "r2 does not wait: $(reason_of qp r2)"
  stop_racing
  sleep 1.2 # the new controllers start in a later second than r2's creation
  racing_controllers || return
  sleep 3 # both have listed the Sandboxes
  kubectl delete sbx r1 -n qp >/dev/null
  wait_for 60 eval '[ "$(phase_of qp s1)" = Running ]' ||
    fail "s1 (resumed before r2 was created) not resumed after r1 went: s1 $(phase_of qp s1) $(reason_of qp s1), r2 $(reason_of qp r2)"
  sleep 3
  expect_eq "$(reason_of qp r2)" QuotaWaiting "r2 still waits"
  expect_eq "$(pods_live qp)" 1 "pods"
  stop_racing
}

# A resume that took a slot but made no pod (the controller died in
# between) and is suspended again gives the slot back: a Suspended Sandbox
# holds none, so the next Sandbox of its owner is bound, not left waiting.
# resume_dies_at_its_slot NS: in NS (a quota of 1 for alice), s1 bound and
# suspended, then resumed by a controller that dies right after taking the
# resume's slot, before its pod; no controller runs after it.
resume_dies_at_its_slot() {
  local ns=$1 pid point=after-quota-slot
  controller_start "resume-slot-$ns"
  pid=$CTL_PID
  sandbox "$ns" s1 $IMG "k$ns" alice >/dev/null
  wait_for 60 bound "$ns" s1 || fail "s1 not bound"
  suspend_and_free "$ns" s1
  controller_stop "$pid"
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" controller_start "crash-resume-$ns"
  pid=$CTL_PID
  set_suspend "$ns" s1 false
  wait_dead "$pid" 30 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: the controller died without reaching the point"
  expect_eq "$(slots "$ns")/$(pods_live "$ns")" 1/0 "the resume's slot was taken, its pod not made"
}

test_q_a_resume_suspended_before_its_pod_frees_its_slot() {
  new_namespace qq
  quota qq alice alice 1 Queue
  local pid
  resume_dies_at_its_slot qq
  set_suspend qq s1 true
  controller_start after-resume-crash
  pid=$CTL_PID
  wait_for 30 suspended_and_freed qq s1 ||
    fail "s1 suspended again still holds its slot: $(phase_of qq s1), $(slots qq) slots, $(pods_live qq) pods"
  sandbox qq n1 $IMG kq2 alice >/dev/null
  wait_for 30 bound qq n1 || fail "n1 not bound with no one active: $(reason_of qq n1)"
  expect_eq "$(pods_live qq)" 1 "pods"
  controller_stop "$pid"
}

# The same, when the resume ends in its expiry instead (a shutdownTime set
# in the past): an Expired Sandbox is final, so a slot it kept would be held
# for good.
test_r_a_resume_expired_before_its_pod_frees_its_slot() {
  new_namespace qr
  quota qr alice alice 1 Queue
  local pid
  resume_dies_at_its_slot qr
  kubectl patch sbx s1 -n qr --type merge \
    -p "{\"spec\":{\"lifecycle\":{\"shutdownTime\":\"$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%SZ)\"}}}" >/dev/null ||
    fail "setting s1's shutdownTime"
  controller_start after-resume-crash-exp
  pid=$CTL_PID
  wait_for 30 eval '[ "$(phase_of qr s1)" = Expired ] && [ "$(slots qr)" = 0 ]' ||
    fail "s1 expired still holds its slot: $(phase_of qr s1), $(slots qr) slots, $(pods_live qr) pods"
  sandbox qr n1 $IMG kr2 alice >/dev/null
  wait_for 30 bound qr n1 || fail "n1 not bound with no one active: $(reason_of qr n1)"
  controller_stop "$pid"
}

# A resume that cannot run at first for another reason than the quota (here
# its network profile was deleted: NetworkProfileNotFound; naming a profile
# needs the webhook's record) and then waits for a slot still arrives when
# it was resumed, not when it was created: r2, waiting since before the
# resume, is bound first.
test_s_a_resume_held_up_otherwise_arrives_when_resumed() {
  new_namespace qs
  quota qs alice alice 1 Queue
  local pid
  qs_profile() { kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: qs-web}
spec:
  egress: [{cidr: 192.0.2.0/24, ports: [{protocol: TCP, port: 8080}]}]
YAML
  }
  qs_profile || { fail "profile qs-web"; return; }
  E2E_ADMISSION=1 controller_with_webhook
  pid=$CTL_PID
  install_admission "$WEBHOOK_PORT" || { fail "admission not installed"; controller_stop "$pid"; return; }
  kubectl apply -f - >/dev/null <<YAML || fail "create s1"
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: s1, namespace: qs}
spec: {image: $IMG, idempotencyKey: ks1, workspaceOwner: alice, network: {profiles: [qs-web]}}
YAML
  wait_for 60 bound qs s1 || fail "s1 not bound: $(reason_of qs s1)"
  suspend_and_free qs s1
  sandbox qs r1 $IMG ks2 alice >/dev/null
  wait_for 60 bound qs r1 || fail "r1 not bound"
  sandbox qs r2 $IMG ks3 alice >/dev/null
  wait_for 60 eval '[ "$(reason_of qs r2)" = QuotaWaiting ]' || fail "r2 does not wait: $(reason_of qs r2)"
  sleep 1.2 # the resume comes in a later second than r2
  kubectl delete sandboxnetworkprofile qs-web >/dev/null
  set_suspend qs s1 false
  wait_for 60 eval '[ "$(reason_of qs s1)" = NetworkProfileNotFound ]' ||
    fail "the resume of s1 is not held up by its missing profile: $(phase_of qs s1) $(reason_of qs s1)"
  qs_profile || fail "profile qs-web again"
  wait_for 60 eval '[ "$(reason_of qs s1)" = QuotaWaiting ]' || fail "the resume of s1 does not wait: $(reason_of qs s1)"
  kubectl delete sbx r1 -n qs >/dev/null
  wait_for 60 bound qs r2 ||
    fail "r2 (waiting before s1 was resumed) not bound after r1 went: r2 $(reason_of qs r2), s1 $(phase_of qs s1) $(reason_of qs s1)"
  sleep 3
  expect_eq "$(reason_of qs s1)" QuotaWaiting "the resume still waits"
  expect_eq "$(pods_live qs)" 1 "pods"
  uninstall_admission
  controller_stop "$pid"
  kubectl delete sandboxnetworkprofile qs-web >/dev/null 2>&1
}

# A Sandbox that took its owner's only slot and is then held up before its
# pod could be made by something else than its requester's rights (here its
# network profile was deleted: NetworkProfileNotFound) holds no slot
# meanwhile (docs/api.md, "Quota slots"): another Sandbox of the owner is
# bound rather than wait behind it.
test_t_a_sandbox_missing_its_profile_holds_no_slot() {
  new_namespace qt
  quota qt alice alice 1 Queue
  local pid
  kubectl apply -f - >/dev/null <<YAML || { fail "profile qt-web"; return; }
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: qt-web}
spec:
  egress: [{cidr: 192.0.2.0/24, ports: [{protocol: TCP, port: 8080}]}]
YAML
  refuse_pod_creates qt quota-paused-qt "object.spec.containers.all(c, c.image != 'registry.local/paused:1')" \
    "this image is paused"
  E2E_ADMISSION=1 controller_with_webhook
  pid=$CTL_PID
  install_admission "$WEBHOOK_PORT" || { fail "admission not installed"; controller_stop "$pid"; return; }
  sleep 3 # the API server enforces the test policy within a few seconds
  kubectl apply -f - >/dev/null <<YAML || fail "create t1"
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: t1, namespace: qt}
spec: {image: registry.local/paused:1, idempotencyKey: kt1, workspaceOwner: alice, network: {profiles: [qt-web]}}
YAML
  wait_for 30 eval '[ "$(slots qt)" = 1 ] && [ "$(reason_of qt t1)" = Waiting ]' ||
    fail "t1 took no slot: $(slots qt) slots, $(reason_of qt t1)"
  kubectl delete sandboxnetworkprofile qt-web >/dev/null
  wait_for 60 eval '[ "$(reason_of qt t1)" = NetworkProfileNotFound ]' ||
    fail "t1 not held up by its missing profile: $(reason_of qt t1)"
  sandbox qt t2 $IMG kt2 alice >/dev/null
  wait_for 30 bound qt t2 ||
    fail "t2 behind the slot of a Sandbox missing its profile: $(reason_of qt t2), $(slots qt) slots, quota $(jp qt sandboxquota alice '{.status}')"
  expect_eq "$(pods_live qt)" 1 "pods (t2's)"
  expect_eq "$(slots qt)" 1 "slots (t2's)"
  allow_pod_creates quota-paused-qt
  uninstall_admission
  controller_stop "$pid"
}

# A pod whose command ended (Succeeded or Failed: restartPolicy Never, it
# never runs again) is no longer counted (issue 25 counts Pending and
# Running pods): its slot goes and the owner's next waiting Sandbox is
# bound. The slot went only when the pod was deleted, so a finished sandbox
# kept its owner's quota until someone deleted its Sandbox.
test_u_a_finished_pod_frees_its_slot() {
  new_namespace qu
  quota qu alice alice 1 Queue
  racing_controllers || return
  sandbox qu s1 $IMG ku1 alice >/dev/null
  wait_for 60 eval '[ "$(phase_of qu s1)" = Running ]' || fail "s1 not Running: $(phase_of qu s1)"
  sandbox qu s2 $IMG ku2 alice >/dev/null
  wait_for 30 eval '[ "$(reason_of qu s2)" = QuotaWaiting ]' || fail "s2 not waiting for the slot: $(reason_of qu s2)"
  local pod; pod=$(jp qu sandbox s1 '{.status.podName}')
  kubectl patch pod -n qu "$pod" --subresource=status --type merge \
    -p '{"status":{"phase":"Succeeded","conditions":[{"type":"Ready","status":"False"}]}}' >/dev/null ||
    fail "mark $pod Succeeded"
  wait_for 30 eval '[ "$(phase_of qu s2)" = Running ]' ||
    fail "s2 30 s after s1's pod Succeeded: $(reason_of qu s2), s1's pod $(jp qu pod "$pod" '{.status.phase}'), slots $(slots qu)"
  expect_eq "$(slots qu)" 1 "slots once s2 runs"
  stop_racing
}

# live_max FILE: the most warm pods alive at once in a watch's lines
# ("TYPE|NAME|DELETION-TIMESTAMP|PHASE"): a pod lives from its first event
# until it is being deleted, is gone or has finished.
live_max() {
  awk '$1 == "ADDED" || $1 == "MODIFIED" {
         if ($3 == "" && $4 != "Succeeded" && $4 != "Failed") live[$2] = 1; else delete live[$2]
       }
       $1 == "DELETED" { delete live[$2] }
       { n = 0; for (k in live) n++; if (n > max) max = n }
       END { print max + 0 }' FS='|' "$1"
}

# pools_fill_rounds NS ROUNDS: alice's pools p1, p2 and p3 in NS (a quota of
# maxWarm 2 applies) scaled together from 0 to 3 replicas and back, ROUNDS
# times, while a watch records every warm pod event; then the most alive at
# once must be 2. Watched, not polled: an extra lived a moment.
pools_fill_rounds() {
  local ns=$1 rounds=$2 round pool watcher
  kubectl get pods -n "$ns" -l sandbox.dev/pool --watch --output-watch-events \
    -o jsonpath='{.type}|{.object.metadata.name}|{.object.metadata.deletionTimestamp}|{.object.status.phase}{"\n"}' \
    >"$E2E_DIR/$ns.watch" 2>&1 &
  watcher=$!
  for pool in p1 p2 p3; do
    kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: $pool, namespace: $ns}
spec: {replicas: 0, workspaceOwner: alice, template: {image: $IMG}}
YAML
  done
  # scale_all N: the three pools to N replicas, together.
  scale_all() {
    local jobs=() pool
    for pool in p1 p2 p3; do
      kubectl patch swp "$pool" -n "$ns" --type merge -p "{\"spec\":{\"replicas\":$1}}" >/dev/null & jobs+=($!)
    done
    wait "${jobs[@]}"
  }
  for ((round = 1; round <= rounds; round++)); do
    scale_all 3
    wait_for 60 eval '[ "$(warm_count "$ns")" -eq 2 ]' || fail "round $round: warm pods $(warm_count "$ns"), want 2"
    sleep 2
    scale_all 0
    wait_for 60 eval '[ "$(warm_count "$ns")" -eq 0 ]' || fail "round $round: warm pods left at replicas 0: $(warm_count "$ns")"
  done
  kill "$watcher" 2>/dev/null
  echo "  warm pod events watched: $(grep -c . "$E2E_DIR/$ns.watch"); created: $(grep -c '^ADDED|' "$E2E_DIR/$ns.watch")"
  expect_eq "$(live_max "$E2E_DIR/$ns.watch")" 2 "the most warm pods of alice alive at once (maxWarm 2, three pools of 3)"
}

# Two pools of one owner share its maxWarm: the warm pods alive at once
# never pass it when the pools fill together. A pool counted the other
# pools' pods from the cache alone, so while one pool's creates were in
# flight another took the same room, and the extras were deleted once seen.
test_v_pools_of_one_owner_never_pass_max_warm_together() {
  new_namespace qv
  quota qv alice alice - Queue 2
  controller_start quota-v --warm-pool-settle 1s
  local pid=$CTL_PID
  pools_fill_rounds qv 6
  controller_stop "$pid"
}

# The same under racing replicas behind the lossy proxy (no --leader-elect):
# each replica knows only its own creates in flight, so both filled the same
# room. Warm pods now claim warm slots (sbxw-<owner key>-<n>, n < maxWarm),
# whose names the API server creates once.
test_w_racing_replicas_never_pass_max_warm() {
  new_namespace qw
  quota qw alice alice - Queue 2
  racing_controllers --warm-pool-settle 1s || return
  pools_fill_rounds qw 4
  stop_racing
}

warm_slots() { kubectl get sbxclaim -n "$1" -o jsonpath='{range .items[*]}{.spec.state}{"\n"}{end}' | grep -cx WarmSlot; }

# A warm slot taken by a controller that died before it made the pod names a
# pod that never comes: the pool, looking again after the restart, frees it
# once it is older than a create in flight (30 s), and fills. Kept, it would
# hold the owner's only warm slot for good.
test_x_a_warm_slot_whose_pod_never_came_goes() {
  new_namespace qx
  quota qx alice alice - Queue 1
  local point=after-warm-slot pid
  rm -f "$E2E_DIR/once-$point"
  SBX_FAULT_POINTS=$point SBX_FAULT_ONCE_FILE="$E2E_DIR/once-$point" controller_start crash-x --warm-pool-settle 1s
  pid=$CTL_PID
  warm_pool qx 1
  wait_dead "$pid" 30 || { fail "$point: fault point never reached"; controller_stop "$pid"; }
  [ -f "$E2E_DIR/once-$point" ] || fail "$point: the controller died without reaching the point"
  expect_eq "$(warm_slots qx)/$(warm_count qx)" 1/0 "warm slots/warm pods after the crash"
  local orphan
  orphan=$(kubectl get sbxclaim -n qx -o jsonpath='{.items[0].spec.podName}')
  controller_start quota-x --warm-pool-settle 1s
  pid=$CTL_PID
  wait_for 60 eval '[ "$(warm_count qx)" -eq 1 ]' || fail "the pool did not fill after the restart: $(warm_count qx) warm pods, $(warm_slots qx) warm slots"
  expect_eq "$(warm_slots qx)" 1 "warm slots"
  local held
  held=$(kubectl get sbxclaim -n qx -o jsonpath='{.items[*].spec.podName}')
  [ "$held" != "$orphan" ] || fail "the orphan slot (pod $orphan) is still held"
  expect_eq "$(kubectl get pods -n qx -l sandbox.dev/pool -o jsonpath='{.items[*].metadata.name}')" "$held" "the slot names the warm pod"
  controller_stop "$pid"
}

# A warm pod a Sandbox takes is active from then on: the next warm pod takes
# its warm slot over at once, so the pool fills again without waiting for a
# collection.
test_y_the_next_warm_pod_takes_over_a_taken_ones_slot() {
  new_namespace qy
  quota qy alice alice - Queue 1
  controller_start quota-y --warm-pool-settle 1s
  local pid=$CTL_PID first slot_uid
  warm_pool qy 1
  wait_for 60 eval '[ "$(jp qy sandboxwarmpool pool "{.status.readyReplicas}")" = 1 ]' || fail "the pool is not warm"
  first=$(kubectl get pods -n qy -l sandbox.dev/pool -o jsonpath='{.items[0].metadata.name}')
  slot_uid=$(kubectl get sbxclaim -n qy -o jsonpath='{range .items[?(@.spec.state=="WarmSlot")]}{.metadata.uid}{end}')
  sleep 2
  sandbox qy s1 $IMG ky1 alice >/dev/null
  wait_for 30 bound qy s1 || fail "s1 not bound: $(reason_of qy s1)"
  expect_eq "$(jp qy sandbox s1 '{.status.podName}')" "$first" "s1 took the warm pod"
  wait_for 15 eval '[ "$(warm_count qy)" -eq 1 ]' || fail "the pool did not fill again within 15 s: $(warm_count qy) warm pods, $(warm_slots qy) warm slots"
  expect_eq "$(warm_slots qy)" 1 "warm slots"
  expect_eq "$(kubectl get sbxclaim -n qy -o jsonpath='{range .items[?(@.spec.state=="WarmSlot")]}{.spec.podName}{end}')" \
    "$(kubectl get pods -n qy -l sandbox.dev/pool -o jsonpath='{.items[*].metadata.name}')" "the slot names the new warm pod"
  expect_eq "$(kubectl get sbxclaim -n qy -o jsonpath='{range .items[?(@.spec.state=="WarmSlot")]}{.metadata.uid}{end}')" \
    "$slot_uid" "the slot taken over, not made again"
  controller_stop "$pid"
}

# A warm slot whose pod a Sandbox took waits to be taken over; when no pool
# takes it over (its pool was scaled to 0) and the Sandbox's pod ends, the
# slot names a pod gone. Another pool of the owner that needs the name
# collects it: the pool that owns it is idle and would never look again.
# The pools look late (SBX_FAULT_DELAYS=pool-reconcile), so the first pool
# is at 0 before it could take the slot over.
test_z_a_slot_left_by_an_ended_sandbox_goes_to_another_pool() {
  new_namespace qz
  quota qz alice alice - Queue 1
  SBX_FAULT_DELAYS=pool-reconcile=3000 controller_start quota-z --warm-pool-settle 1s
  local pid=$CTL_PID
  warm_pool qz 1
  wait_for 60 eval '[ "$(jp qz sandboxwarmpool pool "{.status.readyReplicas}")" = 1 ]' || fail "the pool is not warm"
  sleep 2
  sandbox qz s1 $IMG kz1 alice >/dev/null
  kubectl patch swp pool -n qz --type merge -p '{"spec":{"replicas":0}}' >/dev/null
  wait_for 30 bound qz s1 || fail "s1 not bound: $(reason_of qz s1)"
  expect_eq "$(jp qz sandbox s1 '{.status.binding}')" Warm "s1 took the warm pod"
  sleep 8 # the pool looks again, at 0: nothing takes the slot over
  expect_eq "$(warm_slots qz)/$(warm_count qz)" 1/0 "warm slots/warm pods with the pool at 0"
  kubectl delete sbx s1 -n qz --wait=false >/dev/null
  wait_for 60 eval '[ "$(pod_count qz)" -eq 0 ]' || fail "s1's pod is still there"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: other, namespace: qz}
spec: {replicas: 1, workspaceOwner: alice, template: {image: $IMG}}
YAML
  wait_for 60 eval '[ "$(warm_count qz)" -eq 1 ]' ||
    fail "the other pool did not fill: $(warm_count qz) warm pods, $(warm_slots qz) warm slots: $(jp qz swp other '{.status.conditions[0].message}')"
  expect_eq "$(warm_slots qz)" 1 "warm slots"
  controller_stop "$pid"
}

setup
e2e_main
