#!/usr/bin/env bash
# Helpers for suites that run the admission half on the local control plane:
# a serving certificate for the controller's webhook listener on 127.0.0.1,
# the product's webhook configurations and pod policy (manifests/webhook/)
# rendered for a URL client config, and identities with ServiceAccount tokens.
# Source after lib.sh and cluster_up.

# webhook_certs: a serving certificate for 127.0.0.1/localhost signed by the
# cluster CA, as tls.crt/tls.key in $E2E_DIR/webhook-certs (the layout of
# --webhook-cert-dir). Sets WEBHOOK_CERT_DIR.
webhook_certs() {
  WEBHOOK_CERT_DIR="$E2E_DIR/webhook-certs"
  mkdir -p "$WEBHOOK_CERT_DIR"
  local p="$E2E_DIR/pki" d="$WEBHOOK_CERT_DIR"
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/tls.key" 2>/dev/null
  openssl req -new -key "$d/tls.key" -subj "/CN=sandbox-controller-webhook" -out "$d/tls.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext"
  openssl x509 -req -in "$d/tls.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/ext" -out "$d/tls.crt" 2>/dev/null
  rm -f "$d/tls.csr" "$d/ext"
}

# controller_with_webhook: starts the controller "main" with the admission
# webhook on a free port of 127.0.0.1 (WEBHOOK_PORT) requiring the API
# server's client certificate, and workspace.mode hostPath under
# $E2E_DIR/workspaces (WS_ROOT, which the policies then allow:
# E2E_WORKSPACE_ROOT). Call install_admission "$WEBHOOK_PORT" after it.
controller_with_webhook() {
  WS_ROOT=$E2E_DIR/workspaces
  E2E_WORKSPACE_ROOT=$WS_ROOT
  mkdir -p "$WS_ROOT"
  printf 'workspace:\n  mode: hostPath\n  hostPathRoot: %s\n' "$WS_ROOT" >"$E2E_DIR/config.yaml"
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  controller_start main --config "$E2E_DIR/config.yaml" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
}

# free_port comes from lib.sh; hack/demo.sh sources this file alone.
declare -F free_port >/dev/null ||
free_port() { python3 "$(dirname "${BASH_SOURCE[0]}")/../hack/free-port.py" ${E2E_DIR:+"$E2E_DIR/ports-given"}; }

# manifests_json OUT FILE...: the objects of the manifests FILE... (YAML or
# JSON, any number of documents) as one JSON List in OUT, as kubectl reads
# them (every kind must be known to the cluster: crd_stub for others').
manifests_json() {
  local out=$1 f args=()
  shift
  for f; do args+=(-f "$f"); done
  kubectl create --dry-run=client -o json "${args[@]}" >"$out.docs" || return 1
  python3 - "$out.docs" >"$out" <<'PY'
import json, sys
text, items, dec, i = open(sys.argv[1]).read(), [], json.JSONDecoder(), 0
while True:  # kubectl prints one JSON document per object
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    d, i = dec.raw_decode(text, i)
    items += d.get('items', [d])
print(json.dumps({'apiVersion': 'v1', 'kind': 'List', 'items': items}))
PY
}

# render_admission PORT CONTROLLER_USERNAME: prints every object of
# manifests/webhook/ (or of the folder SBX_WEBHOOK_MANIFESTS: another
# version's, for a benchmark of that version's binary) with the Service client config replaced by
# https://127.0.0.1:PORT/<path> and the cluster CA as caBundle, and the
# policies' controller identity set. With E2E_WORKSPACE_ROOT set, the
# policies' workspace hostPath root is that path (as the Helm chart sets it
# from config.workspace.hostPathRoot); else the manifests' own (none: pvc mode).
# With E2E_POLICY_POD_SETTINGS (the controller config's pod: mapping, as
# JSON), the confinement policy's pod settings are those (as the chart sets
# them from config.pod); else the manifests' own (none).
render_admission() {
  local port=$1 user=$2 f files=()
  for f in "${SBX_WEBHOOK_MANIFESTS:-$E2E_ROOT/manifests/webhook}"/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] || files+=("$f")
  done
  manifests_json "$E2E_DIR/admission.json" "${files[@]}" || return 1
  python3 - "$E2E_DIR/admission.json" "$port" "$user" "$E2E_DIR/pki/ca.crt" "${E2E_WORKSPACE_ROOT:-}" \
    "${E2E_POLICY_POD_SETTINGS:-}" <<'PY'
import base64, json, sys
src, port, user, ca, root, pod = sys.argv[1:7]
bundle = base64.b64encode(open(ca, 'rb').read()).decode()
doc = json.load(open(src))
for x in doc['items']:
    for w in x.get('webhooks', []):
        path = w['clientConfig']['service']['path']
        w['clientConfig'] = {'url': f'https://127.0.0.1:{port}{path}', 'caBundle': bundle}
    if x['kind'] == 'FlowSchema' and user != 'system:serviceaccount:sandbox-system:sandbox-controller':
        x['spec']['rules'][0]['subjects'].append({'kind': 'User', 'user': {'name': user}})
out = json.dumps(doc).replace('system:serviceaccount:sandbox-system:sandbox-controller', user)
if root:
    out = out.replace("[''].all(workspaceRoot,", "['%s'].all(workspaceRoot," % root)
if pod:
    # the confinement policy's pod settings, as the Helm chart renders them
    # from config.pod (JSON literals are CEL literals)
    pod = json.loads(pod)
    doc = json.loads(out)
    for x in doc['items']:
        for v in x.get('spec', {}).get('validations', []) + x.get('spec', {}).get('matchConditions', []):
            for token, value in (('[{}].all(configuredNodeSelector,', pod.get('nodeSelector', {})),
                                 ('[[]].all(configuredTolerations,', [
                                     {'key': t.get('key', ''), 'operator': t.get('operator', 'Equal'),
                                      'value': t.get('value', ''), 'effect': t.get('effect', ''),
                                      'tolerationSeconds': str(t['tolerationSeconds']) if 'tolerationSeconds' in t else ''}
                                     for t in pod.get('tolerations', [])]),
                                 ("[''].all(configuredPriorityClass,", pod.get('priorityClassName', '')),
                                 ('[[]].all(configuredRuntimeClasses,', pod.get('runtimeClasses', {}).get('allowed', [])),
                                 ('[[]].all(configuredPullSecrets,', pod.get('imagePullSecrets', []))):
                v['expression'] = v['expression'].replace(token, '[%s].all(%s' % (json.dumps(value), token.split('all(')[1]))
    out = json.dumps(doc)
print(out)
PY
}

# render_policies CONTROLLER_USERNAME: only the ValidatingAdmissionPolicies
# of render_admission and their bindings (nothing that calls a webhook).
render_policies() {
  render_admission 0 "$1" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
doc["items"] = [x for x in doc["items"] if x["kind"].startswith("ValidatingAdmissionPolicy")]
print(json.dumps(doc))'
}

# install_policies [CONTROLLER_USERNAME]: applies render_policies and waits
# until the API server enforces them (policies_enforced).
install_policies() {
  local user=${1:-sandbox-controller}
  render_policies "$user" | kubectl apply -f - >/dev/null || return 1
  wait_for 20 policies_enforced "$user" || { say "the pod policies are not enforced"; return 1; }
}

# policies_enforced CONTROLLER_USERNAME: each installed pod policy refuses a
# server-side dry run it is there to refuse (an API server loads policies a
# moment after they are stored): a pod named sbx-... (sandbox-controller-pods),
# a pod mounting the claim (sandbox-controller-workspace), a clone of the
# claim (sandbox-controller-workspace-claim: refused to administrators too), a
# pod not named sbx-... by the controller's identity
# (sandbox-controller-confinement; with the group system:masters, so that RBAC
# cannot refuse it first), a Service selecting a reserved label
# (sandbox-controller-services).
policies_enforced() {
  local user=$1 name out
  for name in sandbox-controller-pods sandbox-controller-workspace sandbox-controller-workspace-claim \
              sandbox-controller-confinement sandbox-controller-services; do
    kubectl get validatingadmissionpolicy "$name" >/dev/null 2>&1 || continue
    case $name in
      *-pods) out=$(kubectl run sbx-policy-probe -n default --image=probe --restart=Never --dry-run=server 2>&1) ;;
      *-workspace) out=$(kubectl create --dry-run=server -f - 2>&1 <<<'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"policy-probe","namespace":"default"},"spec":{"containers":[{"name":"c","image":"probe"}],"volumes":[{"name":"v","persistentVolumeClaim":{"claimName":"sandbox-workspaces"}}]}}') ;;
      *-workspace-claim) out=$(kubectl create --dry-run=server -f - 2>&1 <<<'{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"policy-probe","namespace":"default"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}},"dataSource":{"kind":"PersistentVolumeClaim","name":"sandbox-workspaces"}}}') ;;
      *-confinement) out=$(kubectl run policy-probe -n default --image=probe --restart=Never --dry-run=server \
                             --as="$user" --as-group=system:masters 2>&1) ;;
      *-services) out=$(kubectl create --dry-run=server -f - 2>&1 <<<'{"apiVersion":"v1","kind":"Service","metadata":{"name":"policy-probe","namespace":"default"},"spec":{"selector":{"sandbox.dev/pool":"x"},"ports":[{"port":80}]}}') ;;
    esac
    [[ "$out" == *"ValidatingAdmissionPolicy '$name'"* ]] || return 1
  done
}

# install_admission PORT [CONTROLLER_USERNAME]: applies the rendered
# admission objects and waits until the API server reaches the webhook (a
# server-side dry-run create is answered by it), enforces the policies, and
# the controller counts the webhook as in force.
install_admission() {
  local port=$1 user=${2:-sandbox-controller}
  kubectl create namespace sandbox-system >/dev/null 2>&1 || true
  render_admission "$port" "$user" | kubectl apply -f - >/dev/null || return 1
  local i out
  for i in $(seq 1 100); do
    out=$(kubectl create --dry-run=server -o jsonpath='{.metadata.annotations}' -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: admission-probe, namespace: default}
spec: {image: probe}
YAML
) || true # refused until the webhook listens; under set -e (hack/demo.sh) a refusal must not end the script
    [[ "$out" == *sandbox.dev/requested-by* ]] && break
    sleep 0.2
  done
  [[ "$out" == *sandbox.dev/requested-by* ]] || { say "webhook not reached: $out"; return 1; }
  wait_for 20 policies_enforced "$user" || { say "the pod policies are not enforced"; return 1; }
  # The controller counts an owner authorization only for Sandboxes made
  # at least SBX_INFORCE_GRACE_S (5 s, reconcile/inforce.h) after the
  # webhook configuration took its present form: the API server's own
  # lag in loading it. Sandboxes of the caller come after that.
  sleep 6
}

# uninstall_admission: deletes every admission object of the product.
uninstall_admission() {
  kubectl delete mutatingwebhookconfiguration sandbox-controller --ignore-not-found >/dev/null
  kubectl delete validatingwebhookconfiguration sandbox-controller --ignore-not-found >/dev/null
  kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy \
    -l app.kubernetes.io/name=sandbox-controller --ignore-not-found >/dev/null
}

# grant_owner NS OWNER USER: USER may `use` the workspace owner OWNER in NS
# (Role and RoleBinding workspace-OWNER, resourceNames [OWNER]).
grant_owner() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: workspace-$2, namespace: $1}
rules:
  - {apiGroups: [sandbox.dev], resources: [workspaces], resourceNames: [$2], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: workspace-$2, namespace: $1}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: workspace-$2}
subjects: [{kind: User, name: $3}]
YAML
}

# admission_up NS...: the control plane with the controller's RBAC, the
# namespaces NS, the webhook's certificates, the suite's main_start (the
# controller "main" serving the webhook on WEBHOOK_PORT, as MAIN_CTL) and
# admission in force; ALICE and BOB the users' kubeconfigs.
admission_up() {
  local ns
  cluster_up
  grant_controller_rbac
  for ns; do new_namespace "$ns"; done
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  main_start
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice)
  BOB=$(user_kubeconfig bob)
}

# main_restart [flags...]: main stopped and started again (main_start), and
# admission served by it again.
main_restart() {
  controller_stop "$MAIN_CTL"
  main_start "$@"
  install_admission "$WEBHOOK_PORT" sandbox-controller >/dev/null || fail "admission not back after a restart"
}

# grant_editors NS USER...: each USER may edit Sandboxes in NS (Role
# sandbox-editor, RoleBinding sandbox-editors).
grant_editors() {
  local ns=$1 u subjects=""; shift
  for u; do subjects+="{kind: User, name: $u}, "; done
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sandbox-editor, namespace: $ns}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sandbox-editors, namespace: $ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sandbox-editor}
subjects: [${subjects%, }]
YAML
}

# sandbox_pod_json NAME NS [PYTHON]: a pod (JSON) as sandbox-controller builds
# one for owner alice (its labels and owner annotation, the claim
# sandbox-workspaces mounted with alice's subPath, the restricted security
# context, no token), never scheduled (schedulerName none); PYTHON, statements
# on the dict p, changes it first.
sandbox_pod_json() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
name, ns, mods = sys.argv[1:4]
p = {'apiVersion': 'v1', 'kind': 'Pod',
     'metadata': {'name': name, 'namespace': ns,
                  'labels': {'app.kubernetes.io/managed-by': 'sandbox-controller',
                             'app.kubernetes.io/name': 'sandbox',
                             'sandbox.dev/scope-digest': '0123456789abcdef0123456789abcdef'},
                  'annotations': {'sandbox.dev/workspace-owner': 'alice'}},
     'spec': {'schedulerName': 'none', 'restartPolicy': 'Never',
              'automountServiceAccountToken': False, 'enableServiceLinks': False,
              'securityContext': {'runAsNonRoot': True, 'runAsUser': 1000, 'runAsGroup': 1000,
                                  'fsGroup': 1000, 'seccompProfile': {'type': 'RuntimeDefault'}},
              'containers': [{'name': 'sandbox', 'image': 'registry.local/agent:1.0',
                              'securityContext': {'allowPrivilegeEscalation': False,
                                                  'capabilities': {'drop': ['ALL']}},
                              'volumeMounts': [{'name': 'workspaces', 'mountPath': '/workspace',
                                                'subPath': 'alice/workspace'}]}],
              'volumes': [{'name': 'workspaces',
                           'persistentVolumeClaim': {'claimName': 'sandbox-workspaces'}}]}}
exec(mods)
print(json.dumps(p))
PY
}

# sa_kubeconfig NS NAME: a kubeconfig holding a TokenRequest token of
# ServiceAccount NS/NAME (created if missing); prints its path.
sa_kubeconfig() {
  local ns=$1 sa=$2 f="$E2E_DIR/sa-$1-$2.kubeconfig" token server
  kubectl create serviceaccount "$sa" -n "$ns" >/dev/null 2>&1 || true
  token=$(kubectl create token "$sa" -n "$ns" --duration=2h) || return 1
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  cat >"$f" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$server", certificate-authority: "$E2E_DIR/pki/ca.crt"}
users:
- name: $sa
  user: {token: "$token"}
contexts:
- name: local
  context: {cluster: local, user: $sa, namespace: $ns}
current-context: local
KC
  echo "$f"
}

# Issue 23, finding 2 (test_policy.sh, test_helm.sh): the reviewer's server
# dry run as the controller's identity, as sandbox_pod_json PYTHON: an sbx-
# pod as root with SYS_ADMIN, SYS_PTRACE and NET_ADMIN, seccomp and AppArmor
# Unconfined, a hostPort, a pinned nodeName, tolerating everything, mounting
# another application's claim, a ConfigMap and a projected token for any
# audience.
REVIEW_POD="c = p['spec']['containers'][0]
p['spec']['securityContext'] = {'runAsUser': 0, 'seccompProfile': {'type': 'Unconfined'}}
c['securityContext'] = {'capabilities': {'add': ['SYS_ADMIN', 'SYS_PTRACE', 'NET_ADMIN']}, 'appArmorProfile': {'type': 'Unconfined'}}
c['ports'] = [{'containerPort': 22, 'hostPort': 2222}]
p['spec']['nodeName'] = 'kwok-node-0'
p['spec']['tolerations'] = [{'operator': 'Exists'}]
p['spec']['serviceAccountName'] = 'default'
p['spec']['volumes'] += [{'name': 'app', 'persistentVolumeClaim': {'claimName': 'app-data'}},
                         {'name': 'cm', 'configMap': {'name': 'app-config'}},
                         {'name': 'tok', 'projected': {'sources': [{'serviceAccountToken': {'audience': 'vault', 'path': 't'}}]}}]
c['volumeMounts'] += [{'name': 'app', 'mountPath': '/app'}, {'name': 'cm', 'mountPath': '/cm'}, {'name': 'tok', 'mountPath': '/tok'}]"

# POD_SETTINGS: a controller config's pod: mapping (JSON) with every setting
# (the confinement policy rendered with the same: E2E_POLICY_POD_SETTINGS, or
# the chart's config.pod); SETTINGS_POD: sandbox_pod_json PYTHON giving a pod
# those settings as the controller does (with the runtime class kata).
POD_SETTINGS='{"nodeSelector": {"example.com/pool": "sandboxes"},
  "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "sandbox", "effect": "NoSchedule"},
                  {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
  "priorityClassName": "sandbox-low", "runtimeClasses": {"allowed": ["gvisor", "kata"], "default": "gvisor"},
  "imagePullSecrets": ["regcred"], "labels": {"team": "platform"}, "annotations": {"example.com/cost-center": "42"}}'
SETTINGS_POD="p['spec']['nodeSelector'] = {'example.com/pool': 'sandboxes'}
p['spec']['tolerations'] = [{'key': 'dedicated', 'operator': 'Equal', 'value': 'sandbox', 'effect': 'NoSchedule'},
                            {'key': 'spot', 'operator': 'Exists', 'effect': 'NoExecute', 'tolerationSeconds': 60}]
p['spec']['priorityClassName'] = 'sandbox-low'; p['spec']['runtimeClassName'] = 'kata'
p['spec']['imagePullSecrets'] = [{'name': 'regcred'}]
p['metadata']['labels']['team'] = 'platform'; p['metadata']['annotations']['example.com/cost-center'] = '42'"

# pod_settings_classes: the PriorityClass and RuntimeClasses of POD_SETTINGS,
# and a RuntimeClass unconfined no setting allows (the API server refuses a
# pod naming a class that does not exist before any policy is asked).
pod_settings_classes() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: sandbox-low}
value: 10
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: unconfined}
handler: runc
YAML
}
