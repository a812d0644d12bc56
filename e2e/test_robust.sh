#!/usr/bin/env bash
# End-to-end: no tenant and no fault breaks the controller (issue 8 items 2, 3,
# 5 and 9): generation gaps, tenant-sized objects, a pod admission that always
# fails, a policy that refuses pods for a while.
. "$(dirname "$0")/lib.sh"

IMG=registry.local/agent:1.0

setup() {
  cluster_up
  grant_controller_rbac
}


# ctl NAME [flags...]: a controller with known ports: NAME_pid, NAME_metrics, NAME_probes.
ctl() {
  local name=$1 mp pp; shift
  mp=$(free_port); pp=$(free_port)
  controller_start "$name" --metrics-bind-address "127.0.0.1:$mp" --health-probe-bind-address "127.0.0.1:$pp" "$@"
  eval "${name}_pid=$CTL_PID ${name}_metrics=$mp ${name}_probes=$pp"
}

# metric PORT NAME...: the sum of every series of the first NAME the
# controller exports (so a renamed counter, e.g. controller-runtime's, works); 0 before it has any.
metric() {
  local port=$1 n out; shift
  out=$(curl -s "http://127.0.0.1:$port/metrics")
  for n in "$@"; do
    if grep -qE "^$n(\{| )" <<<"$out"; then
      awk -v n="$n" '$1 == n || index($1, n "{") == 1 {s += $NF} END {printf "%d\n", s}' <<<"$out"
      return
    fi
  done
  echo 0 # no series yet: nothing counted so far
}
requests() { metric "$1" sandbox_kube_requests_total rest_client_requests_total; }
readyz() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" = 200 ]; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
pod_of() { jp "$1" sandbox "$2" '{.status.podName}'; }
bound_reason() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}'; }
bound_message() { jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].message}'; }
pod_gone() { ! kubectl get pod -n "$1" "$2" >/dev/null 2>&1; }

# Item 2: with sbx-<d> deleted and sbx-<d>-1 alive, a new Sandbox with the same
# key and spec adopts -1; the gap at sbx-<d> is never refilled.
test_generation_gap() {
  local life=30
  new_namespace gen
  ctl gen --key-lifetime $life
  sandbox gen a $IMG gap-key alice >/dev/null
  wait_for 30 bound gen a || fail "a not bound"
  local d0; d0=$(pod_of gen a)
  sleep $((life + 1))
  sandbox gen b $IMG gap-key alice >/dev/null
  wait_for 30 bound gen b || fail "b not bound"
  expect_eq "$(pod_of gen b)" "$d0-1" "b gets the next generation"
  kubectl delete sandbox -n gen a --wait=false >/dev/null
  wait_for 30 pod_gone gen "$d0" || { say "  the garbage collector is slow; deleting $d0"; delete_pod gen "$d0" 30; }
  sandbox gen c $IMG gap-key alice >/dev/null
  wait_for 30 bound gen c || fail "c not bound"
  expect_eq "$(pod_of gen c)" "$d0-1" "c adopts the newest live generation"
  expect_eq "$(jp gen sandbox c '{.status.binding}')" Adopted
  sleep 2
  expect_ok pod_gone gen "$d0"
  controller_stop "$gen_pid"
}

# by_code PORT: every "method code count" of the controller's requests so far.
by_code() {
  curl -s "http://127.0.0.1:$1/metrics" |
    awk '$1 ~ /^rest_client_requests_total\{/ { m = $1; sub(/.*method="/, "", m); sub(/".*/, "", m)
      c = $1; sub(/.*code="/, "", c); sub(/".*/, "", c); print m, c, $NF }'
}
# requests_by METHOD PORT: the controller's requests with that method so far.
requests_by() { by_code "$2" | awk -v m="$1" '$1 == m {s += $3} END {printf "%d\n", s}'; }
# codes_by METHOD PORT: the controller's requests with that method so far, by
# answer ("201:40 409:1"), for a failure message to say which were extra.
codes_by() {
  by_code "$2" | awk -v m="$1" '$1 == m {n[$2] += $3} END { for (c in n) printf "%s:%d ", c, n[c]; print "" }'
}
# since BEFORE AFTER: the requests of AFTER (by_code) not in BEFORE, as
# "GET 200:3 POST 500:12 ..." (for a figure to say what it counts).
since() {
  awk 'NR == FNR { n[$1 " " $2] = $3; next } { d = $3 - n[$1 " " $2]; if (d > 0) printf "%s %s:%d ", $1, $2, d }
    END { print "" }' <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}
# apply_sandboxes NS N NAME OWNER KEY: Sandboxes NS/NAME1..NAMEN in one apply
# (a burst, so pods and status writes race in the caches); OWNER and KEY
# (the idempotency key's prefix) "-" for none.
apply_sandboxes() {
  local ns=$1 n=$2 name=$3 owner=$4 key=$5 i spec
  for i in $(seq 1 "$n"); do
    spec="image: $IMG"
    [ "$key" = - ] || spec+=", idempotencyKey: $key$i"
    [ "$owner" = - ] || spec+=", workspaceOwner: $owner"
    printf -- '---\napiVersion: sandbox.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: %s%d, namespace: %s}\nspec: {%s}\n' \
      "$name" "$i" "$ns" "$spec"
  done | kubectl apply -f - >/dev/null
}
count_ready() {
  kubectl get sbx -n "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c '^True$'
}
reconciled_since() { [ "$(metric "$1" controller_runtime_reconcile_total)" -gt "$2" ]; } # PORT COUNT
# settled PORT: nothing queued and no reconcile for a second, so what earlier
# tests left in other namespaces (a Sandbox still to be marked Ready) is done
# before this controller's requests are counted.
settled() {
  local r; r=$(metric "$1" controller_runtime_reconcile_total)
  [ "$(metric "$1" workqueue_depth)" -eq 0 ] && sleep 1 &&
    [ "$(metric "$1" controller_runtime_reconcile_total)" -eq "$r" ] && [ "$(metric "$1" workqueue_depth)" -eq 0 ]
}
ready_count_is() { [ "$(count_ready "$1")" -eq "$2" ]; }
# verdict_count_is NS PREFIX N: N Sandboxes of NS carry a NetworkPolicyEnforced
# message starting with PREFIX.
verdict_count_is() {
  [ "$(kubectl get sbx -n "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="NetworkPolicyEnforced")].message}{"\n"}{end}' |
    grep -c "^$2")" -eq "$3" ]
}
probed() { [ "$(metric "$1" sandbox_network_verifications_total)" -gt 0 ]; } # PORT: a probe round ended
versions() { kubectl get sbx -n "$1" -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}'; }

# Issue 10 item 2: a new Sandbox costs its pod, its event and two status
# writes; no read of the API while the caches are current and the key lifetime
# is long (the default), and the live read of the key's generations still
# happens with a short lifetime (where a lagging cache could miss one).
# It runs first (test_a_): the counts are the controller's across the
# cluster, and the other tests leave Sandboxes with timers of their own (the
# generation gap's keys live 30 s and fall due in this test's window).
test_a_requests_per_new_sandbox() {
  local n=20 i
  new_namespace rq
  ctl rq
  wait_for 30 readyz "$rq_probes" || fail "not ready"
  wait_for 30 settled "$rq_metrics" || fail "the controller did not settle on the existing Sandboxes"
  local g0 p0 pa0 r0 c0; g0=$(requests_by GET "$rq_metrics") p0=$(requests_by POST "$rq_metrics") pa0=$(requests_by PATCH "$rq_metrics")
  c0=$(codes_by POST "$rq_metrics")
  r0=$(metric "$rq_metrics" controller_runtime_reconcile_total)
  apply_sandboxes rq $n s alice rq-key-
  wait_for 60 ready_count_is rq $n || fail "not all $n Ready: $(count_ready rq)"
  sleep 2
  local g p pa; g=$(($(requests_by GET "$rq_metrics") - g0)) p=$(($(requests_by POST "$rq_metrics") - p0))
  pa=$(($(requests_by PATCH "$rq_metrics") - pa0))
  local r; r=$(($(metric "$rq_metrics" controller_runtime_reconcile_total) - r0))
  say "  $n new Sandboxes at defaults: GET $g, POST $p (by answer, counted since the start: $(codes_by POST "$rq_metrics")), PATCH $pa; $r reconciles"
  # These are alice's first Sandboxes in rq: each waits once for her folders'
  # preparation (controller/sandbox/wsprep.h), parked and then woken by the
  # preparation pod's event, one reconcile more each (82-86 in all before it).
  [ "$r" -le $((6 * n)) ] || fail "$r reconciles for $n new Sandboxes (want at most $((6 * n)))"
  # A pod change the reconcile does not read (the scheduler's binding, an
  # annotation of someone else's) queues nothing; a change to the Sandbox does.
  r0=$(metric "$rq_metrics" controller_runtime_reconcile_total)
  kubectl annotate pod -n rq "$(jp rq sandbox s1 '{.status.podName}')" example.com/note=unrelated >/dev/null
  sleep 2
  expect_eq "$(($(metric "$rq_metrics" controller_runtime_reconcile_total) - r0))" 0 "reconciles after an unrelated pod annotation"
  kubectl annotate sandbox -n rq s1 example.com/note=x >/dev/null
  wait_for 10 reconciled_since "$rq_metrics" "$r0" || fail "a changed Sandbox was not reconciled"
  [ "$g" -le 1 ] || fail "$g GETs for $n new Sandboxes (want none; 1 allowed for a watch reconnect)"
  # ... and once per namespace and owner, the pod that prepares the owner's
  # folders (controller/sandbox/wsprep.h), and once per namespace its network
  # floor (controller/sandbox/netfloor.h).
  expect_eq "$p" $((2 * n + 2)) "POSTs (a pod and an event each, alice's folders' preparation pod, the namespace's network floor; by answer before $c0, after $(codes_by POST "$rq_metrics"))"
  # Two status writes each (Bound, then Ready); in some runs one Sandbox of
  # the burst gets a third (seen: 41 for 20, with 1 GET; cause not found yet,
  # see CHANGELOG): more than two extra is a regression.
  [ "$pa" -ge $((2 * n)) ] && [ "$pa" -le $((2 * n + 2)) ] ||
    fail "PATCHes (Bound, then Ready): got '$pa', want $((2 * n)) (at most $((2 * n + 2)))"
  controller_stop "$rq_pid"

  ctl rq2 --key-lifetime 60
  wait_for 30 readyz "$rq2_probes" || fail "not ready"
  g0=$(requests_by GET "$rq2_metrics")
  for i in $(seq 1 5); do sandbox rq "t$i" $IMG "rq-short-$i" alice >/dev/null; done
  wait_for 60 ready_count_is rq $((n + 5)) || fail "not all Ready: $(count_ready rq)"
  g=$(($(requests_by GET "$rq2_metrics") - g0))
  say "  5 new Sandboxes with a 60 s key lifetime: GET $g"
  [ "$g" -ge 5 ] || fail "a short key lifetime must keep the live read of the generations: $g GETs for 5"
  controller_stop "$rq2_pid"
}

# answered CODE CODES: how many of CODES (codes_by's "201:40 409:1") were answered CODE.
answered() { tr ' ' '\n' <<<"$2" | awk -F: -v c="$1" '$1 == c {n = $2} END {printf "%d\n", n}'; }

# failed_writes NAME: the last requests other than GETs the controller NAME
# (run with --log-level debug) saw fail, and its warnings of failed writes,
# as "METHOD PATH STATUS; ..." (for a failure message to say what went wrong).
failed_writes() {
  grep -hE '"msg":"(kube request failed|status write failed|creating pod failed|keeping the network floor failed|cannot write event)"' \
    "$E2E_DIR/$1.log" | grep -v '"method":"GET"' | tail -n 4 |
    python3 -c 'import json, sys
for l in sys.stdin:
    try: o = json.loads(l)
    except ValueError: continue
    print(o.get("method", ""), o.get("path", o.get("sandbox", "")), o.get("status", o.get("error", ""))[:80], end="; ")'
}

# burst_posts NS DELAY OWNER WANT WHAT: a controller with the fault delay
# DELAY (name=ms, SBX_FAULT_DELAYS) reconciles 8 Sandboxes of OWNER ("-":
# ownerless) applied at once in the new namespace NS: no POST is answered 409
# (already exists), and WANT POSTs in all (WHAT says which).
burst_posts() {
  local ns=$1 delay=$2 owner=$3 want=$4 what=$5 n=8
  new_namespace "$ns"
  SBX_FAULT_DELAYS=$delay ctl "$ns" --log-level debug
  local mp=${ns}_metrics pp=${ns}_probes pid=${ns}_pid
  wait_for 30 readyz "${!pp}" || fail "not ready"
  wait_for 30 settled "${!mp}" || fail "the controller did not settle on the existing Sandboxes"
  local c0 p0; c0=$(codes_by POST "${!mp}") p0=$(requests_by POST "${!mp}")
  apply_sandboxes "$ns" $n "$ns" "$owner" -
  wait_for 60 ready_count_is "$ns" $n || fail "not all $n Ready: $(count_ready "$ns")"
  sleep 2
  local c1 p; c1=$(codes_by POST "${!mp}") p=$(($(requests_by POST "${!mp}") - p0))
  say "  $n Sandboxes of owner $owner at once in a new namespace, $delay: POST $p (by answer before $c0, after $c1)"
  # The first failure is all the run's summary keeps: it names the total
  # and the requests that failed (a 409 follows a failed write, or is one).
  expect_eq "$(($(answered 409 "$c1") - $(answered 409 "$c0")))" 0 \
    "POSTs answered 409 (already exists; POSTs $p of $want; failed: $(failed_writes "$ns"))"
  expect_eq "$p" "$want" "POSTs ($what)"
  controller_stop "${!pid}"
}

# A namespace's network floor is written once, however many of its first
# Sandboxes are reconciled at once: a reconcile (or the keeper) that finds the
# write under way in this process waits for it rather than sending its own,
# which would only be answered 409 (CI, test_a: 43 POSTs for 42). The write is
# held 1.5 s so that the burst's reconciles all find it under way; ownerless
# Sandboxes wait for no folder preparation.
test_b_one_floor_write_per_namespace() {
  burst_posts fl policy-write=1500 - 17 "a pod and an event each, the namespace's network floor"
}

# An owner's folders are prepared by one pod, made once, however many of the
# owner's first Sandboxes are reconciled at once: of the workers that find no
# preparation pod at the same moment, one creates it and the others wait (CI,
# test_a: 43 POSTs for 42). The moment between the look and the claim is
# held 0.5 s so that the burst's workers all look at once.
test_c_one_preparation_per_owner() {
  burst_posts pr prep-look=500 bob 18 "a pod and an event each, bob's folders' preparation pod, the namespace's network floor"
}

# A controller that starts (a restart, a new leader) on Sandboxes it finds
# as they should be writes none of them: before its NetworkPolicy probe's
# first round ends, a Sandbox keeps the verdict the last controller wrote
# (not "not verified yet" and then the verdict again: two status writes per
# Sandbox on every restart, 20,000 for 10,000 Sandboxes), and after it, the
# same verdict writes nothing.
test_d_restart_writes_no_status() {
  local n=10
  new_namespace rst
  ctl rst1
  wait_for 30 readyz "$rst1_probes" || fail "not ready"
  apply_sandboxes rst $n s alice rst-key-
  wait_for 60 ready_count_is rst $n || fail "not all $n Ready: $(count_ready rst)"
  wait_for 30 verdict_count_is rst "no verdict:" $n || fail "the probe's verdict is not on every Sandbox"
  wait_for 30 settled "$rst1_metrics" || fail "the first controller did not settle"
  local before after; before=$(versions rst)
  controller_stop "$rst1_pid"
  ctl rst2
  wait_for 30 readyz "$rst2_probes" || fail "not ready after the restart"
  wait_for 30 probed "$rst2_metrics" || fail "the restarted controller's probe ended no round"
  wait_for 30 settled "$rst2_metrics" || fail "the restarted controller did not settle"
  after=$(versions rst)
  say "  a restart on $n Sandboxes: $(requests_by PATCH "$rst2_metrics") PATCHes in all (other namespaces' too)"
  expect_eq "$after" "$before" "the Sandboxes' resourceVersions across a restart (a status write changes one)"
  controller_stop "$rst2_pid"
}

# A status write that fails once the pod is made (a 5xx, a webhook, a lost
# answer) leaves the Sandbox unbound, and its next reconcile comes at once.
# It must find the pod the first one made, not send the create again: with
# the pod cache behind (here 3 s, watch-add:pods), a claim that trusted the
# cache's "no pod of this digest" POSTed it again, answered 409 (seen once in
# CI as test_b's 409). A policy refuses the namespace's status writes until
# the controller has failed two of them.
test_e_a_failed_status_write_posts_no_second_pod() {
  new_namespace sw
  sandbox sw s1 $IMG >/dev/null
  REFUSE_RULE='{apiGroups: [sandbox.dev], apiVersions: ["*"], operations: [UPDATE], resources: [sandboxes/status]}' \
    refuse_requests sw sw-status false "e2e: status writes refused for a while"
  refused() { ! kubectl patch sbx -n sw s1 --subresource=status --type=merge -p '{"status":{"phase":"Pending"}}' --dry-run=server >/dev/null 2>&1; }
  wait_for 30 refused || fail "the policy refusing status writes is not enforced"
  SBX_FAULT_DELAYS=watch-add:pods=3000 ctl sw --log-level debug
  status_failures() { [ "$(grep -c '"msg":"status write failed".*"namespace":"sw"' "$E2E_DIR/sw.log")" -ge 2 ]; }
  wait_for 30 status_failures || fail "the controller's status writes were not refused twice"
  sleep 4 # the pod cache has caught up: nothing more to race
  allow_pod_creates sw-status
  wait_for 30 bound sw s1 || fail "s1 not bound once its status may be written"
  local conflicts
  conflicts=$(grep '"msg":"kube request failed"' "$E2E_DIR/sw.log" | grep '"method":"POST"' | grep -c '/namespaces/sw/pods.*"status":"409"')
  say "  one Sandbox whose status writes failed twice, its pod cache 3 s behind: $conflicts pod POSTs answered 409; failed: $(failed_writes sw)"
  expect_eq "$conflicts" 0 "pod creates answered 409 (already exists) after a failed status write"
  expect_eq "$(pod_count sw)" 1 "pods of sw"
  controller_stop "$sw_pid"
}

# Item 5: a pod create that always fails with 500 (a webhook that cannot be
# reached, failurePolicy Fail) is retried with a per-Sandbox backoff, counted,
# logged and reported, and does not slow another namespace.
test_retry_storm() {
  new_namespace storm-a
  new_namespace storm-b
  kubectl label namespace storm-a robust-e2e=broken-webhook >/dev/null
  local closed; closed=$(free_port)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: robust-broken}
webhooks:
- name: broken.robust.e2e
  clientConfig: {url: "https://127.0.0.1:$closed/validate"}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  namespaceSelector: {matchLabels: {robust-e2e: broken-webhook}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 2
YAML
  sleep 2
  ctl storm
  wait_for 30 readyz "$storm_probes" || fail "controller not ready"
  local s0; s0=$(by_code "$storm_metrics")
  wait_for 30 settled "$storm_metrics" || fail "the controller did not settle on the existing Sandboxes"
  say "  settling on what earlier tests left: $(since "$s0" "$(by_code "$storm_metrics")")"
  local r0 t0 r1 t1 c0
  r0=$(requests "$storm_metrics") c0=$(by_code "$storm_metrics"); t0=$SECONDS
  sandbox storm-a doomed $IMG storm-key alice >/dev/null
  wait_for 20 has_reason storm-a doomed Waiting || fail "no Bound=False/Waiting on the failing Sandbox"
  expect_match "$(bound_message storm-a doomed)" "failed calling webhook" "the API's message is on the Sandbox"
  # Another namespace is served at once.
  sandbox storm-b fine $IMG storm-key alice >/dev/null
  wait_for 10 bound storm-b fine || fail "a Sandbox in another namespace was delayed"
  sleep $((60 - (SECONDS - t0)))
  r1=$(requests "$storm_metrics"); t1=$SECONDS
  local rate
  rate=$(python3 -c "print(round(($r1 - $r0) / ($t1 - $t0), 2))")
  say "  API requests/s with one Sandbox whose pod create always fails, over the first minute: $rate ($((r1 - r0)) requests in $((t1 - t0)) s: $(since "$c0" "$(by_code "$storm_metrics")"))"
  expect_ok python3 -c "import sys; sys.exit(0 if $rate < 2.0 else 1)"
  local errs; errs=$(metric "$storm_metrics" sandbox_reconcile_errors_total controller_runtime_reconcile_errors_total)
  expect_ok test "${errs:-0}" -gt 0
  expect_ok grep -q '"creating pod failed"' "$E2E_DIR/storm.log"
  expect_eq "$(pod_count storm-a)" 0 "no pod in the broken namespace"
  kubectl delete validatingwebhookconfiguration robust-broken >/dev/null
  controller_stop "$storm_pid"
}

# Item 9: a pod refused by a policy (a ValidatingAdmissionPolicy answers 422)
# is Waiting and retried, not Rejected for good; once the policy goes, it binds.
test_policy_denial_is_waiting() {
  new_namespace vap
  refuse_pod_creates vap robust-no-sandboxes "!has(object.metadata.labels) || !('sandbox.dev/scope-digest' in object.metadata.labels)" \
    "sandbox pods are paused in this namespace"
  sleep 3
  ctl vap
  sandbox vap held $IMG vap-key alice >/dev/null
  wait_for 30 has_reason vap held Waiting || fail "a policy denial is not Bound=False/Waiting (got '$(bound_reason vap held)')"
  expect_match "$(bound_message vap held)" "paused in this namespace" "the policy's message is on the Sandbox"
  expect_ne "$(jp vap sandbox held '{.status.phase}')" Rejected "a policy denial is not final"
  allow_pod_creates robust-no-sandboxes
  wait_for 60 bound vap held || fail "the Sandbox did not bind after the policy was removed"
  wait_for 60 ready_count_is vap 1 || fail "the Sandbox did not become Ready after the policy was removed"
  controller_stop "$vap_pid"
}

# Item 3: 80 Sandboxes with ~240 KB annotations from a user who may only use
# Sandboxes (the LIST is bigger than the 16 MiB body cap), and 200 pods anyone
# labelled managed-by with 250 KB annotations.
test_tenant_sized_objects() {
  new_namespace big
  new_namespace other
  kubectl create role sbx-only -n big --verb=create,get,list --resource=sandboxes.sandbox.dev >/dev/null
  kubectl create rolebinding sbx-only -n big --role=sbx-only --user=tenant >/dev/null
  local tkc; tkc=$(user_kubeconfig tenant)
  python3 - "$E2E_DIR/big-sandboxes.json" <<'PY'
import json, sys
pad = "x" * (240 * 1024)
items = [{"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
          "metadata": {"name": "big-%02d" % i, "namespace": "big", "annotations": {"tenant.example/blob": pad}},
          "spec": {"image": "registry.local/agent:1.0", "idempotencyKey": "big"}} for i in range(80)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"))
PY
  kubectl --kubeconfig "$tkc" create -f "$E2E_DIR/big-sandboxes.json" >/dev/null || fail "the tenant could not create the Sandboxes"
  expect_eq "$(kubectl get sbx -n big --no-headers | wc -l)" 80 "Sandboxes created"
  ctl big
  wait_for 90 readyz "$big_probes" || fail "/readyz is not 200 with 80 tenant-sized Sandboxes"
  sandbox other small $IMG small-key alice >/dev/null
  wait_for 60 bound other small || fail "another tenant's Sandbox is not bound"
  wait_for 90 bound_count_is big 80 || fail "the tenant-sized Sandboxes are not all bound ($(count_bound big))"
  kill -0 "$big_pid" 2>/dev/null || fail "the controller exited"

  new_namespace foreign
  sleep 2
  local base; base=$(rss_kib "$big_pid")
  python3 - "$E2E_DIR/foreign-pods.json" <<'PY'
import json, sys
pad = "x" * (250 * 1024)
items = [{"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": "foreign-%03d" % i, "namespace": "foreign",
                       "labels": {"app.kubernetes.io/managed-by": "sandbox-controller"},
                       "annotations": {"tenant.example/blob": pad}},
          "spec": {"containers": [{"name": "c", "image": "registry.local/x:1"}]}} for i in range(200)]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[1], "w"))
PY
  kubectl create -f "$E2E_DIR/foreign-pods.json" >/dev/null || fail "foreign pods not created"
  sleep 5
  sandbox other small2 $IMG small-key-2 alice >/dev/null
  wait_for 60 bound other small2 || fail "not bound after the foreign pods"
  local after; after=$(rss_kib "$big_pid")
  say "  controller RSS: $((base / 1024)) MiB before 200 foreign 250 KB pods, $((after / 1024)) MiB after"
  expect_ok test $((after - base)) -lt $((10 * 1024))
  # A restart lists everything again.
  controller_stop "$big_pid"
  ctl big2
  wait_for 90 readyz "$big2_probes" || fail "/readyz is not 200 after a restart"
  sandbox other small3 $IMG small-key-3 alice >/dev/null
  wait_for 60 bound other small3 || fail "not bound after a restart"
  say "  controller RSS after a restart with all of it: $(($(rss_kib "$big2_pid") / 1024)) MiB"
  controller_stop "$big2_pid"
}

setup
e2e_main
