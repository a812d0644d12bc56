#!/usr/bin/env bash
# The controller as deployed: the ServiceAccount sandbox-system/sandbox-controller
# with ONLY the RBAC of manifests/rbac, a token from the TokenRequest API, the
# in-cluster file layout (token, ca.crt, namespace) and KUBERNETES_SERVICE_HOST/
# PORT. Proves least privilege with `kubectl auth can-i` and with the token
# itself, and that the controller works in-cluster with nothing more. The
# admission policies of manifests/webhook/ are installed for that identity:
# where RBAC cannot narrow a right (pods in every namespace), they do.
# (Two replicas as deployed: e2e/test_ha.sh.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"
export SBX_E2E_IDENTITY=serviceaccount
SA=system:serviceaccount:sandbox-system:sandbox-controller
IMG=registry.local/agent:1.0

setup() {
  cluster_up
  grant_controller_rbac || exit 1
  new_namespace dep
  install_policies "$SA" || exit 1
}

as_sa() { kubectl auth can-i --as="$SA" "$@" 2>/dev/null; }
# with_token ARGS...: kubectl with the controller's own token and nothing else.
with_token() {
  local port
  port=$(sed -n 's/^APISERVER_PORT=//p' "$E2E_DIR/state")
  kubectl --kubeconfig=/dev/null --server="https://127.0.0.1:$port" \
    --certificate-authority="$E2E_DIR/serviceaccount/ca.crt" --token="$(cat "$E2E_DIR/serviceaccount/token")" "$@"
}

test_1_least_privilege() {
  expect_eq "$(as_sa update leases -n sandbox-system)" yes
  expect_eq "$(as_sa create leases -n sandbox-system)" yes
  local ns
  for ns in kube-system kube-node-lease default dep; do
    expect_eq "$(as_sa update leases -n $ns)" no "update Leases in $ns"
    expect_eq "$(as_sa create leases -n $ns)" no "create Leases in $ns"
  done
  # The seal key is the mounted file (kubelet reads the Secret); the
  # controller never asks the API for it, so a leaked token cannot either.
  expect_eq "$(as_sa get secrets/sandbox-controller-seal -n sandbox-system)" no "read the seal Secret through the API"
  # Warm pods name their pool with blockOwnerDeletion (clusters enforcing
  # OwnerReferencesPermissionEnforcement ask for the finalizers right).
  expect_eq "$(as_sa update sandboxwarmpools.sandbox.dev --subresource=finalizers -n dep)" yes "update pools' finalizers"
  expect_eq "$(as_sa get secrets/other -n sandbox-system)" no "read another Secret"
  expect_eq "$(as_sa list secrets -n sandbox-system)" no "list Secrets"
  expect_eq "$(as_sa get secrets -n kube-system)" no
  # Pods anywhere: RBAC cannot narrow them by name, the confinement policy
  # does (the token's requests below).
  expect_eq "$(as_sa delete pods -n dep)" yes "delete pods (confined by admission)"
  expect_eq "$(as_sa deletecollection pods -n dep)" no
  expect_eq "$(as_sa create pods -n dep)" yes
  local sub
  for sub in status binding ephemeralcontainers eviction exec; do
    expect_eq "$(as_sa create pods --subresource=$sub -n dep)" no "create pods/$sub"
    expect_eq "$(as_sa patch pods --subresource=$sub -n dep)" no "patch pods/$sub"
  done
  expect_eq "$(as_sa update sandboxes.sandbox.dev -n dep)" no "update Sandbox specs"
  expect_eq "$(as_sa delete sandboxes.sandbox.dev -n dep)" yes "delete Sandboxes (shutdownPolicy Delete)"
  expect_eq "$(as_sa patch sandboxes.sandbox.dev --subresource=status -n dep)" yes
  expect_eq "$(as_sa patch validatingwebhookconfigurations/sandbox-controller)" yes
  expect_eq "$(as_sa patch mutatingwebhookconfigurations/sandbox-controller)" yes
  expect_eq "$(as_sa patch validatingwebhookconfigurations/other)" no "patch another webhook configuration"
  expect_eq "$(as_sa list validatingwebhookconfigurations)" no "list webhook configurations"
  expect_eq "$(as_sa create validatingadmissionpolicies.admissionregistration.k8s.io)" no "create admission policies"
  # The token itself (not impersonation): who it is, and what it cannot do.
  expect_match "$(with_token auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1)" "^$SA\$" "token identity"
  expect_eq "$(with_token auth can-i update leases -n kube-system 2>/dev/null)" no
  expect_eq "$(with_token auth can-i get secrets/other -n sandbox-system 2>/dev/null)" no
  expect_fail with_token get secrets -n sandbox-system
  # Through the real API server, with the token: its own sandbox pods only.
  kubectl run victim -n dep --image=$IMG --restart=Never >/dev/null
  local out
  out=$(with_token create -f - 2>&1 <<<"$(sandbox_pod_json sbx-dep-1 dep)") || fail "the token could not create a sandbox pod: $out"
  out=$(with_token label pod sbx-dep-1 -n dep example.com/bound=yes 2>&1) || fail "the token could not label its sandbox pod: $out"
  out=$(with_token delete pod sbx-dep-1 -n dep --wait=false 2>&1) || fail "the token could not delete its sandbox pod: $out"
  out=$(with_token delete pod victim -n dep --wait=false 2>&1) && fail "the token deleted another pod: $out"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "delete of another pod"
  out=$(with_token label pod victim -n dep example.com/x=y 2>&1) && fail "the token labelled another pod: $out"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "patch of another pod"
  out=$(with_token run other -n dep --image=$IMG --restart=Never 2>&1) && fail "the token created a pod not named sbx-: $out"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "create of another pod"
  out=$(with_token create -f - 2>&1 <<<"$(sandbox_pod_json sbx-dep-2 kube-system "p['spec']['serviceAccountName'] = 'generic-garbage-collector'")") &&
    fail "the token created a pod with another ServiceAccount in kube-system: $out"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "a pod with another ServiceAccount"
  kubectl delete pod victim -n dep --wait=false >/dev/null
}

# flow_dispatched [SCHEMA]: requests the API server dispatched in the
# install's FlowSchema SCHEMA (default sandbox-controller;
# manifests/webhook/flowcontrol.yaml).
flow_dispatched() {
  kubectl get --raw /metrics |
    series_sum apiserver_flowcontrol_dispatched_requests_total "flow_schema=\"${1:-sandbox-controller}\""
}

test_2_runs_in_cluster() {
  kubectl apply -f "$E2E_ROOT/manifests/webhook/flowcontrol.yaml" >/dev/null || fail "apply flowcontrol.yaml"
  local before
  before=$(flow_dispatched)
  controller_start solo
  local c=$CTL_PID
  sandbox dep solo-1 $IMG solo-key >/dev/null
  wait_for 60 bound dep solo-1 || fail "not bound under the ServiceAccount: $(jp dep sandbox solo-1 '{.status}')"
  # the install's FlowSchema matches the ServiceAccount: its requests have a level of their own
  [ "$(flow_dispatched)" -gt "$before" ] || fail "no request of the controller in the FlowSchema sandbox-controller ($before before, $(flow_dispatched) after)"
  local port
  port=$(sed -n 's/^APISERVER_PORT=//p' "$E2E_DIR/state")
  expect_ok grep -q "\"server\":\"https://127.0.0.1:$port\"" "$E2E_DIR/solo.log"
  expect_fail grep -q '"level":"error"' "$E2E_DIR/solo.log"
  controller_stop "$c"
}

# /metrics as the manifests serve it (--metrics-secure): HTTPS, and only for a
# token the API server authenticates and authorizes for get /metrics.
# metrics_certs DIR: a serving pair for 127.0.0.1 in DIR (tls.crt, tls.key),
# signed by the cluster's CA ($E2E_DIR/pki).
metrics_certs() {
  local d=$1 p=$E2E_DIR/pki
  mkdir -p "$d"
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/tls.key" 2>/dev/null
  openssl req -new -key "$d/tls.key" -subj "/CN=sandbox-controller-metrics" -out "$d/tls.csr" 2>/dev/null
  printf 'extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' >"$d/ext"
  openssl x509 -req -in "$d/tls.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 1 \
    -extfile "$d/ext" -out "$d/tls.crt" 2>/dev/null
}

test_3_metrics_secure() {
  local d=$E2E_DIR/metrics-certs p=$E2E_DIR/pki
  metrics_certs "$d"
  local mp
  mp=$(free_port)
  controller_start metrics --metrics-bind-address "127.0.0.1:$mp" --metrics-cert-path "$d" --metrics-secure
  local c=$CTL_PID
  kubectl create serviceaccount scraper -n dep >/dev/null
  kubectl create serviceaccount nobody -n dep >/dev/null
  kubectl create clusterrolebinding e2e-scraper --clusterrole=sandbox-controller-metrics-reader \
    --serviceaccount=dep:scraper >/dev/null
  local good bad
  good=$(kubectl create token scraper -n dep)
  bad=$(kubectl create token nobody -n dep)
  code() { curl -s -o "$E2E_DIR/metrics.out" -w '%{http_code}' --max-time 5 --cacert "$p/ca.crt" "$@" "https://127.0.0.1:$mp/metrics"; }
  # polled: a "$(code ...)" argument would be evaluated once, before the listener is up
  wait_for 30 eval '[ "$(code -H "Authorization: Bearer $good")" = 200 ]' ||
    fail "metrics-reader token: $(code -H "Authorization: Bearer $good")"
  expect_ok grep -q '^sandbox_pods_created_total' "$E2E_DIR/metrics.out"
  expect_eq "$(code -H "Authorization: Bearer $bad")" 403 "a token without metrics-reader"
  expect_ok grep -q 'system:serviceaccount:dep:nobody' "$E2E_DIR/metrics.out"
  expect_eq "$(code)" 401 "no token"
  expect_eq "$(code -H "Authorization: Bearer not-a-token")" 401 "a forged token"
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$mp/metrics")" 000 "plain HTTP"
  # A scraper's answers are remembered (as controller-runtime's filter does):
  # six scrapes with one token ask the API server at most once more.
  requests_now() {
    code -H "Authorization: Bearer $good" >/dev/null
    awk '$1 == "sandbox_kube_requests_total" {print $2}' "$E2E_DIR/metrics.out"
  }
  local r0 r1 i
  r0=$(requests_now)
  for i in 1 2 3 4; do code -H "Authorization: Bearer $good" >/dev/null; done
  r1=$(requests_now)
  say "  API requests during 5 scrapes with one token: $((r1 - r0))"
  [ $((r1 - r0)) -le 2 ] || fail "5 scrapes with one token made $((r1 - r0)) API requests (TokenReview and SubjectAccessReview not cached)"
  controller_stop "$c"
}

# The webhook's SubjectAccessReviews go to their own level
# (sandbox-controller-webhook), the reconciles to sandbox-controller: the
# install's two FlowSchemas match the deployed ServiceAccount, one each.
test_4_webhook_reviews_have_a_level_of_their_own() {
  kubectl apply -f "$E2E_ROOT/manifests/webhook/flowcontrol.yaml" >/dev/null || fail "apply flowcontrol.yaml"
  E2E_ADMISSION=1 controller_with_webhook # ownerAuthorization accessReview: a review per owner
  local c=$CTL_PID
  install_admission "$WEBHOOK_PORT" "$SA" || { fail "admission not installed"; controller_stop "$c"; return; }
  local wb rb
  wb=$(flow_dispatched sandbox-controller-webhook)
  rb=$(flow_dispatched)
  sandbox dep reviewed-1 $IMG reviewed-key alice >/dev/null || fail "create with an owner refused"
  wait_for 60 bound dep reviewed-1 || fail "not bound: $(jp dep sandbox reviewed-1 '{.status}')"
  [ "$(flow_dispatched sandbox-controller-webhook)" -gt "$wb" ] ||
    fail "no SubjectAccessReview in the FlowSchema sandbox-controller-webhook ($wb before, $(flow_dispatched sandbox-controller-webhook) after)"
  [ "$(flow_dispatched)" -gt "$rb" ] || fail "no reconcile request in the FlowSchema sandbox-controller"
  uninstall_admission
  controller_stop "$c"
}

# A TokenReview that answers late (a busy API server; a random token, which
# no cache holds, costs one every time and anyone who reaches the port can
# send one) must not hold the guarded /metrics listener: its handlers run on
# threads of their own, so while one waits on the API server a scrape with a
# cached token and quick refusals are answered at once. Each request below
# is a new connection, which the kernel gives one of the listener's two
# loops at random: handlers run on the loops, the slow review would hold its
# loop and about half of them.
test_5_slow_metrics_auth_does_not_hold_the_listener() {
  local d=$E2E_DIR/metrics-certs-slow p=$E2E_DIR/pki
  metrics_certs "$d"
  local mp
  mp=$(free_port)
  SBX_FAULT_DELAYS=token-review=4000 controller_start slowauth --metrics-bind-address "127.0.0.1:$mp" \
    --metrics-cert-path "$d" --metrics-secure
  local c=$CTL_PID
  kubectl create serviceaccount slow-scraper -n dep >/dev/null
  kubectl create clusterrolebinding e2e-slow-scraper --clusterrole=sandbox-controller-metrics-reader \
    --serviceaccount=dep:slow-scraper >/dev/null
  local good
  good=$(kubectl create token slow-scraper -n dep)
  # code SECONDS [curl args]: "STATUS SECONDS-TAKEN" of one GET /metrics
  code() {
    curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time "$1" --cacert "$p/ca.crt" "${@:2}" \
      "https://127.0.0.1:$mp/metrics"
  }
  wait_for 30 eval '[ "$(code 2 | cut -d" " -f1)" = 401 ]' || fail "the metrics listener did not answer"
  # The scraper's token, once (4 s in its review), and then cached.
  expect_eq "$(code 15 -H "Authorization: Bearer $good" | cut -d' ' -f1)" 200 "the first scrape"
  local reviews
  reviews=$(grep -c '"point":"token-review"' "$E2E_DIR/slowauth.log")
  curl -s -o /dev/null --max-time 15 --cacert "$p/ca.crt" -H "Authorization: Bearer random-$RANDOM$RANDOM" \
    "https://127.0.0.1:$mp/metrics" &
  local slow=$!
  wait_for 5 eval '[ "$(grep -c "\"point\":\"token-review\"" "$E2E_DIR/slowauth.log")" -gt "$reviews" ]' ||
    fail "the random token's review did not start"
  local i r slowest=0 bad=()
  for i in 1 2 3 4 5 6 7 8; do
    r=$(code 2)
    [ "${r%% *}" = 401 ] || bad+=("no token: $r")
    r=$(code 2 -H "Authorization: Bearer $good")
    [ "${r%% *}" = 200 ] || bad+=("cached token: $r")
  done
  say "  16 requests while a review waits 4 s: ${#bad[@]} late or refused${bad[*]:+: ${bad[*]}}"
  [ ${#bad[@]} = 0 ] || fail "requests held behind a slow TokenReview (2 s allowed each): ${bad[*]}"
  wait "$slow"
  kubectl delete clusterrolebinding e2e-slow-scraper >/dev/null
  controller_stop "$c"
}

setup
e2e_main
