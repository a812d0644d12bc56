#!/usr/bin/env bash
# Two replicas as deployed (the manifests' ServiceAccount and RBAC, in-cluster
# config, --leader-elect with the Lease in sandbox-system): both Ready
# (/readyz 200 on the leader AND the standby, as controller-runtime: readiness
# never depends on the lease, so a two-replica Deployment can roll), and a
# SIGKILL of the leader while Sandboxes keep arriving loses none of them.
. "$(dirname "$0")/lib.sh"
export SBX_E2E_IDENTITY=serviceaccount
IMG=registry.local/agent:1.0

# replica NAME: a controller with leader election (its Lease in sandbox-system,
# the namespace file's) and a known probe port in NAME_probes.
replica() {
  local pp
  pp=$(free_port)
  controller_start "$1" --leader-elect --health-probe-bind-address "127.0.0.1:$pp"
  eval "${1}_pid=$CTL_PID ${1}_probes=$pp"
}
readyz() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/readyz")" = 200 ]; }
leader_of() { grep -l '"became leader"' "$E2E_DIR/ha_a.log" "$E2E_DIR/ha_b.log" 2>/dev/null | head -1; }
has_leader() { [ -n "$(leader_of)" ]; }

test_ready_standby_and_failover() {
  kubectl create namespace ha >/dev/null
  replica ha_a
  replica ha_b
  # polled: "$(leader_of)" as an argument would be evaluated once, before the election
  wait_for 30 has_leader || { fail "no leader"; return; }
  expect_eq "$(kubectl get lease -n sandbox-system sandbox-controller-leader -o jsonpath='{.spec.leaseDurationSeconds}')" 15
  wait_for 60 readyz "$ha_a_probes" || fail "replica a not Ready"
  wait_for 60 readyz "$ha_b_probes" || fail "replica b not Ready"
  local lead standby lead_pid standby_probes
  if [ "$(leader_of)" = "$E2E_DIR/ha_a.log" ]; then
    lead=ha_a standby=ha_b lead_pid=$ha_a_pid standby_probes=$ha_b_probes
  else
    lead=ha_b standby=ha_a lead_pid=$ha_b_pid standby_probes=$ha_a_probes
  fi
  say "  leader $lead, standby $standby"
  local i
  for i in $(seq 1 20); do sandbox ha before-$i $IMG "k-$i" >/dev/null; done
  wait_for 60 bound_count_is ha 20 || fail "20 before failover: $(count_bound ha) bound"
  # The leader dies without releasing its Lease; Sandboxes keep arriving.
  kill -KILL "$lead_pid"
  local t0=$SECONDS
  for i in $(seq 1 20); do sandbox ha after-$i $IMG "k-after-$i" >/dev/null; done
  wait_for 90 bound_count_is ha 40 || fail "after failover: $(count_bound ha) of 40 bound"
  say "  all 40 bound $((SECONDS - t0)) s after the leader's SIGKILL (lease 15 s)"
  expect_ok grep -q '"became leader"' "$E2E_DIR/$standby.log"
  expect_eq "$(kubectl get sbx -n ha --no-headers | wc -l)" 40 "no Sandbox lost"
  expect_eq "$(pod_count ha)" 40 "one pod each"
  readyz "$standby_probes" || fail "the new leader is not Ready"
}

# A standby replica's keeper must leave the floors the leader makes alone: it
# sees a new namespace's floor before the pods under it (its pod watch held
# 3 s behind, SBX_FAULT_DELAYS) and must not take it away from them.
floor_uid() { kubectl get networkpolicy -n "$1" sandbox-floor -o jsonpath='{.metadata.uid}' 2>/dev/null; }
test_standby_keeps_the_leaders_floor() {
  if ! has_leader; then
    replica ha_a
    wait_for 30 has_leader || { fail "no leader"; return; }
  fi
  SBX_FAULT_DELAYS=watch:pods=3000 replica ha_s
  wait_for 60 readyz "$ha_s_probes" || { fail "the standby is not Ready"; return; }
  kubectl create namespace ha2 >/dev/null
  sandbox ha2 f-1 $IMG k-f1 >/dev/null
  wait_for 60 bound ha2 f-1 || { fail "f-1 not bound"; return; }
  wait_for 10 floor_uid ha2 || { fail "no floor in ha2"; return; }
  local uid
  uid=$(floor_uid ha2)
  sleep 8 # the standby's pod event comes 3 s late; its keeper looks every second
  expect_eq "$(floor_uid ha2)" "$uid" "ha2's floor, the standby looking on"
  expect_eq "$(grep -c 'network floor removed' "$E2E_DIR/ha_s.log")" 0 "floors the standby removed"
}

cluster_up
grant_controller_rbac || exit 1
e2e_main
