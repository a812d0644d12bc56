#!/usr/bin/env bash
# The Helm chart on a real control plane: helm lint (both certificate modes,
# monitoring on), helm template applied with --dry-run=server, helm install
# (pods Running on kwok nodes), helm upgrade (the seal key survives), helm
# uninstall. helm is built once from its Go module (hack/tools.sh).
# Its own control plane: the kustomize install of test_install.sh owns the same
# cluster-wide names, and deleting and re-creating the pod
# ValidatingAdmissionPolicy in one API server leaves that API server refusing
# every pod ("no params found") until it restarts (Kubernetes 1.35.4, see
# docs/operations.md).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"
. "$(dirname "$0")/lib_certmount.sh"
M=$E2E_ROOT/manifests
CHART=$M/helm/sandbox-controller

# Renders that are not about the seal key name one (a render that cannot see
# the cluster never invents one: test_helm_seal_key_never_invented).
SEALED=(--set seal.existingSecret=sandbox-controller-seal)

# use_helm: sets helm to the helm binary (built once) with its state in $E2E_DIR.
use_helm() {
  helm=$(bash "$E2E_ROOT/hack/tools.sh" helm) || { fail "helm build"; return 1; }
  export HELM_CACHE_HOME=$E2E_DIR/helm/cache HELM_CONFIG_HOME=$E2E_DIR/helm/config HELM_DATA_HOME=$E2E_DIR/helm/data
}

test_helm_chart() {
  local helm
  use_helm || return
  local out
  out=$("$helm" lint --strict "$CHART" "${SEALED[@]}" 2>&1) || fail "helm lint: $out"
  out=$("$helm" lint --strict "$CHART" "${SEALED[@]}" --set certificates.mode=cert-manager,serviceMonitor.enabled=true,prometheusRule.enabled=true 2>&1) ||
    fail "helm lint (cert-manager, monitoring): $out"
  expect_fail "$helm" template x "$CHART" "${SEALED[@]}" --set certificates.mode=bogus
  # Plain /metrics only on loopback (contract 7), and then no ServiceMonitor.
  out=$("$helm" template x "$CHART" "${SEALED[@]}" --set metrics.secure=false | grep -o -- '--metrics-bind-address=[^ ]*')
  expect_eq "$out" "--metrics-bind-address=127.0.0.1:8443" "plain metrics' bind address"
  expect_fail "$helm" template x "$CHART" "${SEALED[@]}" --set metrics.secure=false,serviceMonitor.enabled=true
  # webhook.timeoutSeconds reaches all three webhooks.
  out=$("$helm" template x "$CHART" "${SEALED[@]}" --set webhook.timeoutSeconds=7 --show-only templates/webhook.yaml | grep -o 'timeoutSeconds: [0-9]*' | sort | uniq -c | tr -s ' ')
  expect_eq "$out" " 3 timeoutSeconds: 7" "the webhooks' timeoutSeconds"
  # API Priority and Fairness: the controller's ServiceAccount of the release namespace, or nothing
  out=$("$helm" template x "$CHART" -n sandbox-helm "${SEALED[@]}" |
        python3 -c 'import sys, yaml; print(" ".join(sorted(x["kind"] + ":" + (x["spec"]["rules"][0]["subjects"][0]["serviceAccount"]["namespace"] if x["kind"] == "FlowSchema" else "-") for x in yaml.safe_load_all(sys.stdin) if x and x["kind"] in ("FlowSchema", "PriorityLevelConfiguration"))))')
  expect_eq "$out" "FlowSchema:sandbox-helm FlowSchema:sandbox-helm PriorityLevelConfiguration:- PriorityLevelConfiguration:-" \
    "the chart's flow control objects"
  out=$("$helm" template x "$CHART" -n sandbox-helm "${SEALED[@]}" --set flowControl.enabled=false | grep -c 'kind: FlowSchema')
  expect_eq "$out" 0 "no FlowSchema with flowControl.enabled=false"
  crd_stub cert-manager.io Certificate certificates
  crd_stub cert-manager.io Issuer issuers
  crd_stub monitoring.coreos.com ServiceMonitor servicemonitors
  crd_stub monitoring.coreos.com PrometheusRule prometheusrules
  kubectl create namespace sandbox-helm >/dev/null
  kubectl label namespace sandbox-helm pod-security.kubernetes.io/enforce=restricted >/dev/null
  out=$("$helm" template sbx "$CHART" -n sandbox-helm --include-crds "${SEALED[@]}" \
          --set certificates.mode=cert-manager,serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true |
        kubectl apply --dry-run=server -f - 2>&1) || fail "helm template | kubectl apply --dry-run=server: $out"
  out=$("$helm" install sbx "$CHART" -n sandbox-helm --set-json "config.pod=$(tr -d '\n' <<<"$POD_SETTINGS")" \
    --wait --timeout 3m 2>&1) || fail "helm install: $out"
  wait_for 60 controller_pods_on_kwok sandbox-helm 2 ||
    fail "helm: 2 controller pods Running on kwok nodes: $(kubectl get pods -n sandbox-helm -o wide 2>&1)"
  # The chart's RBAC: pods (confined by its policy), webhook configurations by name.
  local sa=system:serviceaccount:sandbox-helm:sandbox-controller
  expect_eq "$(kubectl auth can-i --as=$sa delete pods -n default 2>/dev/null)" yes "the chart's ServiceAccount deletes pods"
  expect_eq "$(kubectl auth can-i --as=$sa delete sandboxes.sandbox.dev -n default 2>/dev/null)" yes "... and Sandboxes"
  expect_eq "$(kubectl auth can-i --as=$sa patch pods --subresource=status -n default 2>/dev/null)" no "... not pods/status"
  expect_eq "$(kubectl auth can-i --as=$sa patch validatingwebhookconfigurations/sandbox-controller 2>/dev/null)" yes
  expect_eq "$(kubectl auth can-i --as=$sa patch mutatingwebhookconfigurations/sandbox-controller 2>/dev/null)" yes
  expect_eq "$(kubectl auth can-i --as=$sa patch validatingwebhookconfigurations/other 2>/dev/null)" no "another webhook configuration"
  expect_eq "$(kubectl auth can-i --as=$sa list mutatingwebhookconfigurations 2>/dev/null)" no "list webhook configurations"
  expect_eq "$(kubectl auth can-i --as=$sa get secrets/sandbox-controller-seal -n sandbox-helm 2>/dev/null)" no "the seal Secret through the API"
  expect_eq "$(kubectl auth can-i --as=$sa update sandboxwarmpools.sandbox.dev --subresource=finalizers -n default 2>/dev/null)" yes "pools' finalizers"
  kubectl run helm-victim -n default --image=busybox --restart=Never >/dev/null || fail "create helm-victim"
  # The API server loads a new policy a moment after it is stored: wait until a
  # dry run is refused (it fails if the policy never takes hold), then the real delete.
  wait_for 20 sh -c "! kubectl --as=$sa delete pod helm-victim -n default --dry-run=server >/dev/null 2>&1" ||
    fail "the chart's confinement policy never refused the ServiceAccount's delete of another pod"
  out=$(kubectl --as=$sa delete pod helm-victim -n default --wait=false 2>&1) && fail "the chart's ServiceAccount deleted another pod"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "refused by the chart's confinement policy"
  kubectl delete pod helm-victim -n default --wait=false >/dev/null
  # Issue 23, finding 2: the chart's confinement admits for its ServiceAccount
  # the controller's own pod with the settings of the chart's config.pod, and
  # refuses the reviewer's pod (in kube-system and a tenant namespace) and a
  # toleration, node selector or priority class the config does not name.
  pod_settings_classes || fail "the cluster's classes"
  out=$(kubectl --as=$sa create --dry-run=server -f - 2>&1 <<<"$(sandbox_pod_json sbx-helm-shape default "$SETTINGS_POD")") ||
    fail "the chart's confinement refused the controller's own pod with the settings of config.pod: $out"
  local ns what m
  for ns in kube-system default; do
    out=$(kubectl --as=$sa create --dry-run=server -f - 2>&1 <<<"$(sandbox_pod_json sbx-helm-review "$ns" "$REVIEW_POD")") &&
      fail "the chart's confinement admitted the reviewer's pod in $ns"
    expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "the reviewer's pod in $ns"
  done
  while IFS='|' read -r what m; do
    out=$(kubectl --as=$sa create --dry-run=server -f - 2>&1 <<<"$(sandbox_pod_json sbx-helm-extra default "$SETTINGS_POD
$m")") && fail "the chart's confinement admitted a pod with $what"
    expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-confinement'" "a pod with $what"
  done <<CASES
a toleration of everything|p['spec']['tolerations'].append({'operator': 'Exists'})
another node selector|p['spec']['nodeSelector'] = {'kubernetes.io/hostname': 'kwok-node-0'}
another priority class|p['spec']['priorityClassName'] = 'system-node-critical'
a runtime class not allowed|p['spec']['runtimeClassName'] = 'unconfined'
CASES
  # The chart's workspace policy is live, with the claim of its controller config.
  out=$(kubectl create -f - 2>&1 <<YAML
apiVersion: v1
kind: Pod
metadata: {name: reads-every-workspace, namespace: default}
spec:
  containers: [{name: c, image: busybox, volumeMounts: [{name: v, mountPath: /data}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: sandbox-workspaces}}]
YAML
) && fail "a pod mounting the workspace claim was admitted under the chart"
  expect_match "$out" "ValidatingAdmissionPolicy 'sandbox-controller-workspace'" "refused by the chart's workspace policy"
  local key1 key2
  key1=$(jp sandbox-helm secret sandbox-controller-seal '{.data.key}')
  [ "$(printf '%s' "$key1" | base64 -d | wc -c)" -ge 32 ] || fail "seal key shorter than 32 bytes"
  out=$("$helm" upgrade sbx "$CHART" -n sandbox-helm --set replicas=3 --wait --timeout 3m 2>&1) || fail "helm upgrade: $out"
  key2=$(jp sandbox-helm secret sandbox-controller-seal '{.data.key}')
  expect_eq "$key2" "$key1" "the seal key survives an upgrade"
  # a render that sees the cluster renders the key it has
  out=$("$helm" template sbx "$CHART" -n sandbox-helm --dry-run=server --show-only templates/seal-secret.yaml 2>&1) ||
    fail "helm template --dry-run=server: $out"
  expect_match "$out" "key: $key1" "the cluster's key rendered"
  wait_for 60 controller_pods_on_kwok sandbox-helm 3 || fail "3 replicas after upgrade"
  out=$("$helm" uninstall sbx -n sandbox-helm --wait 2>&1) || fail "helm uninstall: $out"
}

# The policies' workspace constants come from the values that render the
# controller config (config.workspace), in every expression that names them.
test_helm_policy_workspace_constants() {
  local helm out
  use_helm || return
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --set config.workspace.mode=hostPath \
    --set config.workspace.hostPathRoot=/srv/team-ws,config.workspace.pvcName=team-ws 2>&1) || { fail "helm template: $out"; return; }
  expect_match "$out" 'pvcName: team-ws' "the controller config"
  expect_match "$out" 'hostPathRoot: /srv/team-ws' "the controller config"
  expect_match "$out" 'name: sandbox-controller-workspace' "the workspace policy is rendered"
  expect_eq "$(grep -c "\['team-ws'\]\.all(workspaceClaim," <<<"$out")" "$(grep -c '\]\.all(workspaceClaim,' <<<"$out")" \
    "every workspaceClaim binding has the chart's claim"
  expect_eq "$(grep -c "\['/srv/team-ws'\]\.all(workspaceRoot," <<<"$out")" "$(grep -c '\]\.all(workspaceRoot,' <<<"$out")" \
    "every workspaceRoot binding has the chart's root"
  expect_ne "$(grep -c '\]\.all(workspaceRoot,' <<<"$out")" 0 "workspaceRoot bindings rendered"
  expect_eq "$(grep -c "'sandbox-workspaces'" <<<"$out")" 0 "the manifests' claim left in the chart"
  # pvc mode: no hostPath root, whatever hostPathRoot says
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --set config.workspace.hostPathRoot=/srv/team-ws 2>&1)
  expect_eq "$(grep -c "\[''\]\.all(workspaceRoot," <<<"$out")" "$(grep -c '\]\.all(workspaceRoot,' <<<"$out")" \
    "pvc mode renders no hostPath root"
  expect_fail "$helm" template sbx "$CHART" "${SEALED[@]}" --set config.workspace.mode=hostPath
}

# The services policy's labels of every sandbox pod are the controller's two
# and the values' config.pod.labels (a Service selecting only those would
# select sandbox pods).
test_helm_policy_pod_labels() {
  local helm out
  use_helm || return
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --set config.pod.labels.team=platform 2>&1) ||
    { fail "helm template: $out"; return; }
  expect_match "$out" 'name: sandbox-controller-services' "the services policy is rendered"
  expect_match "$(tr -d '\n' <<<"$out" | tr -s ' ')" \
    "\{''app.kubernetes.io/managed-by'': ''sandbox-controller'', ''app.kubernetes.io/name'': ''sandbox'', ''team'': ''platform''\}" \
    "the pod labels of the services policy"
}

# The confinement policy's pod settings are those of the values' config.pod
# and config.adoption (issue 23, finding 2), as CEL literals; none by default.
test_helm_policy_pod_settings() {
  local helm out
  use_helm || return
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --set-json "config.pod=$(tr -d '\n' <<<"$POD_SETTINGS")" \
    --set-json 'config.adoption={"allowedMutations":{"injectedContainers":[{"name":"istio-proxy","image":"docker.io/istio/proxyv2:*","volumes":["istio-envoy"]}]}}' 2>&1) ||
    { fail "helm template: $out"; return; }
  out=$(tr -d '\n' <<<"$out" | tr -s ' ')
  expect_match "$out" '\[\{"example.com/pool":"sandboxes"\}\]\.all\(configuredNodeSelector,' "the node selector"
  expect_match "$out" '\[\[\{"effect":"NoSchedule","key":"dedicated","operator":"Equal","tolerationSeconds":"","value":"sandbox"\},\{"effect":"NoExecute","key":"spot","operator":"Exists","tolerationSeconds":"60","value":""\}\]\]\.all\(configuredTolerations,' "the tolerations (maps of strings)"
  expect_match "$out" '\["sandbox-low"\]\.all\(configuredPriorityClass,' "the priority class"
  expect_match "$out" '\[\["gvisor","kata"\]\]\.all\(configuredRuntimeClasses,' "the runtime classes"
  expect_match "$out" '\[\["regcred"\]\]\.all\(configuredPullSecrets,' "the image pull secrets"
  expect_match "$out" '\[\["istio-proxy"\]\]\.all\(injectedContainers,' "the injected containers"
  expect_match "$out" '\[\["istio-envoy"\]\]\.all\(injectedVolumes,' "their volumes"
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" 2>&1 | tr -d '\n' | tr -s ' ')
  expect_match "$out" '\[\{\}\]\.all\(configuredNodeSelector, \[\[\]\]\.all\(configuredTolerations, \[""\]\.all\(configuredPriorityClass,' \
    "no settings by default"
}

# networkPolicy.webhookFrom narrows who reaches the webhook port (only that
# port); empty, the default, is anywhere.
test_helm_networkpolicy_webhook_sources() {
  local helm out
  use_helm || return
  rules() {
    "$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --show-only templates/policy.yaml "$@" >"$E2E_DIR/np.yaml" &&
      manifests_json "$E2E_DIR/np.json" "$E2E_DIR/np.yaml" && python3 - "$E2E_DIR/np.json" <<'PY'
import json, sys
np = next(x for x in json.load(open(sys.argv[1]))['items'] if x['kind'] == 'NetworkPolicy')
print(' / '.join('%s from %s' % (','.join(str(p['port']) for p in r['ports']), json.dumps(r.get('from', 'anywhere'), separators=(',', ':')))
                 for r in np['spec']['ingress']))
PY
  }
  expect_eq "$(rules)" '9443 from "anywhere" / 8443 from "anywhere"' "the default NetworkPolicy"
  expect_eq "$(rules --set 'networkPolicy.webhookFrom[0].ipBlock.cidr=192.0.2.10/32' \
    --set 'networkPolicy.webhookFrom[1].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=kube-system')" \
    '9443 from [{"ipBlock":{"cidr":"192.0.2.10/32"}},{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}}}] / 8443 from "anywhere"' \
    "networkPolicy.webhookFrom"
}

# webhook.clientCA and webhook.clientNames make the webhook serve only the API
# server's client certificate (docs/admission.md, "Requiring the API server's
# client certificate"): the CA's ConfigMap or Secret mounted read-only and both
# flags; unset, the default, the Deployment is as before.
test_helm_webhook_client_ca() {
  local helm out
  use_helm || return
  # client_ca ARGS...: the manager container's client-certificate flags, the
  # mount of the volume webhook-client-ca and that volume, or "none".
  client_ca() {
    "$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --show-only templates/deployment.yaml "$@" >"$E2E_DIR/cca.yaml" &&
      manifests_json "$E2E_DIR/cca.json" "$E2E_DIR/cca.yaml" && python3 - "$E2E_DIR/cca.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))['items'][0]['spec']['template']['spec']
c = next(x for x in d['containers'] if x['name'] == 'manager')
flags = [a for a in c['args'] if a.startswith('--webhook-client')]
mounts = [m for m in c.get('volumeMounts', []) if m['name'] == 'webhook-client-ca']
vols = [v for v in d.get('volumes', []) if v['name'] == 'webhook-client-ca']
if not (flags or mounts or vols):
    print('none')
else:
    j = lambda x: json.dumps(x, sort_keys=True, separators=(',', ':'))
    print(' / '.join([' '.join(flags), j(mounts), j(vols)]))
PY
  }
  expect_eq "$(client_ca)" none "the default Deployment"
  local ca=--webhook-client-ca-file=/var/run/sandbox-controller/webhook-client-ca/ca.crt
  local mount='[{"mountPath":"/var/run/sandbox-controller/webhook-client-ca","name":"webhook-client-ca","readOnly":true}]'
  expect_eq "$(client_ca --set webhook.clientCA.configMap=apiserver-client-ca)" \
    "$ca / $mount / [{\"configMap\":{\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}],\"name\":\"apiserver-client-ca\"},\"name\":\"webhook-client-ca\"}]" \
    "webhook.clientCA.configMap"
  expect_eq "$(client_ca --set webhook.clientCA.secret=apiserver-client-ca --set 'webhook.clientNames={kube-apiserver-admission,apiserver-2}')" \
    "$ca --webhook-client-names=kube-apiserver-admission,apiserver-2 / $mount / [{\"name\":\"webhook-client-ca\",\"secret\":{\"defaultMode\":288,\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}],\"secretName\":\"apiserver-client-ca\"}}]" \
    "webhook.clientCA.secret and webhook.clientNames"
  expect_eq "$(client_ca --set webhook.clientCA.configMap=bundle,webhook.clientCA.key=ca-bundle.pem | grep -o '"items":[^]]*]')" \
    '"items":[{"key":"ca-bundle.pem","path":"ca.crt"}]' "webhook.clientCA.key"
  # what the controller would refuse at start, or mis-read, the chart refuses to render
  out=$("$helm" template sbx "$CHART" "${SEALED[@]}" --set webhook.clientCA.configMap=a,webhook.clientCA.secret=b 2>&1) &&
    fail "both a ConfigMap and a Secret rendered"
  expect_match "$out" 'webhook\.clientCA\.configMap.*webhook\.clientCA\.secret|webhook\.clientCA\.secret.*webhook\.clientCA\.configMap' \
    "the refusal names both"
  out=$("$helm" template sbx "$CHART" "${SEALED[@]}" --set 'webhook.clientNames={kube-apiserver-admission}' 2>&1) &&
    fail "webhook.clientNames without a CA rendered"
  expect_match "$out" 'webhook\.clientCA' "the refusal names webhook.clientCA"
  out=$("$helm" template sbx "$CHART" "${SEALED[@]}" --set webhook.clientCA.configMap=a --set 'webhook.clientNames[0]=a\,b' 2>&1) &&
    fail "a client name with a comma rendered"
  expect_match "$out" 'webhook\.clientNames' "the refusal names webhook.clientNames"
  # the rendered Deployment is one the API server accepts
  kubectl create namespace sandbox-helm >/dev/null 2>&1
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --show-only templates/deployment.yaml \
    --set webhook.clientCA.secret=apiserver-client-ca --set 'webhook.clientNames={kube-apiserver-admission}' |
    kubectl apply --dry-run=server -f - 2>&1) || fail "apply --dry-run=server of the Deployment with a client CA: $out"
}

# A render must never invent a seal key: a new key on every helm template
# (a GitOps sync) would rotate the seal of every pod and the webhook CA.
test_helm_seal_key_never_invented() {
  local helm out out2
  use_helm || return
  out=$("$helm" template sbx "$CHART" -n sandbox-helm 2>&1) && fail "helm template with no seal key rendered: $(grep -A3 'name: sandbox-controller-seal' <<<"$out" | head -8)"
  expect_match "$out" "seal\\.existingSecret" "the refusal names seal.existingSecret"
  expect_match "$out" "seal\\.key" "the refusal names seal.key"
  # a Secret of one's own: no Secret rendered, that one mounted and granted
  out=$("$helm" template sbx "$CHART" -n sandbox-helm --set seal.existingSecret=my-seal 2>&1) || fail "existingSecret: $out"
  expect_eq "$(grep -c 'kind: Secret$' <<<"$out")" 0 "a Secret rendered with existingSecret"
  expect_match "$out" 'secretName: my-seal' "my-seal mounted"
  # mounted only: the controller never reads it through the API, so no grant
  grep -Eq 'resourceNames: \[my-seal\]|- my-seal' <<<"$out" && fail "my-seal granted through the API"
  # an explicit key: rendered as is, the same on every render
  local key
  key=$(head -c 48 /dev/urandom | base64 -w0)
  out=$("$helm" template sbx "$CHART" -n sandbox-helm --set seal.key="$key" 2>&1) || fail "seal.key: $out"
  out2=$("$helm" template sbx "$CHART" -n sandbox-helm --set seal.key="$key" 2>&1)
  expect_eq "$out2" "$out" "two renders with seal.key"
  expect_match "$out" "key: $(printf '%s' "$key" | base64 -w0)" "the key rendered"
  expect_fail "$helm" template sbx "$CHART" --set seal.key=short
}

# The controller, as the chart's pod spec runs it, reads the certificate
# Secret in cert-manager mode, and the chart's ServiceMonitor verifies what it
# serves. With self-managed certificates (their CA is only in the webhook
# configurations' caBundle) a ServiceMonitor needs a CA named explicitly.
test_helm_cert_manager_secret_readable() {
  local helm out
  use_helm || return
  crd_stub cert-manager.io Certificate certificates
  crd_stub cert-manager.io Issuer issuers
  crd_stub monitoring.coreos.com ServiceMonitor servicemonitors
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" \
    --set certificates.mode=cert-manager,serviceMonitor.enabled=true 2>&1) || { fail "helm template (cert-manager): $out"; return; }
  printf '%s\n' "$out" >"$E2E_DIR/chart-cert-manager.yaml"
  cert_secret_readable helm-cert-manager "$E2E_DIR/chart-cert-manager.yaml" && servicemonitor_verifies helm-cert-manager
  certmount_done
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --set serviceMonitor.enabled=true 2>&1) &&
    fail "a self-managed ServiceMonitor without a CA rendered: $(grep -A4 'tlsConfig' <<<"$out")"
  expect_match "$out" 'serviceMonitor\.tlsConfig\.ca' "the refusal names serviceMonitor.tlsConfig.ca"
  out=$("$helm" template sbx "$CHART" -n sandbox-helm "${SEALED[@]}" --set serviceMonitor.enabled=true \
    --set serviceMonitor.tlsConfig.ca.configMap.name=my-ca,serviceMonitor.tlsConfig.ca.configMap.key=ca.crt 2>&1) ||
    fail "a self-managed ServiceMonitor with a CA: $out"
  expect_match "$out" 'name: my-ca' "the CA named"
  expect_match "$out" 'serverName: sandbox-controller-webhook.sandbox-helm.svc' "the server name"
  expect_eq "$(grep -c insecureSkipVerify <<<"$out")" 0 "insecureSkipVerify rendered"
}

cluster_up
e2e_main
