# shellcheck shell=bash
# One real node beside kwok's fake ones, sourced by hack/cluster.sh:
#
#   hack/cluster.sh realnode DIR        start it in the running cluster DIR
#   SBX_REAL_NODE=1 hack/cluster.sh up DIR   start the cluster with it
#   hack/cluster.sh realnode-check      say why this machine cannot run one (exit 1)
#   hack/cluster.sh realnode-import DIR ARCHIVE NAME   import an OCI archive as NAME
#   hack/cluster.sh down DIR            stops it too, leaving nothing behind
#
# The node is the kubelet built from the same Kubernetes module as the control
# plane (hack/build-control-plane.sh kubelet), Debian's containerd, runc and CNI
# plugins. Every process has its own config, state, socket, logs and PID file
# under DIR/realnode (DIR/logs/realnode-*.log, DIR/pids/realnode-*): containerd's
# root, state, gRPC socket and runc root, the kubelet's root, certificates and
# pod logs, the CNI configuration and IP allocations.
#
# Scheduling: the node is labelled node.sandbox.dev/real=true and tainted
# node.sandbox.dev/real=true:NoSchedule, so kwok's nodes stay the default and a
# pod reaches the real node only with a matching nodeSelector and toleration.
#
# Images: nothing can be pulled (no registry is reachable, and containerd's
# pulls go to a proxy address on 127.0.0.1 where nothing listens, so a missing
# image fails at once, ErrImagePull, with no traffic off the machine).
# hack/realnode-images.sh
# builds sbx.local/pause:1 (containerd's sandbox_image) and sbx.local/sandbox:1
# offline and they are imported at start; import others with realnode-import.
# A pod must use imagePullPolicy IfNotPresent or Never (a tag other than
# :latest defaults to IfNotPresent).
#
# Exec, attach, logs and port-forward: the API server dials the node's
# InternalIP. The kubelet refuses a loopback node IP, so it runs as with an
# external cloud provider (--cloud-provider=external, no --node-ip) and this
# script plays that provider's one part: it sets the node's address to
# 127.0.0.1 (the kubelet then keeps it) and lifts the uninitialized taint. The
# kubelet listens on 127.0.0.1 only, with a serving certificate of the cluster
# CA, and asks the API server (SubjectAccessReview) about every caller.
#
# Network: pods get 10.213.0.0/24 (SBX_REAL_NODE_POD_CIDR) on the bridge
# sbxr0, with no gateway, no default route and no masquerade: a pod reaches
# only its own loopback and the pods on this bridge. Belt and braces, the
# chains SBX-REALNODE-FWD and SBX-REALNODE-IN (iptables and ip6tables, jumped
# to first from FORWARD and INPUT) drop everything a pod sends that would be
# forwarded or delivered to this machine, except pod to pod on the bridge and
# answers to connections the machine opened.
#
# Test network (SBX_REAL_NODE_GATEWAY=ADDR, off by default): the pods get a
# default route through ADDR, an address of the bridge's subnet that nothing
# on the machine holds; the end-to-end suite that sets it (e2e/test_network.sh)
# puts a network namespace of its own there, with its stand-in listeners, so
# what a pod sends off the bridge reaches only that namespace.
#
# NetworkPolicy (SBX_REAL_NODE_ENFORCER=kube-router, off by default): the
# network policy controller of kube-router (hack/tools.sh kube-router; its
# router and service proxy off) runs beside the kubelet and enforces the
# cluster's NetworkPolicies on this node's pods with iptables and ipset
# (bridged pod traffic passes iptables: br_netfilter). `hack/cluster.sh
# realnode-enforcer DIR stop|start` stops it (its rules stay, so pods made
# meanwhile are not enforced) and starts it again. down removes its chains
# and ipsets.
#
# One real node per machine at a time: the bridge, the kubelet's cgroup root,
# the kernel settings the kubelet changes and the iptables chains are the
# machine's. A second `realnode` WAITS for the first to go (the lock
# /run/sandbox-controller-realnode.lock; it says whose cluster holds it) for
# up to SBX_REAL_NODE_WAIT seconds (default 1800), then refuses.
#
# `down` stops the kubelet, kills every container task and its shim, stops
# containerd, unmounts what is mounted under DIR/realnode, removes the
# cgroups, the bridge, the chains (its own and the kubelet's KUBE-* chains it
# added), the /var/log/containers links into its pod logs, restores the
# kernel settings the kubelet changed and releases the lock.

RN_NODE=sbx-real-node
RN_BRIDGE=sbxr0
RN_CIDR=${SBX_REAL_NODE_POD_CIDR:-10.213.0.0/24}
RN_LOCK=/run/sandbox-controller-realnode.lock
RN_LOCK_INFO=/run/sandbox-controller-realnode.owner
RN_CGROUP=sbx-realnode
RN_LABEL=node.sandbox.dev/real
RN_PAUSE=sbx.local/pause:1
RN_CHAINS=(SBX-REALNODE-FWD SBX-REALNODE-IN)
# Folders outside DIR that the kubelet, containerd's shims and the CNI library
# write to whatever their configuration says (device-plugin socket, shim
# sockets, CNI result cache, log links): down removes what the node put there,
# and each folder itself when the node made it.
RN_MACHINE_DIRS=(/var/lib/kubelet /var/lib/cni /run/containerd /var/log/containers)
# Kernel settings the kubelet sets when they differ (setupKernelTunables).
RN_SYSCTLS=(vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys
            kernel/keys/root_maxbytes)

rn_log() { echo "realnode: $*" >&2; }

# realnode_check: prints why this machine cannot run the real node and
# returns 1, or returns 0 quietly.
realnode_check() {
  local why=() c
  # A stock Debian kernel has overlay and br_netfilter as modules (this
  # project's VM has them built in): load what the node needs, quietly; the
  # checks below then decide. br_netfilter only for the enforcer: loading it
  # makes every bridge of the machine pass iptables, and it is not unloaded.
  if [ "$(id -u)" -eq 0 ] && command -v modprobe >/dev/null; then
    modprobe -q overlay 2>/dev/null || :
    [ "${SBX_REAL_NODE_ENFORCER:-}" != kube-router ] || modprobe -q br_netfilter 2>/dev/null || :
  fi
  [ "$(uname -s)" = Linux ] || why+=("not Linux")
  [ "$(id -u)" -eq 0 ] || why+=("not root (containerd, runc and the kubelet need root)")
  for c in containerd containerd-shim-runc-v2 runc ctr iptables ip6tables ip buildah gcc busybox flock; do
    command -v "$c" >/dev/null || why+=("$c is missing (hack/deps.sh installs it)")
  done
  if [ "${SBX_REAL_NODE_ENFORCER:-}" = kube-router ]; then
    command -v ipset >/dev/null || why+=("ipset is missing (hack/deps.sh installs it; kube-router needs it)")
    [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] ||
      why+=("no br_netfilter in this kernel: bridged pod traffic would bypass the enforcer's iptables rules")
  elif [ -n "${SBX_REAL_NODE_ENFORCER:-}" ]; then
    why+=("SBX_REAL_NODE_ENFORCER=$SBX_REAL_NODE_ENFORCER: only kube-router is known")
  fi
  for c in bridge host-local loopback; do
    [ -x "/usr/lib/cni/$c" ] || why+=("the CNI plugin /usr/lib/cni/$c is missing (containernetworking-plugins)")
  done
  grep -qw overlay /proc/filesystems 2>/dev/null || why+=("no overlay file system in this kernel")
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || why+=("no cgroup hierarchy mounted")
  if command -v ip >/dev/null && ip route show to match "${RN_CIDR%/*}" 2>/dev/null | grep -qv '^default'; then
    why+=("$RN_CIDR is routed on this machine already (set SBX_REAL_NODE_POD_CIDR)")
  fi
  [ ${#why[@]} -eq 0 ] && return 0
  printf '%s\n' "${why[@]}"
  return 1
}

rn_ctr() { ctr -a "$RN/containerd/containerd.sock" -n k8s.io "$@"; }

# rn_lock: takes the machine's real-node lock for DIR, waiting for another
# cluster's node to go (SBX_REAL_NODE_WAIT seconds). The lock is held by a
# process of this cluster (pids/realnode-lock) until down.
rn_lock() {
  local wait=${SBX_REAL_NODE_WAIT:-1800} said=0 end
  [[ $wait =~ ^[0-9]+$ ]] || { rn_log "SBX_REAL_NODE_WAIT must be seconds"; return 1; }
  end=$((SECONDS + wait))
  rm -f "$RN/locked"
  # shellcheck disable=SC2016
  start realnode-lock flock "$RN_LOCK" sh -c 'printf "%s (pid %s)\n" "$1" "$$" >"$2"; : >"$3"; exec sleep infinity' \
    sh "$DIR" "$RN_LOCK_INFO" "$RN/locked"
  while [ ! -e "$RN/locked" ]; do
    if [ $said = 0 ] && [ $((SECONDS - end + wait)) -ge 2 ]; then
      rn_log "waiting for the real node of another cluster to go: $(cat "$RN_LOCK_INFO" 2>/dev/null || echo '?')" \
        "holds $RN_LOCK (one real node per machine; up to ${wait}s, SBX_REAL_NODE_WAIT)"
      said=1
    fi
    if [ $SECONDS -ge "$end" ]; then
      stop_one realnode-lock
      rn_log "refused: the machine's real node still belongs to $(cat "$RN_LOCK_INFO" 2>/dev/null || echo '?')" \
        "after ${wait}s; stop it with hack/cluster.sh down on that folder"
      return 1
    fi
    sleep 0.5
  done
  [ $said = 0 ] || rn_log "got the real node lock"
}

rn_cgroup_dirs() { # the node's cgroup root in every mounted hierarchy
  local h
  # cgroup v2 alone (systemd's default, Debian 12): /sys/fs/cgroup is the one
  # hierarchy and its subfolders are cgroups (system.slice, ...), not hierarchies.
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup/$RN_CGROUP"
    return 0
  fi
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h" ] && [ -e "${h}cgroup.procs" ] && echo "${h}$RN_CGROUP"
  done
  return 0
}

# The steps of realnode_up return non-zero on the first failure: realnode_up
# runs with set -e off (hack/cluster.sh's up calls it in an || list).
rn_cgroups_make() {
  local d
  for d in $(rn_cgroup_dirs); do
    mkdir -p "$d" || return 1
    case $d in
      */cpuset/*) cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus" &&
        cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems" || return 1 ;;
    esac
  done
}

rn_cgroups_remove() {
  local d
  for d in $(rn_cgroup_dirs); do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

# rn_iptables_chains TOOL: "table chain" for every KUBE-* chain TOOL lists.
rn_kube_chains() {
  local t
  for t in filter nat mangle; do
    "$1" -t "$t" -S 2>/dev/null | awk -v t="$t" '$1 == "-N" && $2 ~ /^KUBE-/ {print t, $2}'
  done
}

rn_firewall_up() {
  local ipt
  for ipt in iptables ip6tables; do
    rn_kube_chains "$ipt" >"$RN/kube-chains-before.$ipt" || return 1
    { "$ipt" -N SBX-REALNODE-FWD 2>/dev/null || "$ipt" -F SBX-REALNODE-FWD; } &&
      "$ipt" -A SBX-REALNODE-FWD -i "$RN_BRIDGE" -o "$RN_BRIDGE" -j ACCEPT &&
      "$ipt" -A SBX-REALNODE-FWD -i "$RN_BRIDGE" -j DROP &&
      "$ipt" -A SBX-REALNODE-FWD -o "$RN_BRIDGE" -j DROP &&
      { "$ipt" -N SBX-REALNODE-IN 2>/dev/null || "$ipt" -F SBX-REALNODE-IN; } &&
      "$ipt" -A SBX-REALNODE-IN -i "$RN_BRIDGE" -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT &&
      "$ipt" -A SBX-REALNODE-IN -i "$RN_BRIDGE" -j DROP &&
      { "$ipt" -C FORWARD -j SBX-REALNODE-FWD 2>/dev/null || "$ipt" -I FORWARD 1 -j SBX-REALNODE-FWD; } &&
      { "$ipt" -C INPUT -j SBX-REALNODE-IN 2>/dev/null || "$ipt" -I INPUT 1 -j SBX-REALNODE-IN; } ||
      { rn_log "cannot set up the chains SBX-REALNODE-FWD and SBX-REALNODE-IN with $ipt"; return 1; }
  done
}

# The ipsets kube-router made (the firewall's chains that used them are gone).
rn_ipsets_down() {
  [ -f "$RN/ipsets-before" ] && command -v ipset >/dev/null || return 0
  ipset list -n 2>/dev/null | grep -vxFf "$RN/ipsets-before" | while read -r set; do
    ipset destroy "$set" 2>/dev/null
  done
  return 0
}

rn_firewall_down() {
  local ipt t ch b
  for ipt in iptables ip6tables; do
    while "$ipt" -D FORWARD -j SBX-REALNODE-FWD 2>/dev/null; do :; done
    while "$ipt" -D INPUT -j SBX-REALNODE-IN 2>/dev/null; do :; done
    for ch in "${RN_CHAINS[@]}"; do "$ipt" -F "$ch" 2>/dev/null; "$ipt" -X "$ch" 2>/dev/null; done
    # The kubelet's own chains (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY,
    # KUBE-FIREWALL and its jumps) that were not there before it started.
    [ -f "$RN/kube-chains-before.$ipt" ] || continue
    # (and kube-router's KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-*, which
    # jump to each other: all are flushed before any is deleted).
    rn_kube_chains "$ipt" | grep -vxFf "$RN/kube-chains-before.$ipt" >"$RN/kube-chains-new.$ipt"
    while read -r t ch; do
      for b in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do
        while "$ipt" -t "$t" -D "$b" -j "$ch" 2>/dev/null; do :; done
        "$ipt" -t "$t" -S "$b" 2>/dev/null | { grep -- "-j $ch\b" || true; } | sed 's/^-A //' | while read -r rule; do
          # The rule as iptables prints it, its quoting kept (kube-router's
          # comments have spaces).
          eval "\"\$ipt\" -t \"\$t\" -D $rule" 2>/dev/null
        done
      done
      "$ipt" -t "$t" -F "$ch" 2>/dev/null
    done <"$RN/kube-chains-new.$ipt"
    while read -r t ch; do "$ipt" -t "$t" -X "$ch" 2>/dev/null; done <"$RN/kube-chains-new.$ipt"
  done
  return 0
}

rn_certs() {
  local p="$DIR/pki"
  [ -f "$p/realnode-kubelet.crt" ] && [ -f "$p/realnode-client.crt" ] && return 0
  cert realnode-kubelet "/CN=system:node:$RN_NODE" "IP:127.0.0.1,DNS:localhost,DNS:$RN_NODE" &&
    cert realnode-client "/O=system:nodes/CN=system:node:$RN_NODE" ||
    { rn_log "cannot make the kubelet's certificates in $p"; return 1; }
}

rn_containerd_config() {
  cat >"$RN/containerd/config.toml" <<TOML || return 1
version = 2
root = "$RN/containerd/root"
state = "$RN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$RN/containerd/containerd.sock"
[ttrpc]
  address = "$RN/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$RN/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$RN_PAUSE"
    # The kubelet asks for oom_score_adj -998 for the pause container;
    # lowering it needs CAP_SYS_RESOURCE, which this kind of machine lacks.
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    netns_mounts_under_state_dir = true
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$RN/runc"
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$RN/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
TOML
  # A bridge with no gateway: no route off the bridge, no forwarding, no
  # masquerade (see the network note at the top).
  cat >"$RN/cni/net.d/10-sbx-realnode.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "sbx-realnode", "plugins": [
  {"type": "bridge", "bridge": "$RN_BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$RN_CIDR"}]], "dataDir": "$RN/cni/ipam"$(rn_gateway_routes)}}
]}
JSON
}

# rn_gateway_routes: the IPAM routes of the test network (SBX_REAL_NODE_GATEWAY).
rn_gateway_routes() {
  [ -n "${SBX_REAL_NODE_GATEWAY:-}" ] || return 0
  printf ', "routes": [{"dst": "0.0.0.0/0", "gw": "%s"}]' "$SBX_REAL_NODE_GATEWAY"
}

# rn_enforcer_start: kube-router's network policy controller for this node.
rn_enforcer_start() {
  local kr
  kr=$("$HACK/tools.sh" kube-router) || return 1
  # Its chains go first in FORWARD, INPUT and OUTPUT (it keeps them there), so
  # the pod-to-pod ACCEPT of SBX-REALNODE-FWD sees only what it let through.
  start realnode-enforcer "$kr" --run-firewall=true --run-router=false --run-service-proxy=false \
    --enable-cni=false --enable-ipv4=true --enable-ipv6=false --kubeconfig="$DIR/kubeconfig" \
    --hostname-override="$RN_NODE" --service-cluster-ip-range="${SBX_SERVICE_CIDR:-10.0.0.0/24}" \
    --health-port=0 --metrics-port=0 --iptables-sync-period=30s --v=1
  local i
  for i in $(seq 1 300); do
    iptables -S KUBE-ROUTER-FORWARD >/dev/null 2>&1 && { rn_log "enforcer $(basename "$(dirname "$kr")") started (network policy controller only)"; return 0; }
    kill -0 "$(cat "$DIR/pids/realnode-enforcer")" 2>/dev/null || break
    sleep 0.1
  done
  rn_log "kube-router did not start; last lines of $DIR/logs/realnode-enforcer.log:"
  tail -n 20 "$DIR/logs/realnode-enforcer.log" >&2
  return 1
}

rn_kubelet_config() {
  local port=$1 hport=$2
  cat >"$RN/kubelet/config.yaml" <<YAML || return 1
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $hport
tlsCertFile: $DIR/pki/realnode-kubelet.crt
tlsPrivateKeyFile: $DIR/pki/realnode-kubelet.key
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $DIR/pki/ca.crt}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$RN/containerd/containerd.sock
imageServiceEndpoint: unix://$RN/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$RN_CGROUP
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
enforceNodeAllocatable: []
podLogsDir: $RN/pod-logs
resolvConf: ""
clusterDomain: cluster.local
registerWithTaints:
- {key: $RN_LABEL, value: "true", effect: NoSchedule}
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# Imported images must never be collected: nothing can pull them back.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
staticPodPath: ""
volumePluginDir: $RN/kubelet/volume-plugins
maxPods: 50
YAML
  sed -e "s#$DIR/pki/admin.crt#$DIR/pki/realnode-client.crt#; s#$DIR/pki/admin.key#$DIR/pki/realnode-client.key#" \
    "$DIR/kubeconfig" >"$RN/kubelet/kubeconfig"
}

# rn_import ARCHIVE NAME: imports an OCI archive into the node's containerd
# (namespace k8s.io, where the CRI looks) and names it NAME.
rn_import() {
  local out ref
  out=$(rn_ctr images import --digests "$1" 2>&1) || { rn_log "importing $1 failed: $out"; return 1; }
  ref=$(sed -n 's/^unpacking \(.*\) (sha256:.*$/\1/p' <<<"$out" | head -1)
  if [ -n "$2" ] && [ "$ref" != "$2" ]; then
    [ -n "$ref" ] || { rn_log "importing $1: no image in it: $out"; return 1; }
    rn_ctr images tag --force "$ref" "$2" >/dev/null || return 1
  fi
}

realnode_up() {
  RN=$DIR/realnode
  local why
  why=$(realnode_check) || { rn_log "this machine cannot run the real node: $(echo "$why" | paste -sd';')"; return 1; }
  [ -f "$DIR/pids/realnode-kubelet" ] && { rn_log "$DIR has a real node already"; return 1; }
  BIN=$("$HACK/build-control-plane.sh" kubelet) || return 1
  local images
  images=$("$HACK/realnode-images.sh") || return 1
  mkdir -p "$RN"/{containerd,cni/net.d,cni/ipam,kubelet/root,kubelet/volume-plugins,pod-logs,runc} || return 1
  rn_lock || return 1
  local s sysctls=("${RN_SYSCTLS[@]}")
  # kube-router's rules see bridged pod traffic only with this on (br_netfilter
  # sets it on when loaded; a machine's sysctl.d may not): set here, restored by down.
  if [ "${SBX_REAL_NODE_ENFORCER:-}" = kube-router ]; then sysctls+=(net/bridge/bridge-nf-call-iptables); fi
  : >"$RN/sysctls" || return 1
  for s in "${sysctls[@]}"; do echo "$s $(cat "/proc/sys/$s")" >>"$RN/sysctls"; done
  if [ "${SBX_REAL_NODE_ENFORCER:-}" = kube-router ]; then
    echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables ||
      { rn_log "cannot set net.bridge.bridge-nf-call-iptables=1 (the enforcer needs it)"; return 1; }
  fi
  local d
  for d in "${RN_MACHINE_DIRS[@]}"; do [ -d "$d" ] || echo "$d" >>"$RN/made-dirs"; done
  rn_cgroups_make || { rn_log "cannot make the cgroups $(rn_cgroup_dirs | paste -sd' ')"; return 1; }
  rn_firewall_up || return 1
  if command -v ipset >/dev/null; then ipset list -n >"$RN/ipsets-before" 2>/dev/null || :; fi
  rn_certs || return 1
  rn_containerd_config || { rn_log "cannot write containerd's and CNI's configuration under $RN"; return 1; }
  # No registry is reachable and none may be tried: a pull (an image that was
  # not imported, a typo) goes to a proxy on 127.0.0.1 that is not there, so
  # it fails at once without a name lookup or a packet off the machine.
  start realnode-containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= \
    containerd --config "$RN/containerd/config.toml" --log-level warn
  local i
  for i in $(seq 1 100); do rn_ctr version >/dev/null 2>&1 && break; sleep 0.1; done
  rn_ctr version >/dev/null 2>&1 || { rn_log "containerd did not start; see $DIR/logs/realnode-containerd.log"; return 1; }
  rn_import "$images/pause.oci.tar" "$RN_PAUSE" && rn_import "$images/sandbox.oci.tar" sbx.local/sandbox:1 || return 1
  local k=("$BIN/kubectl" --kubeconfig="$DIR/kubeconfig")
  "${k[@]}" apply -f - >/dev/null <<YAML || { rn_log "cannot write the real node's RBAC; the API server's last lines:"; tail -n 20 "$DIR/logs/kube-apiserver.log" >&2; return 1; }
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sbx-realnode-kubelet}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:node:$RN_NODE"}]
---
# The API server's calls to the kubelet (exec, attach, logs, port-forward):
# the kubelet asks the API server whether its client may make them.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sbx-realnode-apiserver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:kubelet-api-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
YAML
  local port hport
  port=$(free_port) && hport=$(free_port) || return 1
  rn_kubelet_config "$port" "$hport" || { rn_log "cannot write the kubelet's configuration under $RN/kubelet"; return 1; }
  start realnode-kubelet "$BIN/kubelet" --config="$RN/kubelet/config.yaml" --kubeconfig="$RN/kubelet/kubeconfig" \
    --root-dir="$RN/kubelet/root" --cert-dir="$RN/kubelet/pki" --hostname-override="$RN_NODE" \
    --cloud-provider=external --node-labels="$RN_LABEL=true" --v=1
  for i in $(seq 1 600); do
    "${k[@]}" get node "$RN_NODE" >/dev/null 2>&1 && break
    kill -0 "$(cat "$DIR/pids/realnode-kubelet")" 2>/dev/null ||
      { rn_log "the kubelet exited; last lines of $DIR/logs/realnode-kubelet.log:"; tail -n 20 "$DIR/logs/realnode-kubelet.log" >&2; return 1; }
    sleep 0.1
  done
  # The external cloud provider's part: the address the API server dials,
  # and the end of the uninitialized taint.
  "${k[@]}" patch node "$RN_NODE" --subresource=status --type=merge \
    -p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"$RN_NODE\"}]}}" >/dev/null || return 1
  "${k[@]}" taint node "$RN_NODE" node.cloudprovider.kubernetes.io/uninitialized- >/dev/null 2>&1 || true
  "${k[@]}" wait --for=condition=Ready "node/$RN_NODE" --timeout=120s >/dev/null ||
    { rn_log "node $RN_NODE not Ready; see $DIR/logs/realnode-kubelet.log"; return 1; }
  # As for kwok's nodes: no node-lifecycle controller runs to lift it.
  "${k[@]}" taint node "$RN_NODE" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  if [ "${SBX_REAL_NODE_ENFORCER:-}" = kube-router ]; then rn_enforcer_start || return 1; fi
  rn_log "node $RN_NODE Ready (kubelet $("$BIN/kubelet" --version | awk '{print $2}'), $(containerd --version | awk '{print "containerd", $3}'), $(runc --version | awk 'NR==1{print "runc", $3}')); label $RN_LABEL=true, taint $RN_LABEL=true:NoSchedule"
}

# rn_shim_pids: the shims of this node's containerd (their command line names its socket).
rn_shim_pids() {
  local p
  for p in $(pgrep -f containerd-shim-runc-v2 2>/dev/null); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "-address $RN/containerd/containerd.sock " && echo "$p"
  done
  return 0
}

realnode_down() {
  RN=$DIR/realnode
  [ -d "$RN" ] || return 0
  # Every step runs whatever the one before it did: down must not stop half way.
  local -
  set +e +o pipefail
  local id p i
  stop_one realnode-enforcer
  stop_one realnode-kubelet
  if [ -f "$DIR/pids/realnode-containerd" ] && rn_ctr version >/dev/null 2>&1; then
    for id in $(rn_ctr tasks ls -q 2>/dev/null); do rn_ctr tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1; done
    for id in $(rn_ctr tasks ls -q 2>/dev/null); do
      for i in $(seq 1 50); do rn_ctr tasks delete -f "$id" >/dev/null 2>&1 && break; sleep 0.1; done
    done
  fi
  stop_one realnode-containerd
  for p in $(rn_shim_pids); do kill -KILL "$p" 2>/dev/null; done
  # Mounts under the node's folder, deepest first (pod volumes and subPaths,
  # container root file systems, shm, network namespaces).
  awk -v d="$RN/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
  # The machine's parts only if this cluster held the real node lock: another
  # cluster's node may hold them now.
  if [ ! -e "$RN/locked" ]; then
    stop_one realnode-lock
    return 0
  fi
  rn_cgroups_remove
  ip link del "$RN_BRIDGE" 2>/dev/null
  rn_firewall_down
  rn_ipsets_down
  find /var/log/containers -maxdepth 1 -type l -lname "$RN/*" -delete 2>/dev/null
  for id in $(ls "$RN/containerd/state/io.containerd.grpc.v1.cri/sandboxes" 2>/dev/null); do
    rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null
  done
  local d
  if [ -f "$RN/made-dirs" ]; then
    while read -r d; do
      [ "$d" = /var/lib/kubelet ] && rm -f /var/lib/kubelet/device-plugins/kubelet.sock
      [ -d "$d" ] && find "$d" -depth -type d -empty -delete 2>/dev/null
    done <"$RN/made-dirs"
  fi
  local s v
  if [ -f "$RN/sysctls" ]; then
    while read -r s v; do [ -n "$v" ] && echo "$v" >"/proc/sys/$s" 2>/dev/null; done <"$RN/sysctls"
  fi
  grep -qF "$DIR " "$RN_LOCK_INFO" 2>/dev/null && rm -f "$RN_LOCK_INFO"
  stop_one realnode-lock
  rm -f "$RN/locked"
  rn_log "node $RN_NODE stopped; nothing of it left on the machine"
}
