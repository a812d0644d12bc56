#!/usr/bin/env bash
# Shared helpers for the end-to-end tests: a real local control plane
# (hack/cluster.sh), the CRD, the controller binary, and small assertions.
# Each test file sources this, defines test_* functions and calls e2e_main.
set -uo pipefail

E2E_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${SBX_BUILD_DIR:-$E2E_ROOT/build}
CONTROLLER_BIN=${SBX_CONTROLLER_BIN:-$BUILD_DIR/sandbox-controller}
E2E_PASSED=0
E2E_FAILED=0
E2E_FAILURES=()
CTL_PIDS=()

say() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# cluster_up: a fresh control plane for this file, torn down on exit.
cluster_up() {
  E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sbx-e2e.XXXXXX")
  trap e2e_cleanup EXIT
  export KUBECONFIG
  KUBECONFIG=$("$E2E_ROOT/hack/cluster.sh" up "$E2E_DIR") ||
    { E2E_FAILED=1; say "control plane failed to start"; exit 1; } # its logs are kept
  BIN=$(sed -n 's/^BIN=//p' "$E2E_DIR/state")
  export PATH="$BIN:$PATH"
  kubectl apply -f "$E2E_ROOT/crd/sandbox.dev_sandboxes.yaml" -f "$E2E_ROOT/crd/sandbox.dev_sandboxclaims.yaml" \
    -f "$E2E_ROOT/crd/sandbox.dev_sandboxwarmpools.yaml" -f "$E2E_ROOT/crd/sandbox.dev_sandboxquotas.yaml" \
    -f "$E2E_ROOT/crd/sandbox.dev_sandboxnetworkprofiles.yaml" >/dev/null
  kubectl wait --for=condition=Established crd/sandboxes.sandbox.dev crd/sandboxclaims.sandbox.dev \
    crd/sandboxwarmpools.sandbox.dev crd/sandboxquotas.sandbox.dev crd/sandboxnetworkprofiles.sandbox.dev \
    --timeout=60s >/dev/null
  head -c 48 /dev/urandom | base64 >"$E2E_DIR/seal.key"
}

# track_pid PID: a process this suite started (a controller, a proxy),
# stopped at the end of the suite. Its start time is kept with it: the PID
# of one that ended (a crash test's, a restart's) may since have been given
# to any process of the machine (the kernel wraps at kernel.pid_max, 32,768
# here, every few minutes of a CI run), and that one is never signalled. One
# suite's cleanup once killed another suite's kube-apiserver so.
track_pid() { CTL_PIDS+=("$1:$(proc_start "$1")"); }
# proc_start PID: the kernel's start time of PID (/proc/PID/stat, field 22).
proc_start() { awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }
# faultproxy_start DROP [SEED]: hack/faultproxy in front of the API server,
# losing the response to a share DROP of the requests (the server acted, the
# client hears a reset; its log says "cut connection" for each). Sets
# PROXY_PORT (point a controller at it with SBX_E2E_APISERVER_PORT) and
# PROXY_PID (tracked); returns 1 with a failure when it cannot start.
faultproxy_start() {
  local proxy="$E2E_ROOT/build/faultproxy" port
  [ -x "$proxy" ] || proxy="$BUILD_DIR/faultproxy"
  [ -x "$proxy" ] || { fail "faultproxy not built (hack/test.sh builds it into build/)"; return 1; }
  port=$(sed -n 's/^APISERVER_PORT=//p' "$E2E_DIR/state")
  rm -f "$E2E_DIR/proxy.port"
  "$proxy" -upstream "127.0.0.1:$port" -drop "$1" -seed "${2:-$RANDOM}" -port-file "$E2E_DIR/proxy.port" \
    >>"$E2E_DIR/proxy.log" 2>&1 &
  PROXY_PID=$!
  disown "$PROXY_PID"
  track_pid "$PROXY_PID"
  wait_for 10 test -s "$E2E_DIR/proxy.port" || { fail "faultproxy did not start"; return 1; }
  PROXY_PORT=$(cat "$E2E_DIR/proxy.port")
}
# still_ours PID: PID is still the process tracked under it (a PID never
# tracked: yes, as before).
still_ours() {
  local e found=0
  for e in "${CTL_PIDS[@]:-}"; do
    [ "${e%%:*}" = "$1" ] || continue
    found=1
    [ -n "${e#*:}" ] && [ "$(proc_start "$1")" = "${e#*:}" ] && return 0
  done
  [ $found = 0 ]
}
# tracked_pids: the PIDs of the processes tracked that still run.
tracked_pids() {
  local e
  for e in "${CTL_PIDS[@]:-}"; do [ -n "$e" ] && still_ours "${e%%:*}" && echo "${e%%:*}"; done
  return 0
}

e2e_cleanup() {
  local p
  for p in $(tracked_pids); do kill -KILL "$p" 2>/dev/null; done
  "$E2E_ROOT/hack/cluster.sh" down "$E2E_DIR" >/dev/null 2>&1
  if [ "$E2E_FAILED" -eq 0 ] && [ -z "${SBX_E2E_KEEP:-}" ]; then rm -rf "$E2E_DIR"; else say "logs kept in $E2E_DIR"; fi
}

# controller_start NAME [flags...]: runs a controller in the background; its
# pid is in CTL_PID and its log in $E2E_DIR/NAME.log.
# Suites that do not install the admission webhook run the controller with
# --owner-authorization namespace (nothing would record owner authorizations);
# a suite that installs it sets E2E_ADMISSION=1.
# With SBX_E2E_IDENTITY=serviceaccount it runs as deployed: in-cluster config
# (see controller_identity_args), the ServiceAccount's token and only the RBAC
# of manifests/.
controller_start() {
  local name=$1; shift
  local authz=(--owner-authorization namespace)
  [ -n "${E2E_ADMISSION:-}" ] && authz=()
  local ident=()
  controller_identity_args ident
  # No webhook drain on SIGTERM (the product's default is 5 s): the suites
  # restart controllers serving the webhook many times, and no API server
  # routes to them through endpoints. E2E_KEEP_DRAIN=1 (or a --webhook-drain
  # of the test's, which comes later and wins) keeps it.
  local drain=(--webhook-drain 0)
  [ -n "${E2E_KEEP_DRAIN:-}" ] && drain=()
  env "${ident[@]}" "$CONTROLLER_BIN" --seal-key-file "$E2E_DIR/seal.key" \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 "${authz[@]}" "${drain[@]}" "$@" \
    >>"$E2E_DIR/$name.log" 2>&1 &
  CTL_PID=$!
  disown "$CTL_PID" 2>/dev/null || true
  track_pid "$CTL_PID"
}

controller_stop() { # controller_stop PID
  still_ours "$1" || return 0
  kill -TERM "$1" 2>/dev/null
  local i
  for i in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  return 1
}

# grant_controller_rbac: the controller's identity gets the RBAC of manifests/.
# By default it is the client certificate user sandbox-controller bound to the
# ClusterRole. With SBX_E2E_IDENTITY=serviceaccount it is the manifests' own
# ServiceAccount sandbox-system/sandbox-controller with ONLY manifests/rbac
# (ClusterRole, and the Role for its Lease and seal Secret in sandbox-system),
# a token from the TokenRequest API and the in-cluster file layout in
# $E2E_DIR/serviceaccount (token, ca.crt, namespace).
grant_controller_rbac() {
  if [ "${SBX_E2E_IDENTITY:-}" = serviceaccount ]; then
    kubectl create namespace sandbox-system >/dev/null 2>&1 || true
    kubectl apply -k "$E2E_ROOT/manifests/rbac" >/dev/null || { say "cannot apply manifests/rbac"; return 1; }
    local d=$E2E_DIR/serviceaccount
    mkdir -p "$d"
    kubectl create token sandbox-controller -n sandbox-system --duration=6h >"$d/token" ||
      { say "TokenRequest failed"; return 1; }
    cp "$E2E_DIR/pki/ca.crt" "$d/ca.crt"
    printf sandbox-system >"$d/namespace"
    return 0
  fi
  kubectl apply -f "$E2E_ROOT/manifests/rbac/role.yaml" >/dev/null
  kubectl create clusterrolebinding sandbox-controller-e2e --clusterrole=sandbox-controller \
    --user=sandbox-controller >/dev/null 2>&1 || true
}

# grant_controller_leases NS: the client certificate identity may hold a Lease
# in NS (the manifests grant Leases in sandbox-system only).
grant_controller_leases() {
  kubectl create role sandbox-controller-leases -n "$1" --verb=get,list,watch,create,update \
    --resource=leases.coordination.k8s.io >/dev/null 2>&1 || true
  kubectl create rolebinding sandbox-controller-leases -n "$1" --role=sandbox-controller-leases \
    --user=sandbox-controller >/dev/null 2>&1 || true
}

# controller_identity_args ARRAY: fills ARRAY with the env(1) arguments that
# run the controller as the identity grant_controller_rbac set up: the
# in-cluster variables and no KUBECONFIG for the ServiceAccount, else a
# KUBECONFIG with the controller's client certificate. SBX_E2E_APISERVER_PORT
# sends it to another port on 127.0.0.1 (a fault proxy) instead.
controller_identity_args() {
  local -n out=$1
  local real port
  real=$(sed -n 's/^APISERVER_PORT=//p' "$E2E_DIR/state")
  port=${SBX_E2E_APISERVER_PORT:-$real}
  if [ "${SBX_E2E_IDENTITY:-}" = serviceaccount ]; then
    out=(-u KUBECONFIG KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$port"
         SBX_INCLUSTER_DIR="$E2E_DIR/serviceaccount")
  elif [ "$port" != "$real" ]; then
    sed "s#https://127.0.0.1:$real#https://127.0.0.1:$port#" "$E2E_DIR/controller.kubeconfig" \
      >"$E2E_DIR/controller-$port.kubeconfig"
    out=(KUBECONFIG="$E2E_DIR/controller-$port.kubeconfig")
  else
    out=(KUBECONFIG="$E2E_DIR/controller.kubeconfig")
  fi
}

# new_namespace NAME [ROOT]: a namespace with the owner-workspace PVC bound to
# a hostPath PV at ROOT/NAME. Without ROOT: /srv/sandbox-workspaces/NAME,
# which no kwok pod ever touches; with ROOT (a real node mounts it) the
# folder is made here and must exist. Returns once the claim is Bound: until
# then a pod mounting it is unschedulable, and the scheduler may take its
# backoff (10 s, then up to a minute) to try again, so the first pod of the
# namespace, the owner's workspace preparation, would wait on the PV binder
# rather than on the controller (test_idempotency's crash at after-pod-create
# never reached its fault point within 30 s once so).
new_namespace() {
  local ns=$1 root=${2:-} type=""
  if [ -n "$root" ]; then
    mkdir -p "$root/$ns"
    type=", type: Directory"
  fi
  kubectl create namespace "$ns" >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: ws-$ns}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: ${root:-/srv/sandbox-workspaces}/$ns$type}
  claimRef: {namespace: $ns, name: sandbox-workspaces}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: sandbox-workspaces, namespace: $ns}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: ws-$ns
  resources: {requests: {storage: 10Gi}}
YAML
  wait_for 60 sh -c "[ \"\$(kubectl get pvc -n $ns sandbox-workspaces -o jsonpath='{.status.phase}')\" = Bound ]" ||
    say "new_namespace $ns: the claim sandbox-workspaces is not Bound after 60 s"
}

# sandbox NS NAME IMAGE [KEY] [OWNER]: kubectl apply of a Sandbox. KEY/OWNER
# "-" means absent. Prints kubectl's output; returns its status.
sandbox() {
  local ns=$1 name=$2 image=$3 key=${4--} owner=${5--}
  {
    echo "apiVersion: sandbox.dev/v1alpha1"
    echo "kind: Sandbox"
    echo "metadata: {name: $name, namespace: $ns}"
    echo "spec:"
    echo "  image: $image"
    [ "$key" != "-" ] && printf '  idempotencyKey: %s\n' "$(printf '%s' "$key" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')"
    [ "$owner" != "-" ] && printf '  workspaceOwner: %s\n' "$(printf '%s' "$owner" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')"
    true
  } | kubectl apply -f - 2>&1
}

# The controller config's pod settings that send sandbox pods to the real
# node (hack/realnode.sh: its label and taint), as JSON: with
# E2E_POLICY_POD_SETTINGS=$REALNODE_POD_SETTINGS the confinement policy admits
# exactly those (lib_admission.sh; the Helm chart renders them from config.pod).
REALNODE_POD_SETTINGS='{"nodeSelector": {"node.sandbox.dev/real": "true"},
  "tolerations": [{"key": "node.sandbox.dev/real", "operator": "Exists", "effect": "NoSchedule"}]}'

# realnode_controller_image: the controller's image (hack/image.sh, offline,
# from $BUILD_DIR's binary, into $E2E_DIR/image) imported on the cluster's
# real node under the name its workspace preparation pods use when the
# config names none (sandbox-controller:<version>, as the CRI names it).
# Returns 1 (said) when it cannot.
realnode_controller_image() {
  local version
  version=$(head -n1 "$E2E_ROOT/VERSION")
  SBX_IMAGE_OUT=$E2E_DIR/image SBX_BUILD_DIR=$BUILD_DIR bash "$E2E_ROOT/hack/image.sh" >"$E2E_DIR/image.log" 2>&1 &&
    "$E2E_ROOT/hack/cluster.sh" realnode-import "$E2E_DIR" "$E2E_DIR/image/sandbox-controller-$version.oci.tar" \
      "docker.io/library/sandbox-controller:$version" ||
    { say "the controller's image is not on the real node: $(tail -3 "$E2E_DIR/image.log")"; return 1; }
}

# install_python_client: the Python client and kubectl-sandbox installed as
# hack/test.sh installs them (a venv over Debian's python3-kubernetes, no
# package index) from a copy of clients/python in $E2E_DIR; sets PY (its
# python) and puts the plugin on PATH. Returns 1 (said) when pip fails.
install_python_client() {
  cp -r "$E2E_ROOT/clients/python" "$E2E_DIR/client-src"
  rm -rf "$E2E_DIR/client-src/build" "$E2E_DIR/client-src"/src/*.egg-info
  /usr/bin/python3 -m venv --system-site-packages "$E2E_DIR/venv" &&
    "$E2E_DIR/venv/bin/pip" install -q --no-build-isolation --no-index "$E2E_DIR/client-src" >"$E2E_DIR/pip.log" 2>&1 ||
    { say "cannot install clients/python: $(tail -5 "$E2E_DIR/pip.log")"; return 1; }
  PY=$E2E_DIR/venv/bin/python
  export PATH="$PATH:$E2E_DIR/venv/bin"
}

# series_sum NAME [LABEL-SUBSTRING]: the sum of the series NAME, in the
# Prometheus text on stdin, whose labels hold LABEL-SUBSTRING; 0 for none.
series_sum() {
  awk -v n="$1" -v l="${2:-}" '(index($1, n "{") == 1 || $1 == n) && index($1, l) {s += $NF} END {printf "%d\n", s}'
}

# metric_sum PORT NAME [LABEL-SUBSTRING]: series_sum of the controller's
# metrics port.
metric_sum() { curl -s "http://127.0.0.1:$1/metrics" | series_sum "$2" "${3:-}"; }

jp() { # jp NS KIND NAME JSONPATH
  kubectl get -n "$1" "$2" "$3" -o "jsonpath=$4" 2>/dev/null
}

# wait_for SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  "$@" >/dev/null 2>&1
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; } # listening PORT: 127.0.0.1:PORT accepts
bound() { [ "$(jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].status}')" = "True" ]; }
has_reason() { [ "$(jp "$1" sandbox "$2" '{.status.conditions[?(@.type=="Bound")].reason}')" = "$3" ]; }
pod_count() { kubectl get pods -n "$1" -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init --no-headers 2>/dev/null | wc -l; }

# Assertions record a failure for the current test and go on.
fail() { say "  FAIL: $*"; [ "${E2E_TEST_OK:-}" = 1 ] && E2E_FIRST_FAIL=$*; E2E_TEST_OK=0; }
expect_eq() { [ "$1" = "$2" ] || fail "${3:-values differ}: got '$1', want '$2'"; }
expect_ne() { [ "$1" != "$2" ] || fail "${3:-values equal}: both '$1'"; }
expect_match() { [[ "$1" =~ $2 ]] || fail "${3:-no match}: '$1' !~ /$2/"; }
expect_ok() { "$@" >/dev/null 2>&1 || fail "command failed: $*"; }
expect_fail() { ! "$@" >/dev/null 2>&1 || fail "command succeeded: $*"; }

# e2e_report LINE: with SBX_E2E_REPORT set (hack/test.sh), LINE (cut to 300
# bytes) is appended there with the suite's name and its logs' directory, so
# the run's summary names every failed test and its first failure.
e2e_report() {
  [ -n "${SBX_E2E_REPORT:-}" ] || return 0
  printf '%s %s (logs %s)\n' "$(basename "$0")" "$(printf '%s' "$1" | head -c 300)" "${E2E_DIR:-none}" >>"$SBX_E2E_REPORT"
}

# e2e_main: runs every test_* function (or those named in E2E_ONLY) and prints
# the summary line CI reads.
e2e_main() {
  local t
  for t in $(declare -F | awk '{print $3}' | grep '^test_'); do
    if [ -n "${E2E_ONLY:-}" ] && [[ " $E2E_ONLY " != *" $t "* ]]; then continue; fi
    E2E_TEST_OK=1 E2E_FIRST_FAIL=
    say "RUN  $t"
    "$t"
    if [ "$E2E_TEST_OK" = 1 ]; then
      E2E_PASSED=$((E2E_PASSED + 1)); say "PASS $t"
    else
      E2E_FAILED=$((E2E_FAILED + 1)); E2E_FAILURES+=("$t"); say "FAIL $t"
      e2e_report "$t: ${E2E_FIRST_FAIL:-}"
    fi
  done
  # Every controller is stopped with SIGTERM (a clean shutdown is part of the
  # contract, and it lets LeakSanitizer run in a sanitizer build); any sanitizer
  # report (ASan, LSan, UBSan, TSan) in a controller log fails the run.
  local p
  for p in $(tracked_pids); do controller_stop "$p"; done
  local reports="ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer"
  if grep -lE "$reports" "$E2E_DIR"/*.log >/dev/null 2>&1; then
    E2E_FAILED=$((E2E_FAILED + 1)); E2E_FAILURES+=(sanitizer)
    say "FAIL sanitizer reports in: $(grep -lE "$reports" "$E2E_DIR"/*.log | tr '\n' ' ')"
    e2e_report "sanitizer: $(grep -hE -m1 "$reports" "$E2E_DIR"/*.log | head -1)"
  fi
  echo "$(basename "$0"): $E2E_PASSED passed, $E2E_FAILED failed"
  [ "$E2E_FAILED" -eq 0 ]
}

# user_kubeconfig NAME: a client certificate for user NAME signed by the
# cluster CA, and a kubeconfig using it; prints the kubeconfig path.
user_kubeconfig() {
  local u=$1 p="$E2E_DIR/pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/$u.key" 2>/dev/null
  openssl req -new -key "$p/$u.key" -subj "/CN=$u" -out "$p/$u.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$p/$u.ext"
  openssl x509 -req -in "$p/$u.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 1 \
    -extfile "$p/$u.ext" -out "$p/$u.crt" 2>/dev/null
  sed -e "s#$p/controller.crt#$p/$u.crt#; s#$p/controller.key#$p/$u.key#; s#name: controller#name: $u#; s#user: controller#user: $u#" \
    "$E2E_DIR/controller.kubeconfig" >"$E2E_DIR/$u.kubeconfig"
  echo "$E2E_DIR/$u.kubeconfig"
}

# crd_stub GROUP KIND PLURAL [APPROVAL]: a minimal CRD accepting any spec,
# standing in for an operator (cert-manager, Prometheus Operator) this cluster
# does not run; APPROVAL: the api-approved.kubernetes.io annotation a CRD of a
# *.k8s.io group must carry.
crd_stub() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: $3.$1
  annotations: {${4:+api-approved.kubernetes.io: "$4"}}
spec:
  group: $1
  names: {kind: $2, plural: $3, singular: $(echo "$2" | tr '[:upper:]' '[:lower:]'), listKind: ${2}List}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
YAML
  kubectl wait --for=condition=Established "crd/$3.$1" --timeout=30s >/dev/null
}

# controller_pods_on_kwok NS N: N controller pods, each bound to a kwok node and Running.
controller_pods_on_kwok() {
  local out
  out=$(kubectl get pods -n "$1" -l app.kubernetes.io/name=sandbox-controller \
    -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}' 2>/dev/null)
  [ "$(grep -c '^kwok-node-[0-9]* Running$' <<<"$out")" -eq "$2" ] && [ "$(grep -c . <<<"$out")" -eq "$2" ]
}

# free_port: a free TCP port on 127.0.0.1, never given before in this run
# (hack/free-port.py: the kernel may hand out one port twice in a row).
free_port() { python3 "$E2E_ROOT/hack/free-port.py" ${E2E_DIR:+"$E2E_DIR/ports-given"}; }

# wait_dead PID SECONDS: waits for a process to exit; 0 when it did.
wait_dead() {
  local i
  for i in $(seq 1 $(($2 * 10))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}

# delete_pod NS NAME SECONDS: deletes a pod and waits until that pod (its uid)
# is gone. Not `kubectl delete --wait`, which follows the name: the controller
# may rightly re-use the name at once.
delete_pod() {
  local uid
  uid=$(kubectl get pod -n "$1" "$2" -o jsonpath='{.metadata.uid}')
  kubectl delete pod -n "$1" "$2" --wait=false >/dev/null
  wait_for "$3" pod_uid_is_not "$1" "$2" "$uid"
}
pod_uid_is_not() { [ "$(kubectl get pod -n "$1" "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null)" != "$3" ]; }

# bound_count_is NS N: exactly N Sandboxes in NS have Bound=True.
bound_count_is() { [ "$(count_bound "$1")" -eq "$2" ]; }

# count_bound NS: Sandboxes in NS with Bound=True.
count_bound() {
  kubectl get sbx -n "$1" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Bound")].status}{"\n"}{end}' |
    grep -c '^True$'
}

# refuse_pod_creates NS NAME EXPRESSION MESSAGE: a ValidatingAdmissionPolicy
# NAME and its binding (Deny) refuse, with MESSAGE, each pod create in NS
# (labelled e2e-refuse=NAME) for which the CEL EXPRESSION is false. The API
# server takes a few seconds to enforce it: the caller waits.
refuse_pod_creates() {
  REFUSE_RULE='{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}' refuse_requests "$@"
}

# refuse_requests NS NAME EXPRESSION MESSAGE: refuse_pod_creates for the
# requests REFUSE_RULE names (a resourceRules item, e.g. UPDATE of
# sandboxes/status); allow_pod_creates NAME ends it.
refuse_requests() {
  kubectl label namespace "$1" "e2e-refuse=$2" >/dev/null
  kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $2}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [$REFUSE_RULE]
  validations:
  - expression: "$3"
    message: "$4"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $2}
spec:
  policyName: $2
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {e2e-refuse: $2}}}
YAML
}

# allow_pod_creates NAME: refuse_pod_creates' policy NAME and its binding gone.
allow_pod_creates() {
  kubectl delete validatingadmissionpolicybinding "$1" >/dev/null
  kubectl delete validatingadmissionpolicy "$1" >/dev/null
}
