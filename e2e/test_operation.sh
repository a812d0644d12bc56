#!/usr/bin/env bash
# End-to-end: running the controller as an operator would: leader election
# with failover and release, probes, metrics, clean shutdown.
. "$(dirname "$0")/lib.sh"

IMG=registry.local/agent:1.0

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace ops
  grant_controller_leases ops
}


# le_start NAME: a controller with leader election and known probe/metrics ports.
le_start() {
  local name=$1 mp pp
  mp=$(free_port); pp=$(free_port)
  "$CONTROLLER_BIN" --kubeconfig "$E2E_DIR/controller.kubeconfig" --seal-key-file "$E2E_DIR/seal.key" \
    --metrics-bind-address "127.0.0.1:$mp" --health-probe-bind-address "127.0.0.1:$pp" \
    --leader-elect --leader-election-namespace ops --owner-authorization namespace >>"$E2E_DIR/$name.log" 2>&1 &
  CTL_PID=$!
  disown "$CTL_PID"
  track_pid "$CTL_PID"
  eval "${name}_pid=$CTL_PID ${name}_metrics=$mp ${name}_probes=$pp"
}

logged() { grep -q "$2" "$E2E_DIR/$1.log"; }

test_leader_election_failover_and_release() {
  le_start a
  wait_for 20 logged a '"became leader"' || fail "a never became leader"
  le_start b
  sleep 3
  expect_fail logged b '"became leader"'
  sandbox ops s1 $IMG k1 alice >/dev/null
  wait_for 30 bound ops s1 || fail "s1 not bound by the leader"
  expect_eq "$(grep -c '"pod created"' "$E2E_DIR/b.log")" 0 "the follower reconciled"
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$b_probes/healthz")" 200 "follower healthz"
  # The leader dies without releasing: the follower takes over after the lease runs out.
  kill -KILL "$a_pid"
  local t0=$SECONDS
  wait_for 40 logged b '"became leader"' || fail "b never took over"
  say "  failover after SIGKILL took $((SECONDS - t0)) s (lease 15 s)"
  sandbox ops s2 $IMG k2 alice >/dev/null
  wait_for 30 bound ops s2 || fail "s2 not bound after failover"
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$b_probes/readyz")" 200 "leader readyz"
  local m
  m=$(curl -s "http://127.0.0.1:$b_metrics/metrics")
  expect_match "$m" "sandbox_pods_created_total [1-9]" "metrics count the pod b created"
  expect_match "$m" "sandbox_kube_requests_total [1-9]" "metrics count API requests"
  # A clean SIGTERM releases the lease, so the next replica does not wait it out.
  le_start c
  controller_stop "$b_pid" || fail "b did not stop within 10 s of SIGTERM"
  expect_ok logged b '"released leadership"'
  t0=$SECONDS
  wait_for 10 logged c '"became leader"' || fail "c did not take over a released lease quickly"
  say "  takeover of a released lease took $((SECONDS - t0)) s"
  expect_eq "$(kubectl get lease -n ops sandbox-controller-leader -o jsonpath='{.spec.leaseTransitions}')" 2 "lease transitions"
}

# Two listeners given one port: the controller says so and stops, rather than
# letting them split the connections (CI saw /healthz answer 404 from the
# metrics listener when the follower's two ports came out equal).
test_one_port_for_two_listeners_refused() {
  local p pid
  p=$(free_port)
  "$CONTROLLER_BIN" --kubeconfig "$E2E_DIR/controller.kubeconfig" --seal-key-file "$E2E_DIR/seal.key" \
    --metrics-bind-address "127.0.0.1:$p" --health-probe-bind-address "127.0.0.1:$p" \
    --owner-authorization namespace >"$E2E_DIR/same-port.log" 2>&1 &
  pid=$!
  wait_dead "$pid" 20 || { kill -KILL "$pid"; fail "the controller kept running with one port for two listeners"; }
  wait "$pid" && fail "the controller exited 0 with one port for two listeners"
  expect_ok grep -q '"cannot start a listener".*port is in use' "$E2E_DIR/same-port.log"
}

setup
e2e_main
