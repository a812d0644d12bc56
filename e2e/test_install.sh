#!/usr/bin/env bash
# The README's install paths on a real control plane: `kubectl apply -k` of the
# default install and of each certificate overlay, the Deployment's pods
# scheduled onto kwok nodes under the restricted Pod Security profile, the
# example RBAC granting exactly what it says, the monitoring manifests, the
# Prometheus rules (promtool check + unit tests). The Helm chart: e2e/test_helm.sh.
# promtool is built once from its Go module (hack/tools.sh).
# The tests run in the order of their numbers (each builds on the one before).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"
. "$(dirname "$0")/lib_certmount.sh"
M=$E2E_ROOT/manifests
CHART=$M/helm/sandbox-controller



# may_use USER NS OWNER: "true" or "false", the API server's answer to a
# SubjectAccessReview for `use` on workspaces.sandbox.dev/OWNER (kubectl auth
# can-i cannot ask: workspaces is a virtual resource it does not discover).
may_use() {
  kubectl create -o jsonpath='{.status.allowed}' -f - 2>/dev/null <<JSON
{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
 "spec": {"user": "$1", "resourceAttributes": {"namespace": "$2", "verb": "use",
          "group": "sandbox.dev", "resource": "workspaces", "name": "$3"}}}
JSON
  echo
}

test_1_generated_copies_current() {
  expect_ok bash "$E2E_ROOT/hack/manifests.sh" check
  # The repository stands alone: no link or path outside it.
  local outside
  outside=$(git -C "$E2E_ROOT" grep -n -I -e '\.\./shared' -- . ':!e2e/test_install.sh' 2>/dev/null)
  [ -z "$outside" ] || fail "references outside the repository: $outside"
}

test_2_kustomize_default_install() {
  # As the README: namespace and seal Secret first, then apply -k.
  kubectl create namespace sandbox-system >/dev/null
  kubectl create secret generic sandbox-controller-seal -n sandbox-system \
    --from-literal=key="$(head -c 48 /dev/urandom | base64 -w0)" >/dev/null
  local out
  out=$(kubectl apply -k "$M" 2>&1) || fail "kubectl apply -k manifests/: $out"
  expect_eq "$(jp "" namespace sandbox-system '{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" restricted \
    "Pod Security label"
  wait_for 120 controller_pods_on_kwok sandbox-system 2 ||
    fail "2 controller pods Running on kwok nodes: $(kubectl get pods -n sandbox-system -o wide 2>&1)"
  expect_ok kubectl rollout status deployment/sandbox-controller -n sandbox-system --timeout=60s
  expect_match "$(jp sandbox-system deployment sandbox-controller '{.spec.template.spec.containers[0].args}')" \
    'webhook-cert-mode=self-managed'
  expect_match "$(jp sandbox-system deployment sandbox-controller '{.spec.template.spec.containers[0].args}')" \
    'metrics-secure'
  expect_eq "$(jp sandbox-system service sandbox-controller-webhook '{.spec.ports[0].port}->{.spec.ports[0].targetPort}')" \
    "443->webhook"
  expect_eq "$(jp sandbox-system service sandbox-controller-metrics '{.spec.ports[0].port}')" 8443
  expect_eq "$(jp sandbox-system pdb sandbox-controller '{.spec.minAvailable}')" 1
  # one ingress rule per port: the webhook's (from anywhere unless narrowed,
  # test_8) and the metrics'
  expect_eq "$(jp sandbox-system networkpolicy sandbox-controller '{.spec.ingress[*].ports[*].port}')" "9443 8443" \
    "NetworkPolicy ports"
  expect_eq "$(jp sandbox-system networkpolicy sandbox-controller '{.spec.ingress[0].ports[*].port}')" 9443 "the webhook's rule"
  expect_eq "$(jp sandbox-system networkpolicy sandbox-controller '{.spec.ingress[1].ports[*].port}')" 8443 "the metrics' rule"
  expect_eq "$(jp sandbox-system networkpolicy sandbox-controller '{.spec.ingress[*].from}')" "" "sources by default"
  # The restricted profile is enforced: a pod breaking it is refused there.
  expect_fail kubectl run -n sandbox-system privileged --image=busybox --privileged --restart=Never
  # Re-applying changes nothing that fails; the self-managed overlay is the default.
  out=$(kubectl apply -k "$M/overlays/self-managed" 2>&1) || fail "apply -k overlays/self-managed: $out"
}

test_3_kustomize_cert_manager_overlay() {
  # cert-manager is not installed here: stand-in CRDs for Issuer/Certificate,
  # then a server-side dry run of the whole overlay (schema, admission, RBAC).
  crd_stub cert-manager.io Certificate certificates
  crd_stub cert-manager.io Issuer issuers
  local out
  out=$(kubectl apply -k "$M/overlays/cert-manager" --dry-run=server 2>&1) || fail "dry-run apply cert-manager: $out"
  expect_match "$out" 'certificate.cert-manager.io/sandbox-controller-webhook created \(server dry run\)'
  local r
  r=$(kubectl kustomize "$M/overlays/cert-manager")
  expect_match "$r" 'secretName: sandbox-controller-webhook-cert' "cert Secret mounted"
  expect_match "$r" 'webhook-cert-mode=cert-manager'
  if [ -d "$M/webhook" ]; then
    expect_eq "$(grep -c 'cert-manager.io/inject-ca-from: sandbox-system/sandbox-controller-webhook' <<<"$r")" 2 \
      "inject-ca-from on both webhook configurations"
  fi
  # The controller, as the overlay's pod spec runs it, reads the Secret, and
  # the ServiceMonitor of manifests/monitoring verifies what it serves.
  crd_stub monitoring.coreos.com ServiceMonitor servicemonitors
  crd_stub monitoring.coreos.com PrometheusRule prometheusrules
  { printf '%s\n---\n' "$r"; kubectl kustomize "$M/monitoring"; } >"$E2E_DIR/cert-manager-overlay.yaml"
  cert_secret_readable kustomize-cert-manager "$E2E_DIR/cert-manager-overlay.yaml" &&
    servicemonitor_verifies kustomize-cert-manager
  certmount_done
}

test_4_rbac_least_privilege() {
  local sa=system:serviceaccount:sandbox-system:sandbox-controller
  can() { kubectl auth can-i --as="$sa" "$@" 2>/dev/null; }
  expect_eq "$(can update leases -n sandbox-system)" yes
  expect_eq "$(can update leases -n kube-system)" no "update Leases in kube-system"
  expect_eq "$(can update leases -n kube-node-lease)" no "update node heartbeats"
  expect_eq "$(can get secrets/sandbox-controller-seal -n sandbox-system)" no "the seal Secret through the API (kubelet mounts it)"
  expect_eq "$(can get secrets/other -n sandbox-system)" no "read another Secret"
  expect_eq "$(can list secrets -n sandbox-system)" no "list Secrets"
  expect_eq "$(can get secrets -n default)" no
  # Pods anywhere, confined by the installed policy to sandbox pods (below).
  expect_eq "$(can delete pods -n default)" yes "delete pods"
  expect_eq "$(can create pods -n default)" yes
  expect_eq "$(can patch pods --subresource=status -n default)" no "patch pods/status"
  expect_eq "$(can create pods --subresource=eviction -n default)" no "evict pods"
  expect_eq "$(can delete sandboxes.sandbox.dev -n default)" yes "delete Sandboxes"
  expect_eq "$(can update sandboxes.sandbox.dev -n default)" no "update Sandboxes"
  expect_eq "$(can create subjectaccessreviews.authorization.k8s.io)" yes
  expect_eq "$(can create tokenreviews.authentication.k8s.io)" yes
  expect_eq "$(can patch validatingwebhookconfigurations/sandbox-controller)" yes
  expect_eq "$(can patch mutatingwebhookconfigurations/sandbox-controller)" yes
  expect_eq "$(can patch validatingwebhookconfigurations/other)" no "patch another webhook"
  expect_eq "$(can patch mutatingwebhookconfigurations/other)" no "patch another mutating webhook"
  expect_eq "$(can list validatingwebhookconfigurations)" no "list webhook configurations"
  # The kustomize install's confinement policy, for the ServiceAccount's
  # requests (impersonated: the policy sees its userInfo).
  kubectl run confined-victim -n default --image=busybox --restart=Never >/dev/null || fail "create confined-victim"
  local out
  out=$(kubectl --as="$sa" delete pod confined-victim -n default --wait=false 2>&1) && fail "the ServiceAccount deleted another pod"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "delete of another pod"
  out=$(kubectl --as="$sa" run confined-other -n default --image=busybox --restart=Never 2>&1) && fail "the ServiceAccount created another pod"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "create of another pod"
  kubectl delete pod confined-victim -n default --wait=false >/dev/null
}

test_5_example_user_rbac() {
  kubectl create namespace team-a >/dev/null 2>&1
  local out
  out=$(kubectl apply -f "$M/examples/rbac-users.yaml" 2>&1) || fail "apply examples: $out"
  can() { kubectl auth can-i "$@" 2>/dev/null; }
  expect_eq "$(may_use alice team-a alice)" true
  expect_eq "$(may_use alice team-a bob)" false "alice uses bob"
  expect_eq "$(can create sandboxes.sandbox.dev -n team-a --as=alice)" yes
  local agent=system:serviceaccount:team-a:sandbox-agent
  expect_eq "$(may_use "$agent" team-a alice)" true
  expect_eq "$(may_use "$agent" team-a bob)" true
  expect_eq "$(may_use "$agent" default bob)" false "agent outside team-a"
  # Aggregation into the built-in roles: edit may create Sandboxes, view may read them.
  kubectl create rolebinding carol-edit -n team-a --clusterrole=edit --user=carol >/dev/null
  kubectl create rolebinding dave-view -n team-a --clusterrole=view --user=dave >/dev/null
  wait_for 20 bash -c "[ \"\$(kubectl auth can-i create sandboxes.sandbox.dev -n team-a --as=carol)\" = yes ]" ||
    fail "edit does not aggregate sandbox-editor"
  expect_eq "$(can list sandboxes.sandbox.dev -n team-a --as=dave)" yes
  expect_eq "$(can create sandboxes.sandbox.dev -n team-a --as=dave)" no
  expect_eq "$(may_use carol team-a alice)" false "edit grants no owner"
}

test_6_monitoring_manifests() {
  crd_stub monitoring.coreos.com ServiceMonitor servicemonitors
  crd_stub monitoring.coreos.com PrometheusRule prometheusrules
  local out
  out=$(kubectl apply -k "$M/monitoring" --dry-run=server 2>&1) || fail "dry-run apply monitoring: $out"
  python3 -m json.tool "$M/monitoring/grafana-dashboard.json" >/dev/null || fail "dashboard is not JSON"
}

test_7_prometheus_rules() {
  local promtool
  promtool=$(bash "$E2E_ROOT/hack/tools.sh" promtool) || { fail "promtool build"; return; }
  local out
  out=$("$promtool" check rules "$M/monitoring/sandbox-controller.rules.yaml" 2>&1) || fail "promtool check rules: $out"
  say "  $(grep -m1 SUCCESS <<<"$out")"
  out=$(cd "$M/monitoring" && "$promtool" test rules sandbox-controller.rules.test.yaml 2>&1) || fail "promtool test rules: $out"
  say "  promtool test rules: $(grep -cE '^ *SUCCESS|PASSED' <<<"$out") file(s) passed"
  # every alert has a unit test
  local a
  for a in $(sed -n 's/^ *- alert: //p' "$M/monitoring/sandbox-controller.rules.yaml"); do
    grep -q "alertname: $a" "$M/monitoring/sandbox-controller.rules.test.yaml" || fail "no promtool test for $a"
  done
}

# The documented kustomize patch (manifests/examples/) narrows who reaches the
# webhook port, and only that port.
test_8_networkpolicy_webhook_sources_patch() {
  local o=$E2E_DIR/overlay-webhook-from out
  mkdir -p "$o"
  cp "$M/examples/networkpolicy-webhook-from.yaml" "$o/" || { fail "no example patch"; return; }
  cat >"$o/kustomization.yaml" <<YAML
resources: [$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$M" "$o")]
patches:
  - path: networkpolicy-webhook-from.yaml
    target: {kind: NetworkPolicy, name: sandbox-controller}
YAML
  out=$(kubectl kustomize "$o" 2>&1) || { fail "kustomize with the patch: $out"; return; }
  printf '%s\n' "$out" >"$E2E_DIR/overlay-webhook-from.yaml"
  manifests_json "$E2E_DIR/overlay-webhook-from.json" "$E2E_DIR/overlay-webhook-from.yaml" || { fail "read the overlay"; return; }
  expect_eq "$(python3 - "$E2E_DIR/overlay-webhook-from.json" <<'PY'
import json, sys
np = next(x for x in json.load(open(sys.argv[1]))['items'] if x['kind'] == 'NetworkPolicy')
print(' / '.join('%s from %s' % (','.join(str(p['port']) for p in r['ports']), json.dumps(r.get('from', 'anywhere'), separators=(',', ':')))
                 for r in np['spec']['ingress']))
PY
)" '9443 from [{"ipBlock":{"cidr":"192.0.2.10/32"}}] / 8443 from "anywhere"' "the patched NetworkPolicy"
  out=$(kubectl apply --dry-run=server -f "$E2E_DIR/overlay-webhook-from.yaml" 2>&1) || fail "apply --dry-run=server of the patched install: $out"
}

# The documented kustomize patch (manifests/examples/webhook-client-ca.yaml)
# makes the webhook require the API server's client certificate: the CA's
# ConfigMap (from the overlay's configMapGenerator) mounted read-only and both
# flags, on the manager container only.
test_9_webhook_client_ca_patch() {
  local o=$E2E_DIR/overlay-client-ca out
  mkdir -p "$o"
  cp "$M/examples/webhook-client-ca.yaml" "$o/" || { fail "no example patch"; return; }
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$o/ca.key" -out "$o/webhook-client-ca.crt" \
    -subj /CN=test-webhook-client-ca -days 1 2>/dev/null || { fail "openssl"; return; }
  cat >"$o/kustomization.yaml" <<YAML
resources: [$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$M" "$o")]
configMapGenerator:
  - name: sandbox-controller-webhook-client-ca
    namespace: sandbox-system
    files: [ca.crt=webhook-client-ca.crt]
patches:
  - path: webhook-client-ca.yaml
    target: {kind: Deployment, name: sandbox-controller}
YAML
  out=$(kubectl kustomize "$o" 2>&1) || { fail "kustomize with the patch: $out"; return; }
  printf '%s\n' "$out" >"$E2E_DIR/overlay-client-ca.yaml"
  manifests_json "$E2E_DIR/overlay-client-ca.json" "$E2E_DIR/overlay-client-ca.yaml" || { fail "read the overlay"; return; }
  expect_eq "$(python3 - "$E2E_DIR/overlay-client-ca.json" "$o/webhook-client-ca.crt" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))['items']
cm = [x for x in items if x['kind'] == 'ConfigMap' and x['metadata']['name'].startswith('sandbox-controller-webhook-client-ca')]
d = next(x for x in items if x['kind'] == 'Deployment')['spec']['template']['spec']
c = next(x for x in d['containers'] if x['name'] == 'manager')
vol = next((v for v in d['volumes'] if v['name'] == 'webhook-client-ca'), {})
mnt = next((m for m in c['volumeMounts'] if m['name'] == 'webhook-client-ca'), {})
print(' / '.join([
    ' '.join(a for a in c['args'] if a.startswith('--webhook-client')),
    '%s:%s' % (mnt.get('mountPath'), mnt.get('readOnly')),
    'cm=%s' % (len(cm) == 1 and vol.get('configMap', {}).get('name') == cm[0]['metadata']['name']),
    'items=%s' % json.dumps(vol.get('configMap', {}).get('items'), separators=(',', ':')),
    'ca=%s' % (len(cm) == 1 and cm[0]['data'].get('ca.crt') == open(sys.argv[2]).read()),
]))
PY
)" "--webhook-client-ca-file=/var/run/sandbox-controller/webhook-client-ca/ca.crt --webhook-client-names=kube-apiserver-admission / /var/run/sandbox-controller/webhook-client-ca:True / cm=True / items=[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}] / ca=True" \
    "the patched Deployment"
  out=$(kubectl apply --dry-run=server -f "$E2E_DIR/overlay-client-ca.yaml" 2>&1) || fail "apply --dry-run=server of the patched install: $out"
}

cluster_up
e2e_main
