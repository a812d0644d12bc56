#!/usr/bin/env bash
# End-to-end: the conformance table (clients/conformance.yaml, issue 26) run
# by all three clients on the local control plane with the admission webhook
# in force: the Go helper (clients/go/sandbox), the Python client and the
# kubectl plugin, each in a namespace of its own, as the identities alice and
# bob, and through a fault proxy of its own that loses answers. The harness
# steps of the table (precreate, check) are e2e/conformance.py's, the same
# for every driver. Then the apply-configuration round trip of the Go module:
# server-side apply of a Sandbox, then of its lifecycle alone by another field
# manager (clients/go/internal/applycheck).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

E2E_ADMISSION=1
TABLE=$E2E_ROOT/clients/conformance.yaml
DRIVERS=(go python plugin)

setup() {
  export PATH="$PATH:/usr/local/go/bin"
  # The Go driver and the round trip, built before the cluster starts (the
  # module cache and build cache are the machine's).
  local t0=$SECONDS
  mkdir -p "$BUILD_DIR/conformance"
  (cd "$E2E_ROOT/clients/go" && go build -buildvcs=false -o "$BUILD_DIR/conformance/" ./internal/conformance ./internal/applycheck) ||
    { say "cannot build the Go driver"; exit 1; }
  say "Go driver built in $((SECONDS - t0)) s"
  cluster_up
  grant_controller_rbac
  controller_with_webhook
  local d ns
  for d in "${DRIVERS[@]}" apply team-a; do
    ns=conf-$d
    [ "$d" = team-a ] && ns=team-a # the README's example
    kubectl create namespace "$ns" >/dev/null
    kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: agent, namespace: $ns}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agents, namespace: $ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: agent}
subjects: [{kind: User, name: alice}, {kind: User, name: bob}]
YAML
    grant_owner "$ns" alice alice
    grant_owner "$ns" bob bob
  done
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  export CONFORMANCE_KUBECONFIG_alice CONFORMANCE_KUBECONFIG_bob
  CONFORMANCE_KUBECONFIG_alice=$(user_kubeconfig alice)
  CONFORMANCE_KUBECONFIG_bob=$(user_kubeconfig bob)
  # Each driver's lossy path: a fault proxy of its own, so its cuts count.
  # The Go client multiplexes every request and watch over one HTTP/2
  # connection, so each roll cuts them all: it loses 3 answers in 10, the
  # others one in 2 (at one in 2 the Go driver's 4 lossy creates took 108 s;
  # at 3 in 10 the Python client's 4 creates saw a single cut, and at one in
  # 2 they took 65 to 112 s: the table has 3).
  local proxy="$BUILD_DIR/faultproxy" port
  [ -x "$proxy" ] || { say "faultproxy not built ($proxy)"; exit 1; }
  port=$(sed -n 's/^APISERVER_PORT=//p' "$E2E_DIR/state")
  local drop
  for d in "${DRIVERS[@]}"; do
    drop=0.5; [ "$d" = go ] && drop=0.3
    "$proxy" -upstream "127.0.0.1:$port" -drop "$drop" -seed 26 -port-file "$E2E_DIR/proxy-$d.port" \
      >"$E2E_DIR/proxy-$d.log" 2>&1 &
    track_pid "$!"
    disown $!
    wait_for 10 test -s "$E2E_DIR/proxy-$d.port" || { say "fault proxy did not start"; exit 1; }
    sed "s#https://127.0.0.1:$port#https://127.0.0.1:$(cat "$E2E_DIR/proxy-$d.port")#" \
      "$CONFORMANCE_KUBECONFIG_alice" >"$E2E_DIR/alice-lossy-$d.kubeconfig"
  done
  install_python_client || exit 1
}

# conformance DRIVER: runs the table with DRIVER in namespace conf-DRIVER.
conformance() {
  local d=$1 ns=conf-$1 rc out="$E2E_DIR/conformance-$1.out"
  export CONFORMANCE_KUBECONFIG_alice_lossy="$E2E_DIR/alice-lossy-$d.kubeconfig"
  local harness=("$E2E_DIR/venv/bin/python" "$E2E_ROOT/e2e/conformance.py" harness "$TABLE" "$ns")
  local t0=$SECONDS
  if [ "$d" = go ]; then
    "$BUILD_DIR/conformance/conformance" "$TABLE" "$ns" "${harness[@]}" >"$out" 2>"$out.err"
  else
    "$E2E_DIR/venv/bin/python" "$E2E_ROOT/e2e/conformance.py" run "$d" "$TABLE" "$ns" >"$out" 2>"$out.err"
  fi
  rc=$?
  sed 's/^/  /' "$out" >&2
  say "  $d: the table in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || fail "$d: $(grep -m1 '^FAIL' "$out" || tail -3 "$out.err")"
  expect_match "$(tail -1 "$out")" "^$d: [0-9]+ passed, 0 failed$" "$d: summary"
  expect_eq "$(grep -c '^PASS' "$out")" "$(python3 -c 'import sys, yaml; print(len(yaml.safe_load(open(sys.argv[1]))["cases"]))' "$TABLE")" \
    "$d: cases passed"
  local cuts
  cuts=$(grep -c 'cut connection' "$E2E_DIR/proxy-$d.log")
  say "  $d: the fault proxy cut $cuts answers"
  [ "$cuts" -ge 1 ] || fail "$d: the fault proxy cut no answer: the lossy creates proved nothing"
}

test_conformance_go() { conformance go; }
test_conformance_python() { conformance python; }
test_conformance_plugin() { conformance plugin; }

# The apply configurations against the real API server: a whole Sandbox by
# one field manager, its lifecycle alone by another (suspend, resume), the
# first manager's re-apply leaving the lifecycle alone.
test_apply_configuration_round_trip() {
  local out
  out=$(KUBECONFIG=$CONFORMANCE_KUBECONFIG_alice "$BUILD_DIR/conformance/applycheck" conf-apply ssa alice 2>&1)
  local rc=$?
  sed 's/^/  /' <<<"$out" >&2
  expect_eq "$rc" 0 "applycheck exit code"
  expect_match "$out" 'resumed on the same pod sbx-[0-9a-f]{32}; round trip done' "round trip"
  expect_eq "$(jp conf-apply sandbox ssa '{.spec.lifecycle.suspend}')" false "the lifecycle as applied last"
  expect_eq "$(kubectl get sbx -n conf-apply --no-headers | wc -l)" 1 "one Sandbox"
}

# The README's Go example (the same block in README.md and
# clients/go/README.md), built as a user builds it: a module of its own that
# requires both modules through replace lines, run as alice to a Ready sandbox.
test_readme_go_example() {
  local dir=$E2E_DIR/readme-example out
  mkdir -p "$dir"
  python3 - "$E2E_ROOT/README.md" "$E2E_ROOT/clients/go/README.md" >"$dir/main.go" <<'PY' || { fail "no Go example"; return; }
import re, sys
blocks = []
for f in sys.argv[1:]:
    m = re.search(r"```go\n(package main\n.*?)```", open(f).read(), re.S)
    if not m:
        sys.exit(f"{f}: no Go example")
    blocks.append(m.group(1))
if blocks[0] != blocks[1]:
    sys.exit("the Go examples of README.md and clients/go/README.md differ")
print(blocks[0], end="")
PY
  cat >"$dir/go.mod" <<MOD
module example.com/readme

go 1.25.0

require (
	sandbox.dev/api v0.0.0
	sandbox.dev/client-go v0.0.0
)

replace sandbox.dev/api => $E2E_ROOT/clients/go/api

replace sandbox.dev/client-go => $E2E_ROOT/clients/go
MOD
  (cd "$dir" && GOFLAGS=-mod=mod go mod tidy >"$dir/build.log" 2>&1 && go build -o readme . >>"$dir/build.log" 2>&1) ||
    { fail "the README's example does not build: $(tail -5 "$dir/build.log")"; return; }
  say "  the example: $(awk '/^import \(/,/log.Printf/' "$dir/main.go" | grep -c .) lines from import to the Ready sandbox"
  out=$(cd "$dir" && KUBECONFIG=$CONFORMANCE_KUBECONFIG_alice timeout 120 ./readme 2>&1)
  say "  $out"
  expect_match "$out" 'is Ready on pod sbx-[0-9a-f]{32}$' "the example's output"
  expect_eq "$(jp team-a sandbox "$(sed -n 's/.* \(sandbox-[0-9a-f]*\) is Ready.*/\1/p' <<<"$out")" '{.spec.idempotencyKey}')" \
    task-42 "the example's Sandbox"
}

setup
e2e_main
