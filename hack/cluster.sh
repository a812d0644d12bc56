#!/usr/bin/env bash
# A real local control plane for development and tests: etcd, kube-apiserver,
# kube-controller-manager (garbage collector, namespaces, service accounts,
# deployments, replica sets, jobs, ClusterRole aggregation),
# kube-scheduler and kwok (fake nodes, so pods become Running; `kubectl exec`
# into a pod runs a local process, configured per pod by a kwok `Exec` object).
#
#   hack/cluster.sh up DIR     start one in DIR (created), print its kubeconfig path
#   hack/cluster.sh down DIR   stop it and leave no process behind
#   hack/cluster.sh restart-apiserver DIR   stop and start kube-apiserver only
#   hack/cluster.sh nodes DIR N   have N kwok nodes (2 come up with it)
#   hack/cluster.sh realnode DIR  add the real node (kubelet, containerd, runc;
#                                 hack/realnode.sh); SBX_REAL_NODE=1 up starts
#                                 the cluster with it; down stops it too
#   hack/cluster.sh realnode-check   why this machine cannot run it (exit 1)
#   hack/cluster.sh realnode-import DIR ARCHIVE NAME   an OCI archive into its containerd
#   hack/cluster.sh realnode-enforcer DIR stop|start   its NetworkPolicy enforcer
#                                 (SBX_REAL_NODE_ENFORCER=kube-router)
#
# Everything binds to 127.0.0.1 on free ports and lives under DIR, so several
# control planes run side by side. Certificates are made with openssl: a CA, the
# apiserver's serving certificate, an admin client certificate (O=system:masters),
# a controller client certificate (CN=sandbox-controller) and service-account keys.
#
# The API server authenticates itself to admission webhooks with a client
# certificate (an AdmissionConfiguration whose kubeconfig names it for every
# webhook host), signed by a CA of its own: pki/webhook-client-ca.crt is what a
# webhook passes as --webhook-client-ca-file, and only the API server holds a
# certificate it signed (pki/apiserver-webhook-client.crt, CN
# kube-apiserver-admission). The cluster CA cannot stand in: it signs every
# user's client certificate.
#
# Exec, attach, port-forward and logs go through the API server to kwok as the
# nodes' kubelet: the nodes' InternalIP is 127.0.0.1 and their kubelet port is
# kwok's own (KWOK_PORT), served with a certificate of the cluster CA that the
# API server verifies. kwok reads `Exec` objects (kwok.x-k8s.io/v1alpha1, named
# like the pod) from the API: `spec.execs[].local.workDir` is the folder the
# command runs in on this machine, e.g.
#   {apiVersion: kwok.x-k8s.io/v1alpha1, kind: Exec, metadata: {name: POD, namespace: NS},
#    spec: {execs: [{local: {workDir: /some/folder}}]}}
# A pod without one refuses exec ("no exec found").
#
# A realistic container start, opt-in (benchmarks; every suite runs without it):
#   SBX_KWOK_POD_READY_DELAY_MS=3000 SBX_KWOK_POD_READY_JITTER_MS=1000 hack/cluster.sh up DIR
# makes kwok leave each scheduled pod Pending for a delay drawn uniformly from
# [DELAY, DELAY + JITTER) ms before it turns Running and Ready (kwok's own
# pod-ready Stage with a `delay`; its completion and deletion Stages unchanged,
# deletions immediate). kwok draws the delay when it sees the pod and draws it
# again if the pod changes before it is Ready (an update restarts the wait).
# Unset or 0: pods Ready at once, as with kwok's default stages. Either way
# sandbox-controller's workspace preparation pods (label
# sandbox.dev/workspace-init) run to completion (Succeeded, exit code 0), and
# pods of the test image registry.local/exits:1 fail as soon as they run
# (exit code 1).
set -euo pipefail

HACK=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
DIR=${2:-}
[ -n "$cmd" ] && { [ -n "$DIR" ] || [ "$cmd" = realnode-check ]; } ||
  { echo "usage: $0 up|down|restart-apiserver|nodes|realnode|realnode-import|realnode-enforcer DIR, or $0 realnode-check" >&2; exit 2; }

log() { echo "cluster: $*" >&2; }

free_port() { python3 "$HACK/free-port.py" "$DIR/ports-given"; }

# start NAME CMD...: runs CMD in its own session with its output in DIR/logs.
# DIR/pids/NAME holds its process ID, DIR/pids/NAME.start that process's
# start time (field 22 of /proc/PID/stat), so that stop_one never signals
# another process given the ID after NAME ended early (a crashed kwok): the
# kernel reuses IDs within minutes of a CI run.
start() {
  local name=$1; shift
  setsid "$@" >"$DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$DIR/pids/$name"
  proc_start $! >"$DIR/pids/$name.start"
}

# proc_start PID: its start time, nothing when it is gone (as e2e/lib.sh's).
proc_start() { awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null || true; }

# stop_one NAME: stops NAME's session, if NAME still runs under its ID.
stop_one() {
  local f="$DIR/pids/$1" pid started
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  started=$(cat "$f.start" 2>/dev/null || echo unknown)
  # NAME ended and its ID was given to another process: not ours to stop.
  # (unknown: a folder of an earlier version; as before.)
  if [ "$started" != unknown ] && [ "$(proc_start "$pid")" != "$started" ]; then
    rm -f "$f" "$f.start"
    return 0
  fi
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f" "$f.start"
}

# The real node's functions (realnode_up, realnode_down, realnode_check).
# shellcheck source=hack/realnode.sh
. "$HACK/realnode.sh"

wait_http() { # wait_http NAME URL SECONDS [curl args...]
  local name=$1 url=$2 secs=$3; shift 3
  local i
  for i in $(seq 1 $((secs * 10))); do
    if curl -fsS -o /dev/null --max-time 2 "$@" "$url" 2>/dev/null; then return 0; fi
    if [ -f "$DIR/pids/$name" ] && ! kill -0 "$(cat "$DIR/pids/$name")" 2>/dev/null; then
      log "$name exited; last lines of $DIR/logs/$name.log:"; tail -n 20 "$DIR/logs/$name.log" >&2; return 1
    fi
    sleep 0.1
  done
  log "$name not ready at $url after ${secs}s; see $DIR/logs/$name.log"; tail -n 20 "$DIR/logs/$name.log" >&2
  return 1
}

# cert NAME SUBJ [SAN]: DIR/pki/NAME.{crt,key} signed by the cluster CA; a
# serving certificate for SAN, else a client certificate.
cert() {
  local p="$DIR/pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/$1.key" 2>/dev/null
  openssl req -new -key "$p/$1.key" -subj "$2" -out "$p/$1.csr" 2>/dev/null
  local ext="$p/$1.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=digitalSignature,keyEncipherment"
    if [ -n "${3:-}" ]; then echo "extendedKeyUsage=serverAuth"; echo "subjectAltName=$3"
    else echo "extendedKeyUsage=clientAuth"; fi; } >"$ext"
  openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$p/$1.crt" 2>/dev/null
  rm -f "$p/$1.csr" "$ext"
  chmod 600 "$p/$1.key"
}

make_certs() {
  local p="$DIR/pki"
  mkdir -p "$p"
  [ -f "$p/ca.crt" ] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$p/ca.key" -subj "/CN=sandbox-local-ca" -days 3650 -out "$p/ca.crt" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=admin"
  cert controller "/CN=sandbox-controller"
  # The API server's client certificate towards webhooks, under its own CA.
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/webhook-client-ca.key" 2>/dev/null
  openssl req -x509 -new -key "$p/webhook-client-ca.key" -subj "/CN=sandbox-local-webhook-client-ca" -days 3650 \
    -out "$p/webhook-client-ca.crt" 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/apiserver-webhook-client.key" 2>/dev/null
  openssl req -new -key "$p/apiserver-webhook-client.key" -subj "/CN=kube-apiserver-admission" \
    -out "$p/apiserver-webhook-client.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n' >"$p/awc.ext"
  openssl x509 -req -in "$p/apiserver-webhook-client.csr" -CA "$p/webhook-client-ca.crt" -CAkey "$p/webhook-client-ca.key" \
    -CAcreateserial -days 3650 -extfile "$p/awc.ext" -out "$p/apiserver-webhook-client.crt" 2>/dev/null
  rm -f "$p/apiserver-webhook-client.csr" "$p/awc.ext"
  cert kwok "/CN=kwok" "IP:127.0.0.1,DNS:localhost"
  cert kubelet-client "/CN=kube-apiserver-kubelet-client"
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  chmod 600 "$p"/*.key
}

write_kubeconfig() { # write_kubeconfig FILE CERTNAME
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $DIR/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $DIR/pki/$2.crt
    client-key: $DIR/pki/$2.key
contexts:
- name: local
  context: {cluster: local, user: $2, namespace: default}
current-context: local
KC
}

# write_admission_config: the AdmissionConfiguration that gives the webhook
# admission plugins the API server's client certificate for every webhook host
# ('*' is the default entry of a WebhookAdmission kubeconfig).
write_admission_config() {
  cat >"$DIR/webhook-client.kubeconfig" <<KC
apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: $DIR/pki/apiserver-webhook-client.crt
    client-key: $DIR/pki/apiserver-webhook-client.key
KC
  cat >"$DIR/admission-config.yaml" <<AC
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $DIR/webhook-client.kubeconfig
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $DIR/webhook-client.kubeconfig
AC
}

start_apiserver() {
  local extra=()
  write_admission_config
  [ -f "$DIR/tokens.csv" ] && extra+=("--token-auth-file=$DIR/tokens.csv")
  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$DIR/pki/apiserver.crt" --tls-private-key-file="$DIR/pki/apiserver.key" \
    --client-ca-file="$DIR/pki/ca.crt" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$DIR/pki/sa.pub" \
    --service-account-signing-key-file="$DIR/pki/sa.key" \
    --disable-admission-plugins=ServiceAccount \
    --admission-control-config-file="$DIR/admission-config.yaml" \
    --allow-privileged=true --profiling=false \
    --kubelet-preferred-address-types=InternalIP \
    --kubelet-certificate-authority="$DIR/pki/ca.crt" \
    --kubelet-client-certificate="$DIR/pki/kubelet-client.crt" \
    --kubelet-client-key="$DIR/pki/kubelet-client.key" \
    --cert-dir="$DIR/pki" "${extra[@]}" ${SBX_APISERVER_FLAGS:-}
  wait_http kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" 90 \
    --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" --key "$DIR/pki/admin.key"
}

# exec_crd: the CustomResourceDefinition of kwok's Exec (kwok only lists and
# watches it; its fields are kwok's, so the schema keeps them all).
exec_crd() {
  "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" apply -f - >/dev/null <<'CRD'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: execs.kwok.x-k8s.io}
spec:
  group: kwok.x-k8s.io
  names: {kind: Exec, listKind: ExecList, plural: execs, singular: exec}
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
CRD
  # kubectl wait fails at once ("conditions accessor error: <nil>") when it
  # reads the CRD before the API server wrote any status: asked again.
  local i
  for i in 1 2 3 4 5 6; do
    "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" wait --for=condition=Established crd/execs.kwok.x-k8s.io \
      --timeout=10s >/dev/null 2>&1 && return 0
    sleep 1
  done
  "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" wait --for=condition=Established crd/execs.kwok.x-k8s.io --timeout=10s >/dev/null
}

# write_pod_stages FILE DELAY_MS JITTER_MS: hack/kwok-pod-stages.yaml with
# that delay before a pod turns Running and Ready.
write_pod_stages() {
  sed -e "s/DELAY_MS/$2/" -e "s/UNTIL_MS/$(($2 + $3))/" "$HACK/kwok-pod-stages.yaml" >"$1"
}

load_state() {
  # shellcheck disable=SC1091
  . "$DIR/state"
}

# nodes N: kwok nodes kwok-node-0 .. N-1 (2,000 CPUs, 8 TiB and 2,000 pods
# each), Ready and schedulable.
nodes() {
  local n
  for n in $(seq 0 $(($1 - 1))); do
    "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$n
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$n, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "2000", memory: 8Ti, pods: "2000"}
  capacity: {cpu: "2000", memory: 8Ti, pods: "2000"}
NODE
  done
  # Wait until kwok reports the nodes Ready so the first pod does not sit Pending.
  "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" wait --for=condition=Ready node --all --timeout="$(($1 > 2 ? 120 : 60))s" >/dev/null
  # Admission taints new nodes not-ready; the node-lifecycle controller (not run
  # here: kwok owns node health) would lift it once Ready, so lift it ourselves.
  "$BIN/kubectl" --kubeconfig="$DIR/kubeconfig" taint nodes --all node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
}

up() {
  BIN=$("$HACK/build-control-plane.sh")
  mkdir -p "$DIR/logs" "$DIR/pids" "$DIR/etcd"
  DIR=$(cd "$DIR" && pwd)
  make_certs
  local try
  for try in 1 2 3; do
    ETCD_PORT=$(free_port); ETCD_PEER_PORT=$(free_port); APISERVER_PORT=$(free_port)
    KWOK_PORT=$(free_port)
    cat >"$DIR/state" <<ST
BIN=$BIN
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
KWOK_PORT=$KWOK_PORT
ST
    start etcd "$BIN/etcd" --name=default --data-dir="$DIR/etcd" \
      --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
      --initial-cluster="default=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level=warn
    if wait_http etcd "http://127.0.0.1:$ETCD_PORT/health" 30 && start_apiserver; then break; fi
    # A port free when picked was taken before the bind (clusters of suites
    # side by side pick theirs at the same moment): again with new ports.
    grep -qs "address already in use" "$DIR/logs/etcd.log" "$DIR/logs/kube-apiserver.log" && [ "$try" -lt 3 ] || return 1
    log "a port was taken meanwhile: etcd and kube-apiserver again on new ports"
    stop_one kube-apiserver; stop_one etcd
    rm -rf "$DIR/etcd"; mkdir -p "$DIR/etcd"
  done
  write_kubeconfig "$DIR/kubeconfig" admin
  write_kubeconfig "$DIR/controller.kubeconfig" controller
  export KUBECONFIG="$DIR/kubeconfig"
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$DIR/kubeconfig" \
    --leader-elect=false --secure-port=0 \
    --controllers=garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,persistentvolume-binder-controller,deployment-controller,replicaset-controller,job-controller,clusterrole-aggregation-controller,resourcequota-controller \
    --service-account-private-key-file="$DIR/pki/sa.key" --root-ca-file="$DIR/pki/ca.crt" \
    --concurrent-gc-syncs=5
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$DIR/kubeconfig" --leader-elect=false \
    --secure-port=0
  exec_crd
  local stages=() delay=${SBX_KWOK_POD_READY_DELAY_MS:-0} jitter=${SBX_KWOK_POD_READY_JITTER_MS:-0}
  [[ $delay =~ ^[0-9]+$ && $jitter =~ ^[0-9]+$ ]] ||
    { log "SBX_KWOK_POD_READY_DELAY_MS and SBX_KWOK_POD_READY_JITTER_MS must be milliseconds"; return 1; }
  write_pod_stages "$DIR/kwok-pod-stages.yaml" "$delay" "$jitter"
  stages=(--config="$DIR/kwok-pod-stages.yaml")
  if [ "$delay" -gt 0 ] || [ "$jitter" -gt 0 ]; then log "kwok: pods Ready after $delay ms + up to $jitter ms"; fi
  start kwok "$BIN/kwok" "${stages[@]}" --kubeconfig="$DIR/kubeconfig" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --manage-nodes-with-label-selector= --manage-single-node= \
    --cidr=10.0.0.0/24 --server-address="127.0.0.1:$KWOK_PORT" \
    --node-ip=127.0.0.1 --node-port="$KWOK_PORT" --enable-crds=Exec \
    --tls-cert-file="$DIR/pki/kwok.crt" --tls-private-key-file="$DIR/pki/kwok.key"
  nodes 2
  if [ -n "${SBX_REAL_NODE:-}" ]; then realnode_up || return 1; fi
  log "control plane up in $DIR (apiserver https://127.0.0.1:$APISERVER_PORT)"
  echo "$DIR/kubeconfig"
}

down() {
  [ -d "$DIR" ] || return 0
  DIR=$(cd "$DIR" && pwd)
  local n
  realnode_down
  for n in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_one "$n"; done
  log "control plane in $DIR stopped"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  nodes)
    [[ ${3:-} =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 nodes DIR N" >&2; exit 2; }
    load_state
    nodes "$3"
    ;;
  realnode)
    load_state
    DIR=$(cd "$DIR" && pwd)
    realnode_up
    ;;
  realnode-check)
    realnode_check
    ;;
  realnode-enforcer)
    load_state
    RN=$DIR/realnode
    case ${3:-} in
      stop) stop_one realnode-enforcer ;;
      start) [ -f "$DIR/pids/realnode-enforcer" ] || rn_enforcer_start ;;
      *) echo "usage: $0 realnode-enforcer DIR stop|start" >&2; exit 2 ;;
    esac
    ;;
  realnode-import)
    [ -f "${3:-}" ] && [ -n "${4:-}" ] || { echo "usage: $0 realnode-import DIR ARCHIVE NAME" >&2; exit 2; }
    RN=$DIR/realnode
    rn_import "$3" "$4"
    ;;
  restart-apiserver)
    load_state
    stop_one kube-apiserver
    start_apiserver
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
