#!/usr/bin/env bash
# The network floor (contract section 9) on the real node, enforced by an
# existing NetworkPolicy implementation: kube-router's network policy
# controller (hack/realnode.sh, SBX_REAL_NODE_ENFORCER=kube-router).
#
# The network rule: every target is a listener of this test. The pods get a
# default route through 10.213.0.254 (SBX_REAL_NODE_GATEWAY), an address of
# the bridge's subnet held by a network namespace this test makes and plugs
# into the bridge; the stand-ins live there (the API server's Service
# address, the controller's webhook and metrics ports on a stand-in pod
# address, 169.254.169.254, 100.100.100.200, a DNS resolver, a profile's
# target and its neighbour), so whatever a sandbox sends off the bridge
# reaches only them. Alice's sandbox and a pod of another namespace listen
# on the bridge itself. Every listener answers with its name and logs who
# called; a target is "reached" when its name comes back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=sbx.local/sandbox:1
NS=team-a
OTHER_NS=elsewhere
GW=10.213.0.254          # the test's network namespace on the bridge (SBX_REAL_NODE_GATEWAY)
CTL_POD=10.213.0.253     # a stand-in for the controller's pod: webhook 9443, metrics 8443
DNS=192.0.2.53           # the test's DNS resolver (network.dns in the controller's config)
WEB=192.0.2.10           # the target of the profile "web" (port 8080)
NEXT=192.0.2.20          # its neighbour, in no profile
E2E_ADMISSION=1
# A listener in a sandbox or a pod: persistent, answers with its name.
listen_cmd() { echo "[sh, -c, \"trap 'exit 0' TERM; nc -ll -p 8080 -e echo $1 & wait\"]"; }

setup() {
  SBX_REAL_NODE=1 SBX_REAL_NODE_ENFORCER=kube-router SBX_REAL_NODE_GATEWAY=$GW cluster_up
  trap 'net_down; e2e_cleanup' EXIT
  API_SVC=$(kubectl get svc kubernetes -n default -o jsonpath='{.spec.clusterIP}')
  net_up || { say "cannot make the test's network namespace"; exit 1; }
  realnode_controller_image || exit 1
  grant_controller_rbac
  new_namespace "$NS" "$E2E_DIR/pv"
  kubectl create namespace "$OTHER_NS" >/dev/null
  local node='  nodeSelector: {node.sandbox.dev/real: "true"}
  tolerations: [{key: node.sandbox.dev/real, operator: Exists, effect: NoSchedule}]'
  cat >"$E2E_DIR/config.yaml" <<YAML
pod:
$node
network:
  dns: [$DNS/32]
  clusterCIDRs: [10.213.0.0/24, 10.0.0.0/24]
YAML
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  controller_start ctl --config "$E2E_DIR/config.yaml" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  wait_for 30 curl -sk -o /dev/null --cert "$E2E_DIR/pki/apiserver-webhook-client.crt" \
    --key "$E2E_DIR/pki/apiserver-webhook-client.key" "https://127.0.0.1:$WEBHOOK_PORT/" ||
    { say "the webhook does not answer: $(tail -5 "$E2E_DIR/ctl.log")"; exit 1; }
  E2E_POLICY_POD_SETTINGS=$REALNODE_POD_SETTINGS # the confinement admits the real node's selector
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice); BOB=$(user_kubeconfig bob)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: agent, namespace: $NS}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [""], resources: [pods], verbs: [get, list]}
  - {apiGroups: [""], resources: [pods/exec], verbs: [get, create]}
  - {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: agents, namespace: $NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: agent}
subjects: [{kind: User, name: alice}, {kind: User, name: bob}]
YAML
  grant_owner "$NS" alice alice
  grant_owner "$NS" bob bob
  sed -i "s/namespace: default/namespace: $NS/" "$ALICE" "$BOB"
  # The listeners on the bridge: alice's sandbox and a pod of another namespace.
  real_sandbox "$ALICE" alice-1 alice "$(listen_cmd alice-sandbox)" >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: listener, namespace: $OTHER_NS}
spec:
  nodeSelector: {node.sandbox.dev/real: "true"}
  tolerations: [{key: node.sandbox.dev/real, operator: Exists, effect: NoSchedule}]
  containers:
  - {name: c, image: $IMG, imagePullPolicy: Never, command: [sh, -c, "trap 'exit 0' TERM; nc -ll -p 8080 -e echo other-namespace & wait"]}
YAML
  real_sandbox "$BOB" bob-1 bob >/dev/null
  ready alice-1 && ready bob-1 || { say "sandboxes not Ready: $(why_not alice-1) / $(why_not bob-1)"; exit 1; }
  kubectl wait --for=condition=Ready pod/listener -n "$OTHER_NS" --timeout=120s >/dev/null ||
    { say "the other namespace's listener is not Ready"; exit 1; }
  ALICE_IP=$(kubectl get pod -n "$NS" "$(pod_of alice-1)" -o jsonpath='{.status.podIP}')
  OTHER_IP=$(kubectl get pod -n "$OTHER_NS" listener -o jsonpath='{.status.podIP}')
  BOB_IP=$(kubectl get pod -n "$NS" "$(pod_of bob-1)" -o jsonpath='{.status.podIP}')
}

# net_up: the network namespace sbxnet<pid> on the bridge at $GW with every
# stand-in address on its loopback and one Python process listening on all
# of them (TCP: answers its name and logs "NAME from SOURCE"; UDP 53 on $DNS:
# an A record $WEB for every name).
net_up() {
  NETNS=sbxnet$$ NET_HOST=sbxnh$$
  ip link show sbxr0 >/dev/null 2>&1 || { ip link add sbxr0 type bridge && ip link set sbxr0 up; } || return 1
  ip netns add "$NETNS" && ip link add "$NET_HOST" type veth peer name sbxnp$$ &&
    ip link set sbxnp$$ netns "$NETNS" && ip link set "$NET_HOST" master sbxr0 && ip link set "$NET_HOST" up &&
    ip -n "$NETNS" addr add "$GW/24" dev sbxnp$$ && ip -n "$NETNS" addr add "$CTL_POD/24" dev sbxnp$$ &&
    ip -n "$NETNS" link set sbxnp$$ up && ip -n "$NETNS" link set lo up || return 1
  local a
  for a in "$API_SVC" 169.254.169.254 100.100.100.200 "$DNS" "$WEB" "$NEXT"; do
    ip -n "$NETNS" addr add "$a/32" dev lo || return 1
  done
  ip netns exec "$NETNS" python3 - "$API_SVC" "$CTL_POD" "$DNS" "$WEB" "$NEXT" >"$E2E_DIR/standins.log" 2>&1 <<'PY' &
import selectors, socket, struct, sys
api, ctl, dns, web, nxt = sys.argv[1:6]
targets = {(api, 443): "api-service", (ctl, 9443): "webhook", (ctl, 8443): "metrics",
           ("169.254.169.254", 80): "metadata-169.254.169.254", ("100.100.100.200", 80): "metadata-100.100.100.200",
           (web, 8080): "profile-web", (nxt, 8080): "profile-neighbour", (dns, 53): "dns-tcp"}
sel = selectors.DefaultSelector()
for addr, name in targets.items():
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr); s.listen(16); s.setblocking(False); sel.register(s, selectors.EVENT_READ, name)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((dns, 53)); sel.register(u, selectors.EVENT_READ, "dns")
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        s, name = key.fileobj, key.data
        if name == "dns":
            q, a = s.recvfrom(512)
            print("dns from", a[0], flush=True)
            if len(q) < 17: continue
            end = q.index(b"\0", 12) + 5  # the question: its name and type and class
            s.sendto(q[:2] + b"\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00" + q[12:end]
                     + b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton(web), a)
            continue
        c, a = s.accept()
        print(name, "from", a[0], flush=True)
        try: c.sendall(name.encode() + b"\n")
        except OSError: pass
        c.close()
PY
  NET_PID=$!
  wait_for 10 grep -q '^ready' "$E2E_DIR/standins.log" || { say "stand-ins: $(cat "$E2E_DIR/standins.log")"; return 1; }
}
net_down() {
  [ -n "${NET_PID:-}" ] && kill "$NET_PID" 2>/dev/null
  [ -n "${NETNS:-}" ] && { ip link del "$NET_HOST" 2>/dev/null; ip netns del "$NETNS" 2>/dev/null; }
  true
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }
# real_sandbox KUBECONFIG NAME OWNER [COMMAND] [PROFILES]: a Sandbox on the
# real node as that user; PROFILES a YAML flow list of profile names.
real_sandbox() {
  as "$1" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: $2, namespace: $NS}
spec:
  image: $IMG
  command: ${4:-[sh, -c, "trap 'exit 0' TERM; sleep infinity & wait"]}
  resources: {requests: {cpu: 50m, memory: 32Mi}, limits: {cpu: 100m, memory: 32Mi}}
  workspaceOwner: $3
$([ -n "${5:-}" ] && echo "  network: {profiles: $5}")
YAML
}
ready() { kubectl wait --for=condition=Ready "sandbox/$1" -n "$NS" --timeout="${2:-120}s" >/dev/null 2>&1; }
pod_of() { jp "$NS" sandbox "$1" '{.status.podName}'; }
why_not() { echo "$(jp "$NS" sandbox "$1" '{.status.conditions}')"; }

# reach KUBECONFIG SANDBOX IP PORT: what the listener at IP:PORT answered the
# sandbox (its name), empty when the connection failed (2 s).
reach() {
  as "$1" exec -n "$NS" "$(pod_of "$2")" -- nc -w 2 "$3" "$4" </dev/null 2>/dev/null | head -c 100
}
# heard NAME IP [FROM_LINE]: the stand-in NAME logged a connection from IP
# (after line FROM_LINE of its log).
heard() { tail -n "+$((${3:-0} + 1))" "$E2E_DIR/standins.log" | grep -qx "$1 from $2"; }

# floor_targets: "NAME IP PORT" of every target of the floor.
floor_targets() {
  cat <<EOF
alice-sandbox $ALICE_IP 8080
other-namespace $OTHER_IP 8080
api-service $API_SVC 443
webhook $CTL_POD 9443
metrics $CTL_POD 8443
metadata-169.254.169.254 169.254.169.254 80
metadata-100.100.100.200 100.100.100.200 80
profile-web $WEB 8080
profile-neighbour $NEXT 8080
EOF
}

# expect_none SANDBOX SANDBOX_IP [SKIP]: SANDBOX (bob's) reaches no floor target
# (except those named in SKIP, a list separated by spaces) and no stand-in
# heard it.
expect_none() {
  local name ip port got from
  from=$(wc -l <"$E2E_DIR/standins.log")
  while read -r name ip port; do
    [[ " ${3:-} " == *" $name "* ]] && continue
    got=$(reach "$BOB" "$1" "$ip" "$port")
    expect_eq "$got" "" "$1 reached $name ($ip:$port)"
    ! heard "$name" "$2" "$from" || fail "the stand-in $name heard $1 ($2)"
  done < <(floor_targets)
}

# The controls: the pod of another namespace (no policy selects it) reaches
# every stand-in, so a target that bob's sandbox does not reach is kept from
# it by the policy, not by a broken route or listener.
test_01_controls() {
  local name ip port got
  while read -r name ip port; do
    [ "$name" = other-namespace ] && continue
    if [ "$name" = alice-sandbox ]; then
      got=$(as "$ALICE" exec -n "$NS" "$(pod_of alice-1)" -- nc -w 2 127.0.0.1 8080 </dev/null 2>/dev/null)
    else
      got=$(kubectl exec -n "$OTHER_NS" listener -- nc -w 2 "$ip" "$port" </dev/null 2>/dev/null)
    fi
    expect_eq "$got" "$name" "the control reaches $name ($ip:$port)"
  done < <(floor_targets)
}

# Bob's sandbox (no profile) reaches none of alice's sandbox, the pod of
# another namespace, the API server's Service address, the webhook and
# metrics ports, either metadata stand-in, nor the profile targets.
test_02_floor() {
  expect_none bob-1 "$BOB_IP"
  # Made once, not written over while nothing changes it.
  expect_eq "$(grep -c 'network floor repaired' "$E2E_DIR/ctl.log")" 0 "floor rewrites in the controller's log"
}

# It resolves names: the test's resolver, where the controller's config says
# the cluster's DNS lives, answers it (and heard it).
test_03_dns() {
  local out
  out=$(as "$BOB" exec -n "$NS" "$(pod_of bob-1)" -- nslookup sandbox.test "$DNS" 2>&1)
  expect_match "$out" "Address:? *$WEB" "bob's sandbox resolves sandbox.test through $DNS"
  wait_for 5 grep -qx "dns from $BOB_IP" "$E2E_DIR/standins.log" || fail "the resolver did not hear bob's sandbox"
}

# A tenant's NetworkPolicy that would select sandbox pods (here: every pod,
# all ingress and egress) is refused at admission, and bob's sandbox still
# reaches none of the targets.
test_04_tenant_policy() {
  local out
  out=$(as "$ALICE" apply -f - 2>&1 <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-everything, namespace: $NS}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
  ingress: [{}]
  egress: [{}]
YAML
)
  expect_match "$out" "denied|forbidden|Forbidden" "alice's allow-everything NetworkPolicy"
  # What the refusal leaves her: policies of her own pods (a label sandbox
  # pods never carry, or sandbox pods excluded), and deny-only ones.
  out=$(as "$ALICE" apply -f - 2>&1 <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-in, namespace: $NS}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: all-but-sandboxes, namespace: $NS}
spec:
  podSelector:
    matchExpressions: [{key: app.kubernetes.io/managed-by, operator: NotIn, values: [sandbox-controller]}]
  egress: [{}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: $NS}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
YAML
)
  expect_eq "$(grep -c created <<<"$out")" 3 "alice's policies that do not widen a sandbox ($out)"
  # Selecting sandbox pods by their name label, or writing the floor.
  out=$(as "$ALICE" apply -f - 2>&1 <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sandboxes-out, namespace: $NS}
spec:
  podSelector: {matchLabels: {app.kubernetes.io/name: sandbox}}
  egress: [{}]
YAML
)
  expect_match "$out" "denied|forbidden|Forbidden" "alice's policy selecting app.kubernetes.io/name=sandbox"
  out=$(as "$ALICE" delete networkpolicy -n "$NS" sandbox-floor 2>&1)
  expect_match "$out" "denied|forbidden|Forbidden" "alice deleting the floor"
  # Enforcers apply a new policy within seconds: give it the time it would take.
  kubectl get networkpolicy -n "$NS" allow-everything >/dev/null 2>&1 && sleep 5
  expect_none bob-1 "$BOB_IP"
  kubectl delete networkpolicy -n "$NS" allow-everything web-in all-but-sandboxes deny-all sandboxes-out \
    --ignore-not-found >/dev/null 2>&1
}

# Enforcement verified, not assumed (network.verify): the controller's probe
# (two pods of its image in sandbox-system, a port of the one denied to the
# other by ingress rules alone, another by egress rules alone) reports
# NetworkPolicyEnforced=True on the Sandboxes and the gauges 1 within a
# minute of start; with one direction let through by an admin's policy (as a
# plugin enforcing the other direction alone would), False/NotEnforced, 0 and
# words naming that direction, the other's gauge still 1; with the enforcer
# stopped, both; with network.requireEnforced, a new Sandbox gets no pod until
# enforcement is verified again.
test_05_enforcement_verified() {
  cat "$E2E_DIR/config.yaml" - >"$E2E_DIR/verify-config.yaml" <<YAML
  verify: true
  verifyNamespace: sandbox-system
  verifyInterval: 15s
YAML
  sed 's/^  verifyInterval: 15s$/  verifyInterval: 15s\n  requireEnforced: true/' "$E2E_DIR/verify-config.yaml" >"$E2E_DIR/require-config.yaml"
  ctl_restart "$E2E_DIR/verify-config.yaml" || return
  wait_for 60 enforced_is 1 || fail "sandbox_network_policy_enforced after a minute: '$(enforced)', want 1 ($(grep -i probed "$E2E_DIR/ctl.log" | tail -2))"
  wait_for 20 net_condition_is bob-1 True Verified || fail "bob-1's NetworkPolicyEnforced: $(net_condition bob-1)"
  expect_eq "$(directions)" 1/1 "sandbox_network_policy_direction_enforced ingress/egress"
  one_direction_open egress '{podSelector: {matchLabels: {sandbox.dev/netprobe: client}}, policyTypes: [Egress], egress: [{}]}' 1/0
  one_direction_open ingress '{podSelector: {matchLabels: {sandbox.dev/netprobe: target}}, policyTypes: [Ingress], ingress: [{}]}' 0/1
  "$E2E_ROOT/hack/cluster.sh" realnode-enforcer "$E2E_DIR" stop || { fail "cannot stop the enforcer"; return; }
  wait_for 90 enforced_is 0 || fail "sandbox_network_policy_enforced with the enforcer stopped: '$(enforced)', want 0"
  wait_for 20 net_condition_is bob-1 False NotEnforced || fail "bob-1's NetworkPolicyEnforced: $(net_condition bob-1)"
  expect_eq "$(directions)" 0/0 "sandbox_network_policy_direction_enforced ingress/egress with the enforcer stopped"
  expect_match "$(net_message bob-1)" "neither on ingress nor on egress" "bob-1's NetworkPolicyEnforced message"
  ctl_restart "$E2E_DIR/require-config.yaml" || return
  real_sandbox "$BOB" bob-2 bob >/dev/null || fail "cannot create bob-2"
  wait_for 60 enforced_is 0 || fail "not probed again: '$(enforced)'"
  sleep 3
  expect_eq "$(pod_of bob-2)" "" "bob-2's pod while enforcement is not verified (requireEnforced)"
  expect_match "$(jp "$NS" sandbox bob-2 '{.status.conditions}')" "requireEnforced" "what bob-2 says"
  "$E2E_ROOT/hack/cluster.sh" realnode-enforcer "$E2E_DIR" start || { fail "cannot start the enforcer"; return; }
  wait_for 90 enforced_is 1 || fail "not verified after the enforcer's start: '$(enforced)'"
  ready bob-2 90 || fail "bob-2 not Ready once enforcement is verified: $(why_not bob-2)"
  as "$BOB" delete sandbox -n "$NS" bob-2 --wait=false >/dev/null 2>&1
  ctl_restart "$E2E_DIR/config.yaml"
}
# Allow profiles (issue 24 item 2): the operator's SandboxNetworkProfiles
# "web" (the stand-in $WEB:8080 only), "open" (0.0.0.0/0, every port) and
# "secret"; bob may use web, open and "gone" (which does not exist), not
# secret. His sandbox with web reaches web's stand-in and nothing else of the
# targets; with open it reaches web and its neighbour (outside every floor
# range) and still none of the floor: the profile's policy excepts every
# range of it. Naming secret, or gone, is refused at admission, naming the
# profile; a profile deleted after admission leaves the Sandbox without a
# pod (Bound=False/NetworkProfileNotFound). Their policies go with the pods.
test_06_profiles() {
  local out ip_web ip_open
  out=$(kubectl apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: web}
spec:
  egress: [{cidr: $WEB/32, ports: [{protocol: TCP, port: 8080}]}]
---
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: open}
spec:
  egress: [{cidr: 0.0.0.0/0}]
---
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: secret}
spec:
  egress: [{cidr: $NEXT/32}]
---
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: later}
spec:
  egress: [{cidr: $NEXT/32}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: profile-users}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxnetworkprofiles], resourceNames: [web, open, gone, later], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: profile-users}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: profile-users}
subjects: [{kind: User, name: bob}]
YAML
)
  [ $? -eq 0 ] || { fail "the profiles and bob's right to use them: $out"; return; }
  # A profile the CRD refuses: a domain name, a CIDR with host bits.
  out=$(kubectl apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: SandboxNetworkProfile
metadata: {name: bad}
spec:
  egress: [{cidr: example.com}, {cidr: 10.1.2.3/8}]
YAML
)
  expect_match "$out" "Invalid|invalid" "a profile with a domain name and a CIDR with host bits"
  out=$(real_sandbox "$BOB" bob-secret bob "" "[secret]")
  expect_match "$out" "denied|forbidden|Forbidden" "bob's Sandbox naming secret"
  expect_match "$out" "secret" "the refusal names the profile"
  expect_match "$out" "use" "the refusal names the permission"
  expect_eq "$(jp "$NS" sandbox bob-secret '{.metadata.name}')" "" "bob-secret stored"
  out=$(real_sandbox "$BOB" bob-gone bob "" "[gone]")
  expect_match "$out" "denied|forbidden|Forbidden|not exist|not found" "bob's Sandbox naming a profile that does not exist"
  expect_match "$out" "gone" "the refusal names the missing profile"
  out=$(real_sandbox "$BOB" bob-web bob "" "[web]") || fail "bob-web: $out"
  out=$(real_sandbox "$BOB" bob-open bob "" "[open]") || fail "bob-open: $out"
  ready bob-web && ready bob-open || { fail "not Ready: $(why_not bob-web) / $(why_not bob-open)"; return; }
  ip_web=$(kubectl get pod -n "$NS" "$(pod_of bob-web)" -o jsonpath='{.status.podIP}')
  ip_open=$(kubectl get pod -n "$NS" "$(pod_of bob-open)" -o jsonpath='{.status.podIP}')
  # Enforcers apply a new policy within seconds: wait for the allowed target.
  wait_for 20 reaches bob-web "$WEB" 8080 profile-web || fail "bob-web does not reach web ($WEB:8080)"
  expect_none bob-web "$ip_web" profile-web
  wait_for 20 reaches bob-open "$WEB" 8080 profile-web || fail "bob-open does not reach web ($WEB:8080)"
  expect_eq "$(reach "$BOB" bob-open "$NEXT" 8080)" profile-neighbour "bob-open reaches $NEXT:8080 (0.0.0.0/0)"
  expect_none bob-open "$ip_open" "profile-web profile-neighbour"
  # Resolving names still works with a profile.
  out=$(as "$BOB" exec -n "$NS" "$(pod_of bob-open)" -- nslookup sandbox.test "$DNS" 2>&1)
  expect_match "$out" "Address:? *$WEB" "bob-open resolves sandbox.test"
  # A profile deleted after admission: no pod, Bound=False with the reason.
  out=$(as "$BOB" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: bob-later, namespace: $NS}
spec:
  image: $IMG
  command: [sh, -c, "trap 'exit 0' TERM; sleep infinity & wait"]
  resources: {requests: {cpu: 50m, memory: 32Mi}, limits: {cpu: 100m, memory: 32Mi}}
  workspaceOwner: bob
  network: {profiles: [later]}
  lifecycle: {suspend: true}
YAML
) || fail "bob-later: $out"
  kubectl delete sandboxnetworkprofile later >/dev/null 2>&1 || fail "cannot delete the profile later"
  as "$BOB" patch sandbox -n "$NS" bob-later --type merge -p '{"spec":{"lifecycle":{"suspend":false}}}' >/dev/null 2>&1 ||
    fail "cannot resume bob-later"
  wait_for 30 bound_reason_is bob-later NetworkProfileNotFound ||
    fail "bob-later's Bound without its profile: $(why_not bob-later)"
  expect_eq "$(kubectl get pod -n "$NS" -o jsonpath='{range .items[*]}{.metadata.ownerReferences[*].name}{"\n"}{end}' | grep -cw bob-later)" 0 "bob-later's pods"
  # The profiles' policies go with their pods.
  as "$BOB" delete sandbox -n "$NS" bob-web bob-open bob-later --wait=true >/dev/null 2>&1
  wait_for 60 no_profile_policies || fail "profile policies stay without their pods: $(kubectl get networkpolicy -n "$NS" -o name)"
}
# reaches SANDBOX IP PORT NAME: bob's SANDBOX gets NAME from IP:PORT.
reaches() { [ "$(reach "$BOB" "$1" "$2" "$3")" = "$4" ]; }
bound_reason_is() { [ "$(jp "$NS" sandbox "$1" '{.status.conditions[?(@.type=="Bound")].reason}')" = "$2" ]; }
no_profile_policies() { ! kubectl get networkpolicy -n "$NS" -o name 2>/dev/null | grep -q 'sandbox-profiles-'; }
# ctl_restart CONFIG: the controller again with CONFIG, its metrics on $MPORT.
ctl_restart() {
  controller_stop "$CTL_PID"
  MPORT=$(free_port)
  controller_start ctl --config "$1" --metrics-bind-address "127.0.0.1:$MPORT" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  wait_for 30 curl -sf -o /dev/null "http://127.0.0.1:$MPORT/metrics" ||
    { fail "the controller did not start with $1: $(tail -3 "$E2E_DIR/ctl.log")"; return 1; }
  # The webhook serves only once the caches synced, after /metrics: a
  # Sandbox created before it is refused (failurePolicy Fail).
  wait_for 30 curl -sk -o /dev/null --cert "$E2E_DIR/pki/apiserver-webhook-client.crt" \
    --key "$E2E_DIR/pki/apiserver-webhook-client.key" "https://127.0.0.1:$WEBHOOK_PORT/" ||
    { fail "the webhook does not answer after the restart with $1"; return 1; }
}
enforced() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk '$1 == "sandbox_network_policy_enforced" {print $2}'; }
enforced_is() { [ "$(enforced)" = "$1" ]; }
# directions: sandbox_network_policy_direction_enforced, "INGRESS/EGRESS".
directions() {
  curl -s "http://127.0.0.1:$MPORT/metrics" | awk '
    $1 == "sandbox_network_policy_direction_enforced{direction=\"ingress\"}" {i = $2}
    $1 == "sandbox_network_policy_direction_enforced{direction=\"egress\"}" {e = $2}
    END {print i "/" e}'
}
net_message() { jp "$NS" sandbox "$1" '{.status.conditions[?(@.type=="NetworkPolicyEnforced")].message}'; }
net_message_has() { [[ "$(net_message "$1")" == *"$2"* ]]; }
# one_direction_open DIRECTION SPEC GAUGES: with the admin's policy SPEC (of
# the probe's pods, in sandbox-system) letting DIRECTION through, the probe
# says DIRECTION is not enforced (the gauge 0, the directions' gauges GAUGES,
# bob-1's condition False naming it); enforced again once it is gone.
one_direction_open() {
  kubectl apply -f - >/dev/null <<YAML || { fail "the admin's policy opening $1"; return; }
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: probe-$1-open, namespace: sandbox-system}
spec: $2
YAML
  wait_for 90 enforced_is 0 || fail "sandbox_network_policy_enforced with $1 let through: '$(enforced)', want 0"
  wait_for 20 net_message_has bob-1 "does not enforce NetworkPolicy on $1" ||
    fail "bob-1's NetworkPolicyEnforced with $1 let through: $(net_condition bob-1) '$(net_message bob-1)'"
  expect_eq "$(net_condition bob-1)" False/NotEnforced "bob-1's NetworkPolicyEnforced with $1 let through"
  expect_eq "$(directions)" "$3" "sandbox_network_policy_direction_enforced ingress/egress with $1 let through"
  grep -q "NetworkPolicy enforcement probed\".*\"$1\":\"not_enforced\"" "$E2E_DIR/ctl.log" ||
    fail "the log does not name $1: $(grep -i probed "$E2E_DIR/ctl.log" | tail -1)"
  kubectl delete networkpolicy -n sandbox-system "probe-$1-open" >/dev/null || fail "cannot delete probe-$1-open"
  wait_for 90 enforced_is 1 || fail "not verified again once $1 is no longer let through: '$(enforced)'"
}
net_condition() { jp "$NS" sandbox "$1" '{.status.conditions[?(@.type=="NetworkPolicyEnforced")].status}/{.status.conditions[?(@.type=="NetworkPolicyEnforced")].reason}'; }
net_condition_is() { [ "$(net_condition "$1")" = "$2/$3" ]; }

# The floor's objects: the controller's own, repaired if changed, gone with
# the last sandbox pod of the namespace.
test_09_policy_objects() {
  local pod np
  pod=$(pod_of bob-1)
  np=$(kubectl get networkpolicy -n "$NS" -l app.kubernetes.io/managed-by=sandbox-controller -o name 2>/dev/null | head -1)
  [ -n "$np" ] || { fail "no NetworkPolicy of the controller in $NS"; return; }
  kubectl patch -n "$NS" "$np" --type=json -p '[{"op":"replace","path":"/spec/egress","value":[{}]}]' >/dev/null 2>&1 ||
    { fail "cannot change $np as the cluster admin"; return; }
  wait_for 30 egress_is_not_open "$np" || fail "$np was not repaired: $(kubectl get -n "$NS" "$np" -o jsonpath='{.spec.egress}')"
  expect_none bob-1 "$BOB_IP"
  # Gone with the last pod of the namespace.
  real_sandbox "$ALICE" gone-1 alice >/dev/null && ready gone-1 || { fail "gone-1 not Ready"; return; }
  as "$ALICE" delete sandbox -n "$NS" alice-1 gone-1 --wait=true >/dev/null 2>&1
  as "$BOB" delete sandbox -n "$NS" bob-1 --wait=true >/dev/null 2>&1
  wait_for 60 no_policies || fail "the controller's NetworkPolicies stay without sandbox pods: $(kubectl get networkpolicy -n "$NS" -o name)"
}
egress_is_not_open() { [ "$(kubectl get -n "$NS" "$1" -o jsonpath='{.spec.egress}')" != '[{}]' ]; }
no_policies() { [ -z "$(kubectl get networkpolicy -n "$NS" -l app.kubernetes.io/managed-by=sandbox-controller -o name 2>/dev/null)" ]; }

setup
e2e_main
