#!/usr/bin/env bash
# End-to-end on the real node (hack/realnode.sh: kubelet, containerd, runc):
# sandboxes whose processes run. The controller runs with the admission
# webhook and the exec gate as deployed (lib_admission.sh), and its config
# sends every sandbox pod to the real node (nodeSelector and toleration of
# node.sandbox.dev/real); Sandboxes ask for small resources (the machine has
# 2 CPUs). Both workspace modes run: the claim sandbox-workspaces (a hostPath
# PersistentVolume under this suite's folder) and a hostPath root, the
# controller restarted with the other config between them (ctl_mode). The
# Python client and the kubectl plugin are installed as hack/test.sh
# installs them. A process is checked in containerd itself (its tasks), a
# file on this machine's disk.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=sbx.local/sandbox:1
# PID 1 of a container ignores SIGTERM it has no handler for: a trap, so a
# suspend or an expiry ends the process at once, not after 30 s of grace.
CMD='[sh, -c, "trap '"'"'exit 0'"'"' TERM; sleep infinity & wait"]'
E2E_ADMISSION=1
NS=team-a

setup() {
  SBX_REAL_NODE=1 cluster_up
  # The controller's image, for its workspace preparation pods.
  realnode_controller_image || exit 1
  grant_controller_rbac
  PV_ROOT=$E2E_DIR/pv
  WS_ROOT=$E2E_DIR/hostroot
  E2E_WORKSPACE_ROOT=$WS_ROOT  # the policies allow this hostPath root (lib_admission.sh)
  mkdir -p "$WS_ROOT"
  new_namespace "$NS" "$PV_ROOT"
  local node='  nodeSelector: {node.sandbox.dev/real: "true"}
  tolerations: [{key: node.sandbox.dev/real, operator: Exists, effect: NoSchedule}]'
  printf 'pod:\n%s\n' "$node" >"$E2E_DIR/pvc.yaml"
  printf 'workspace: {mode: hostPath, hostPathRoot: %s}\npod:\n%s\n' "$WS_ROOT" "$node" >"$E2E_DIR/hostpath.yaml"
  webhook_certs
  WEBHOOK_PORT=$(free_port)
  ctl_mode pvc
  E2E_POLICY_POD_SETTINGS=$REALNODE_POD_SETTINGS # the confinement admits the real node's selector
  install_admission "$WEBHOOK_PORT" sandbox-controller || { say "admission not installed"; exit 1; }
  ALICE=$(user_kubeconfig alice); BOB=$(user_kubeconfig bob)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: agent, namespace: $NS}
rules:
  - {apiGroups: [sandbox.dev], resources: [sandboxes], verbs: [get, list, watch, create, update, patch, delete]}
  - {apiGroups: [""], resources: [pods, pods/log], verbs: [get, list]}
  - {apiGroups: [""], resources: [pods/exec, pods/attach, pods/portforward], verbs: [get, create]}
  - {apiGroups: [sandbox.dev], resources: [sandboxwarmpools], verbs: [get, list, create, delete]}
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
  install_python_client || exit 1
}

# ctl_mode pvc|hostpath [FLAGS...]: (re)starts the controller with that
# workspace config (and FLAGS), serving the webhook on the same port, and
# waits until it answers.
ctl_mode() {
  [ -n "${CTL_PID:-}" ] && controller_stop "$CTL_PID"
  MODE=$1
  controller_start "ctl-$1" --config "$E2E_DIR/$1.yaml" --warm-pool-settle 3 "${@:2}" \
    --webhook-bind-address "127.0.0.1:$WEBHOOK_PORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" \
    --webhook-client-ca-file "$E2E_DIR/pki/webhook-client-ca.crt"
  # The webhook serves only the API server's client certificate.
  wait_for 30 curl -sk -o /dev/null --cert "$E2E_DIR/pki/apiserver-webhook-client.crt" \
    --key "$E2E_DIR/pki/apiserver-webhook-client.key" "https://127.0.0.1:$WEBHOOK_PORT/" ||
    say "the webhook does not answer"
}

as() { local kc=$1; shift; KUBECONFIG=$kc kubectl "$@"; }

# real_sandbox KUBECONFIG NAME OWNER [KEY] [COMMAND] [IMAGE]: a Sandbox (the
# sandbox image, $CMD, 100m CPU / 64Mi unless given) created as that user;
# KEY "-" means none, COMMAND is a YAML flow list.
real_sandbox() {
  local key=${4:-$2}
  as "$1" apply -f - 2>&1 <<YAML
apiVersion: sandbox.dev/v1alpha1
kind: Sandbox
metadata: {name: $2, namespace: $NS}
spec:
  image: ${6:-$IMG}
  command: ${5:-$CMD}
  resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
  workspaceOwner: $3
$([ "$key" = - ] || echo "  idempotencyKey: $key")
YAML
}

# py KUBECONFIG [ARGS...]: runs the Python program on stdin with the client.
py() { local kc=$1; shift; KUBECONFIG=$kc "$PY" - "$@"; }

# ctr ARGS...: containerd's own view of the real node (namespace k8s.io).
rn_ctr() { ctr -a "$E2E_DIR/realnode/containerd/containerd.sock" -n k8s.io "$@"; }
# container_of NAME: the container id of Sandbox NAME's pod (containerd://...).
container_of() {
  kubectl get pod -n "$NS" "$(pod_of "$1")" -o jsonpath='{.status.containerStatuses[0].containerID}' 2>/dev/null |
    sed 's#^containerd://##'
}
# task_running ID: containerd runs the task of container ID.
task_running() { [ -n "$1" ] && rn_ctr tasks ls 2>/dev/null | awk -v id="$1" '$1 == id && $3 == "RUNNING" {f = 1} END {exit !f}'; }
task_gone() { ! rn_ctr tasks ls 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }
# sh_in KUBECONFIG NAME SCRIPT [ARGS]: runs sh -c SCRIPT in Sandbox NAME's pod as that user.
sh_in() { local kc=$1 name=$2 script=$3; shift 3; as "$kc" exec -n "$NS" "$(pod_of "$name")" -- sh -c "$script" sh "$@" 2>&1; }

ready() { kubectl wait --for=condition=Ready "sandbox/$1" -n "$NS" --timeout="${2:-120}s" >/dev/null 2>&1; }
pod_of() { jp "$NS" sandbox "$1" '{.status.podName}'; }
why_not() { echo "$(jp "$NS" sandbox "$1" '{.status.conditions}') pod: $(kubectl get pod -n "$NS" "$(pod_of "$1")" -o jsonpath='{.status.containerStatuses}' 2>/dev/null)"; }

# owner_dir OWNER SUBDIR: where the owner's folder is on this machine's disk
# in the current mode.
owner_dir() {
  if [ "$MODE" = pvc ]; then echo "$PV_ROOT/$NS/$1/$2"; else echo "$WS_ROOT/$NS/$1/$2"; fi
}

# workspace_writable NAME: alice's Sandbox NAME runs as uid 1000 and writes a
# file in /workspace and one in ~/.claude; both land in her folders on disk,
# owned by 1000:1000.
workspace_writable() {
  local name=$1 pod out
  real_sandbox "$ALICE" "$name" alice >/dev/null || { fail "cannot create $name"; return; }
  ready "$name" || { fail "$name not Ready: $(why_not "$name")"; return; }
  pod=$(pod_of "$name")
  out=$(as "$ALICE" exec -n "$NS" "$pod" -- sh -c \
    'id -u; echo "written in $1" >/workspace/w.txt && echo "config of $1" >"$HOME/.claude/c.txt" && echo wrote' sh "$MODE" 2>&1)
  expect_eq "$out" $'1000\nwrote' "id -u and the two writes as the sandbox's user ($MODE mode)"
  expect_eq "$(cat "$(owner_dir alice workspace)/w.txt" 2>/dev/null)" "written in $MODE" "/workspace/w.txt on disk"
  expect_eq "$(cat "$(owner_dir alice claude)/c.txt" 2>/dev/null)" "config of $MODE" "~/.claude/c.txt on disk"
  expect_eq "$(stat -c %u:%g "$(owner_dir alice workspace)/w.txt" 2>/dev/null)" 1000:1000 "owner of w.txt on disk"
}

# Issue 21 item 2: the owner's folders are writable by the sandbox's user
# in both modes, before the first pod runs.
test_01_workspace_writable_pvc() {
  workspace_writable ws-pvc
}

test_02_workspace_writable_hostpath() {
  ctl_mode hostpath
  workspace_writable ws-hostpath
  ctl_mode pvc
}

# The process runs as the configured non-root user under the restricted
# profile: no capability, no privilege gain, seccomp on; containerd runs it
# as uid 1000 on this machine.
test_03_process_runs_as_the_sandbox_user() {
  real_sandbox "$ALICE" who alice >/dev/null || { fail "cannot create who"; return; }
  ready who || { fail "who not Ready: $(why_not who)"; return; }
  local out id pid p
  out=$(sh_in "$ALICE" who 'id -u; id -g; grep -E "^(CapEff|CapPrm|NoNewPrivs|Seccomp):" /proc/self/status | tr -s "\t " " "; touch /etc/x 2>/dev/null && echo wrote-etc; true')
  expect_eq "$out" $'1000\n1000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2' \
    "uid, gid, capabilities, no_new_privs and seccomp of a process in the sandbox"
  id=$(container_of who)
  task_running "$id" || fail "containerd runs no task for who's container ($id)"
  pid=$(rn_ctr tasks ls 2>/dev/null | awk -v id="$id" '$1 == id {print $2}')
  expect_eq "$(stat -c %u "/proc/$pid" 2>/dev/null)" 1000 "the uid of the container's process on this machine"
  expect_match "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" "^sh -c trap" "the container's process"
  p=$(pod_of who)
  expect_eq "$(jp "$NS" pod "$p" '{.spec.securityContext.runAsNonRoot} {.spec.containers[0].securityContext.capabilities.drop[0]} {.spec.containers[0].securityContext.allowPrivilegeEscalation} {.spec.automountServiceAccountToken}')" \
    "true ALL false false" "the pod's restricted settings"
  expect_eq "$(jp "$NS" pod "$p" '{.spec.nodeName}')" sbx-real-node "the pod's node"
}

# Each owner sees only their own folders: bob's sandbox has no way to alice's
# files, and his land in his folder.
test_04_owners_kept_apart() {
  real_sandbox "$ALICE" apart-a alice >/dev/null && real_sandbox "$BOB" apart-b bob >/dev/null ||
    { fail "cannot create the sandboxes"; return; }
  ready apart-a && ready apart-b || { fail "not Ready: $(why_not apart-a) / $(why_not apart-b)"; return; }
  expect_eq "$(sh_in "$ALICE" apart-a 'echo only-alice >/workspace/alice-secret.txt && echo ok')" ok "alice writes her secret"
  expect_eq "$(sh_in "$BOB" apart-b 'echo bobs >/workspace/bob-file.txt && echo ok')" ok "bob writes his file"
  expect_eq "$(sh_in "$BOB" apart-b 'ls -A /workspace; find / -path /proc -prune -o -name alice-secret.txt -print 2>/dev/null')" \
    bob-file.txt "what bob's sandbox can find"
  expect_eq "$(cat "$(owner_dir bob workspace)/bob-file.txt" 2>/dev/null)" bobs "bob's file in his folder on disk"
  [ -e "$(owner_dir alice workspace)/bob-file.txt" ] && fail "bob's file is in alice's folder"
  [ -e "$(owner_dir bob workspace)/alice-secret.txt" ] && fail "alice's file is in bob's folder"
  true
}

# A file alice wrote is there for her next Sandbox, her resumed one and her
# warm-bound one.
test_05_alice_files_follow_her() {
  real_sandbox "$ALICE" first alice >/dev/null && ready first || { fail "first not Ready: $(why_not first)"; return; }
  expect_eq "$(sh_in "$ALICE" first 'echo "from the first" >/workspace/carry.txt && echo ok')" ok "the first writes"
  real_sandbox "$ALICE" next alice >/dev/null && ready next || { fail "next not Ready: $(why_not next)"; return; }
  expect_ne "$(pod_of next)" "$(pod_of first)" "next has a pod of its own"
  expect_eq "$(sh_in "$ALICE" next 'cat /workspace/carry.txt')" "from the first" "the next Sandbox reads it"
  # Resumed: suspend, then resume; the same pod name, the file still there.
  local p
  p=$(pod_of next)
  as "$ALICE" patch sandbox next -n "$NS" --type merge -p '{"spec":{"lifecycle":{"suspend":true}}}' >/dev/null
  wait_for 60 phase_is next Suspended || fail "next not Suspended: $(why_not next)"
  as "$ALICE" patch sandbox next -n "$NS" --type merge -p '{"spec":{"lifecycle":{"suspend":false}}}' >/dev/null
  ready next || { fail "next not Ready after resume: $(why_not next)"; return; }
  expect_eq "$(pod_of next)" "$p" "the resumed pod's name"
  expect_eq "$(sh_in "$ALICE" next 'cat /workspace/carry.txt')" "from the first" "the resumed Sandbox reads it"
  # Warm-bound: a pool of alice's with the template of a Sandbox without a key.
  as "$ALICE" apply -f - >/dev/null <<YAML || { fail "cannot create the pool"; return; }
apiVersion: sandbox.dev/v1alpha1
kind: SandboxWarmPool
metadata: {name: alice-warm, namespace: $NS}
spec:
  replicas: 1
  workspaceOwner: alice
  template:
    image: $IMG
    command: $CMD
    resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}
YAML
  wait_for 120 pool_ready alice-warm 1 ||
    { fail "the pool has no Ready warm pod: $(jp "$NS" sandboxwarmpool alice-warm '{.status}')"; return; }
  sleep 4 # --warm-pool-settle 3: the pool's template serves after that
  real_sandbox "$ALICE" warm alice - >/dev/null && ready warm || { fail "warm not Ready: $(why_not warm)"; return; }
  expect_eq "$(jp "$NS" sandbox warm '{.status.binding}')" Warm "warm's binding"
  expect_eq "$(sh_in "$ALICE" warm 'cat /workspace/carry.txt')" "from the first" "the warm-bound Sandbox reads it"
  as "$ALICE" delete sandboxwarmpool alice-warm -n "$NS" >/dev/null
}
phase_is() { [ "$(jp "$NS" sandbox "$1" '{.status.phase}')" = "$2" ]; }
pool_ready() { [ "$(jp "$NS" sandboxwarmpool "$1" '{.status.readyReplicas}')" = "$2" ]; }

# The Python client and the plugin against a real container: exit codes,
# stdout and stderr apart, stdin, binary files both ways, listings.
test_06_client_and_plugin() {
  real_sandbox "$ALICE" tools alice >/dev/null && ready tools || { fail "tools not Ready: $(why_not tools)"; return; }
  local out sums code
  out=$(py "$ALICE" <<'PY'
import hashlib, os
import sandbox_client as sbx
sb = sbx.Client().get("tools")
code, o, e = sb.run(["sh", "-c", "echo out; echo oops >&2; exit 3"])
print("three", code, o.strip(), e.strip())
r = sb.run(["sh", "-c", 'cat; echo "$GREETING"; pwd'], stdin="from stdin\n", env={"GREETING": "hi"}, cwd="/tmp")
print("wrapped", r.exit_code, "|".join(r.stdout.splitlines()))
blob = bytes(range(256)) * 800 + os.urandom(50_000)
sb.write_file("bin/blob.bin", blob, make_dirs=True, mode=0o640)
back = sb.read_file("bin/blob.bin")
print("blob", hashlib.sha256(blob).hexdigest(), hashlib.sha256(back).hexdigest(), len(back))
sb.write_file("/home/agent/.claude/settings.json", b'{"k": 1}\n')
print("list", " ".join(sorted(f"{e.name}:{e.type}:{e.size}" for e in sb.list_dir("bin"))))
print("claude", sb.read_file("/home/agent/.claude/settings.json").decode().strip())
try:
    sb.read_file("no/such/file")
    print("missing read")
except sbx.SandboxError as e:
    print("missing", type(e).__name__)
PY
)
  expect_eq "$(sed -n 's/^three //p' <<<"$out")" "3 out oops" "run: exit code, stdout, stderr"
  expect_eq "$(sed -n 's/^wrapped //p' <<<"$out")" "0 from stdin|hi|/tmp" "run: stdin, env, cwd"
  sums=$(sed -n 's/^blob //p' <<<"$out")
  expect_match "$sums" '^([0-9a-f]{64}) \1 254800$' "write_file/read_file of binary data"
  expect_eq "$(sha256sum "$(owner_dir alice workspace)/bin/blob.bin" 2>/dev/null | cut -d' ' -f1)" "${sums%% *}" \
    "write_file's bytes on disk"
  expect_eq "$(stat -c '%a %u' "$(owner_dir alice workspace)/bin/blob.bin" 2>/dev/null)" "640 1000" \
    "write_file's mode and owner on disk"
  expect_eq "$(sed -n 's/^list //p' <<<"$out")" "blob.bin:file:254800" "list_dir"
  expect_eq "$(cat "$(owner_dir alice claude)/settings.json" 2>/dev/null)" '{"k": 1}' "a file in ~/.claude on disk"
  expect_match "$(sed -n 's/^missing //p' <<<"$out")" 'Error' "read_file of a missing file is an error"
  # The plugin: the command's exit code, stdin, cp in and out (binary, '-').
  out=$(KUBECONFIG=$ALICE kubectl sandbox exec tools -- sh -c 'echo to-out; echo to-err >&2; exit 7' 2>"$E2E_DIR/plug.err"); code=$?
  expect_eq "$code:$out:$(cat "$E2E_DIR/plug.err")" "7:to-out:to-err" "kubectl sandbox exec: exit code, stdout, stderr"
  out=$(printf 'line one\nline two\n' | KUBECONFIG=$ALICE kubectl sandbox exec -i tools -- wc -l 2>&1)
  expect_eq "$(echo $out)" 2 "kubectl sandbox exec -i: stdin"
  head -c 300000 /dev/urandom >"$E2E_DIR/cp.bin"
  KUBECONFIG=$ALICE kubectl sandbox cp "$E2E_DIR/cp.bin" tools:cp.bin >/dev/null 2>&1 || fail "cp into the sandbox"
  KUBECONFIG=$ALICE kubectl sandbox cp tools:cp.bin - >"$E2E_DIR/cp.back" 2>/dev/null || fail "cp out to stdout"
  expect_eq "$(sha256sum <"$E2E_DIR/cp.back")" "$(sha256sum <"$E2E_DIR/cp.bin")" "cp in and out: the same bytes"
  expect_eq "$(sha256sum <"$(owner_dir alice workspace)/cp.bin" 2>/dev/null)" "$(sha256sum <"$E2E_DIR/cp.bin")" "cp in: on disk"
  KUBECONFIG=$ALICE kubectl sandbox cp tools:no-such-file - >/dev/null 2>&1; code=$?
  expect_ne "$code" 0 "cp of a missing file: exit code"
}

# Through the API server to this kubelet: logs, attach and port-forward work
# for alice; the exec gate refuses bob's exec, attach and port-forward into
# alice's sandbox, and nothing of his runs in it.
test_07_api_server_streams_and_the_exec_gate() {
  real_sandbox "$ALICE" talk alice talk \
    '[sh, -c, "echo started; while true; do printf \"hello through port-forward\\n\" | nc -l -p 8080 >/dev/null 2>&1; echo served; done"]' >/dev/null &&
    ready talk || { fail "talk not Ready: $(why_not talk)"; return; }
  local p out port pf code
  p=$(pod_of talk)
  wait_for 20 logs_have "$p" started || fail "kubectl logs: $(as "$ALICE" logs -n "$NS" "$p" 2>&1 | head -3)"
  port=$(free_port)
  as "$ALICE" port-forward -n "$NS" "pod/$p" "$port:8080" >"$E2E_DIR/pf.log" 2>&1 &
  pf=$!
  wait_for 15 grep -q Forwarding "$E2E_DIR/pf.log"
  # attach: the main process's output reaches alice (a line per connection served).
  timeout 8 kubectl --kubeconfig "$ALICE" attach -n "$NS" "$p" -c sandbox </dev/null >"$E2E_DIR/attach.out" 2>&1 &
  local at=$!
  sleep 2
  out=$(python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1])),timeout=5); print(s.recv(100).decode().strip())' "$port" 2>&1)
  expect_eq "$out" "hello through port-forward" "kubectl port-forward to the sandbox's listener"
  wait "$at" 2>/dev/null
  kill "$pf" 2>/dev/null; wait "$pf" 2>/dev/null
  expect_match "$(cat "$E2E_DIR/attach.out")" 'served' "kubectl attach: the main process's output"
  # bob: exec, attach and port-forward refused by the gate, naming the owner.
  rm -f "$(owner_dir alice workspace)/bob-was-here"
  out=$(as "$BOB" exec -n "$NS" "$p" -- sh -c 'touch /workspace/bob-was-here' 2>&1) && fail "bob ran a command in alice's sandbox"
  expect_match "$out" 'bob may not exec into sandbox pod .* of workspace owner "alice".*missing permission "use"' \
    "bob's exec refused by the gate"
  out=$(timeout 10 kubectl --kubeconfig "$BOB" attach -n "$NS" "$p" -c sandbox </dev/null 2>&1) && fail "bob attached to alice's sandbox"
  expect_match "$out" 'bob may not attach to sandbox pod .* of workspace owner "alice"' "bob's attach refused by the gate"
  out=$(timeout 10 kubectl --kubeconfig "$BOB" port-forward -n "$NS" "pod/$p" "$(free_port):8080" </dev/null 2>&1) &&
    fail "bob forwarded a port of alice's sandbox"
  expect_match "$out" 'bob may not port-forward to sandbox pod .* of workspace owner "alice"' \
    "bob's port-forward refused by the gate"
  out=$(py "$BOB" <<'PY'
import sandbox_client as sbx
try:
    sbx.Client().get("talk").run(["true"])
    print("RAN")
except sbx.OwnerNotAuthorized as e:
    print("OwnerNotAuthorized", e.status)
PY
)
  expect_eq "$out" "OwnerNotAuthorized 403" "the Python client as bob"
  KUBECONFIG=$BOB kubectl sandbox exec talk -- true >/dev/null 2>&1; code=$?
  expect_eq "$code" 5 "kubectl sandbox exec as bob: exit code"
  [ -e "$(owner_dir alice workspace)/bob-was-here" ] && fail "bob's command ran in alice's workspace"
  true
}
logs_have() { as "$ALICE" logs -n "$NS" "$1" 2>/dev/null | grep -q "$2"; }

# Suspend kills the process and keeps the files; resume starts it again on
# the same pod name; expiry ends it.
test_08_suspend_resume_expiry_processes() {
  real_sandbox "$ALICE" life alice >/dev/null && ready life || { fail "life not Ready: $(why_not life)"; return; }
  local p id id2
  p=$(pod_of life)
  id=$(container_of life)
  task_running "$id" || { fail "no running task for life ($id)"; return; }
  sh_in "$ALICE" life 'echo kept >/workspace/life.txt' >/dev/null
  as "$ALICE" patch sandbox life -n "$NS" --type merge -p '{"spec":{"lifecycle":{"suspend":true}}}' >/dev/null
  wait_for 60 phase_is life Suspended || fail "life not Suspended: $(why_not life)"
  wait_for 60 task_gone "$id" || fail "the process still runs after suspend"
  expect_eq "$(cat "$(owner_dir alice workspace)/life.txt" 2>/dev/null)" kept "the file on disk while suspended"
  as "$ALICE" patch sandbox life -n "$NS" --type merge -p '{"spec":{"lifecycle":{"suspend":false}}}' >/dev/null
  ready life || { fail "life not Ready after resume: $(why_not life)"; return; }
  expect_eq "$(pod_of life)" "$p" "the resumed pod's name"
  id2=$(container_of life)
  expect_ne "$id2" "$id" "a new container"
  task_running "$id2" || fail "no running task after resume ($id2)"
  expect_eq "$(sh_in "$ALICE" life 'cat /workspace/life.txt')" kept "the file after resume"
  # Expiry: a shutdownTime a few seconds ahead ends the process.
  as "$ALICE" patch sandbox life -n "$NS" --type merge \
    -p "{\"spec\":{\"lifecycle\":{\"shutdownTime\":\"$(date -u -d '+4 seconds' +%Y-%m-%dT%H:%M:%SZ)\"}}}" >/dev/null
  wait_for 60 phase_is life Expired || fail "life not Expired: $(why_not life)"
  wait_for 60 task_gone "$id2" || fail "the process still runs after expiry"
  expect_eq "$(jp "$NS" sandbox life '{.status.conditions[?(@.type=="Ready")].reason}')" Expired "Ready's reason"
}

# What goes wrong says so on the Sandbox, in words a user understands: a
# container that exits, an image that is not there, a pod changed or deleted
# behind the controller's back.
test_09_trouble_in_words() {
  real_sandbox "$ALICE" quits alice quits '[sh, -c, "echo bye; exit 3"]' >/dev/null || { fail "cannot create quits"; return; }
  real_sandbox "$ALICE" noimage alice noimage '' 127.0.0.1:5/missing:1 >/dev/null || { fail "cannot create noimage"; return; }
  real_sandbox "$ALICE" changed alice >/dev/null && real_sandbox "$ALICE" gone alice >/dev/null || { fail "cannot create"; return; }
  wait_for 60 phase_is quits Failed || fail "quits not Failed: $(why_not quits)"
  expect_eq "$(ready_reason quits)" PodFailed "quits: Ready's reason"
  expect_match "$(ready_message quits)" 'container sandbox exited with code 3 \(Error\)' "quits: Ready's message"
  wait_for 60 ready_message_has noimage 'container sandbox is waiting: (ErrImagePull|ImagePullBackOff)' ||
    fail "noimage does not say its image is missing: $(why_not noimage)"
  expect_eq "$(jp "$NS" sandbox noimage '{.status.phase}') $(ready_reason noimage)" "Pending PodPending" "noimage: phase and reason"
  expect_match "$(ready_message noimage)" '127.0.0.1:5/missing:1' "noimage: the message names the image"
  # Changed: admission refuses a change of a sandbox pod's spec to anyone
  # but the controller, a cluster admin too.
  ready changed && ready gone || { fail "not Ready: $(why_not changed) / $(why_not gone)"; return; }
  local out p
  p=$(pod_of changed)
  out=$(kubectl set image -n "$NS" "pod/$p" sandbox=sbx.local/pause:1 2>&1) && fail "an admin changed the sandbox pod's image"
  expect_match "$out" 'may only be changed by sandbox-controller' "the refusal of the change"
  # Without that policy the change goes through, and the Sandbox says what changed.
  kubectl delete validatingadmissionpolicybinding sandbox-controller-pods >/dev/null
  wait_for 20 kubectl set image -n "$NS" "pod/$p" sandbox=sbx.local/pause:1 || fail "the image change"
  render_policies sandbox-controller | kubectl apply -f - >/dev/null
  wait_for 60 ready_reason_is changed PodTampered || fail "changed not PodTampered: $(why_not changed)"
  expect_match "$(ready_message changed)" 'image' "changed: the message names what changed"
  # Deleted: Failed, PodMissing, and no new pod behind the user's back.
  p=$(pod_of gone)
  kubectl delete pod -n "$NS" "$p" --wait=false >/dev/null
  wait_for 60 ready_reason_is gone PodMissing || fail "gone not PodMissing: $(why_not gone)"
  expect_eq "$(jp "$NS" sandbox gone '{.status.phase}')" Failed "gone: phase"
  expect_match "$(ready_message gone)" 'no longer exists' "gone: Ready's message"
}
# The chaos of test_idempotency in small, with processes: responses lost
# between the controller and the API server (hack/faultproxy cuts 30% of
# connections after the server answered), and the controller SIGKILLed once
# right after a pod create. Each intent still ends with one pod, and on the
# node one running process.
test_10_chaos_one_process_per_intent() {
  local proxy="$BUILD_DIR/faultproxy" port i
  [ -x "$proxy" ] || { fail "faultproxy not built ($proxy)"; return; }
  # Only this test's sandboxes on the node from here on.
  kubectl delete sandbox -n "$NS" --all --wait=false >/dev/null
  wait_for 120 no_sandbox_tasks || fail "sandbox processes of earlier tests still run"
  port=$(sed -n 's/^APISERVER_PORT=//p' "$E2E_DIR/state")
  "$proxy" -upstream "127.0.0.1:$port" -drop 0.3 -seed 21 -port-file "$E2E_DIR/chaos-proxy.port" >"$E2E_DIR/chaos-proxy.log" 2>&1 &
  local proxy_pid=$!
  disown "$proxy_pid"
  track_pid "$proxy_pid"
  wait_for 10 test -s "$E2E_DIR/chaos-proxy.port" || { fail "faultproxy did not start"; return; }
  rm -f "$E2E_DIR/chaos-once"
  SBX_E2E_APISERVER_PORT=$(cat "$E2E_DIR/chaos-proxy.port") SBX_FAULT_POINTS=after-pod-create \
    SBX_FAULT_ONCE_FILE="$E2E_DIR/chaos-once" ctl_mode pvc
  local killed=$CTL_PID
  # The webhook's reviews go through the proxy too: a create it could not
  # admit is refused, and retried as a client would (apply is idempotent).
  for i in 1 2 3; do
    wait_for 60 real_sandbox "$ALICE" "chaos-$i-a" alice "chaos-$i" || fail "cannot create chaos-$i-a"
    wait_for 60 real_sandbox "$ALICE" "chaos-$i-b" alice "chaos-$i" || fail "cannot create chaos-$i-b"
  done
  wait_dead "$killed" 60 || fail "the controller never reached after-pod-create"
  [ -f "$E2E_DIR/chaos-once" ] || fail "the controller died without reaching after-pod-create"
  SBX_E2E_APISERVER_PORT=$(cat "$E2E_DIR/chaos-proxy.port") ctl_mode pvc
  for i in 1 2 3; do
    ready "chaos-$i-a" 180 && ready "chaos-$i-b" 60 || fail "chaos-$i not Ready: $(why_not "chaos-$i-a")"
    expect_eq "$(pod_of "chaos-$i-b")" "$(pod_of "chaos-$i-a")" "chaos-$i: one pod for both Sandboxes"
  done
  expect_eq "$(pod_count "$NS")" 3 "sandbox pods"
  expect_eq "$(sandbox_tasks | wc -l)" 3 "running sandbox processes on the node"
  for i in 1 2 3; do
    task_running "$(container_of "chaos-$i-a")" || fail "chaos-$i: its pod's process does not run"
  done
  local cuts
  cuts=$(grep -c "cut connection" "$E2E_DIR/chaos-proxy.log")
  say "  the proxy cut $cuts connections after the server had answered"
  [ "$cuts" -gt 3 ] || fail "too few responses lost ($cuts) for the test to mean anything"
  ctl_mode pvc # straight to the API server again
  kill "$proxy_pid" 2>/dev/null
}
# sandbox_tasks: the running tasks on the node of containers of the sandbox image.
sandbox_tasks() {
  local ids
  ids=$(rn_ctr containers ls 2>/dev/null | awk -v img="$IMG" '$2 == img {print $1}')
  rn_ctr tasks ls 2>/dev/null | awk '$3 == "RUNNING" {print $1}' | grep -xFf <(echo "$ids") || true
}
no_sandbox_tasks() { [ -z "$(sandbox_tasks)" ]; }

# The network rule: a sandbox reaches nothing off its bridge. A listener of
# this test, in a network namespace it made and routed from this machine,
# answers the machine and never hears from the sandbox; the machine's own
# address there is out of reach too.
test_11_no_way_off_the_bridge() {
  real_sandbox "$ALICE" net alice >/dev/null && ready net || { fail "net not Ready: $(why_not net)"; return; }
  local nsn=sbxnet$$ hv=sbxh$$ pv=sbxp$$ lpid out
  ip netns add "$nsn" && ip link add "$hv" type veth peer name "$pv" && ip link set "$pv" netns "$nsn" &&
    ip addr add 198.51.100.1/30 dev "$hv" && ip link set "$hv" up &&
    ip -n "$nsn" addr add 198.51.100.2/30 dev "$pv" && ip -n "$nsn" link set "$pv" up && ip -n "$nsn" link set lo up ||
    { fail "cannot make the test's network namespace"; net_cleanup "$nsn" "$hv"; return; }
  ip netns exec "$nsn" python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.51.100.2", 8080)); s.listen(8)
while True:
    c, a = s.accept()
    print("connection from", a[0], flush=True)
    c.sendall(b"listener of the test\n"); c.close()' >"$E2E_DIR/net-listener.log" 2>&1 &
  lpid=$!
  wait_for 10 host_reaches 198.51.100.2 || fail "the test's listener does not answer this machine"
  out=$(sh_in "$ALICE" net 'nc -w 3 198.51.100.2 8080 </dev/null; echo "rc=$?"; nc -w 3 198.51.100.1 22 </dev/null; echo "rc=$?"; ip route')
  expect_match "$out" 'rc=[1-9]' "the sandbox's connection to the test's listener"
  expect_eq "$(grep -c '^rc=0' <<<"$out")" 0 "no connection from the sandbox succeeded"
  expect_eq "$(grep -c 'default' <<<"$out")" 0 "a default route in the sandbox"
  expect_eq "$(grep -v '^connection from 198.51.100.1$' "$E2E_DIR/net-listener.log")" "" "what the listener heard beside this machine"
  kill "$lpid" 2>/dev/null
  net_cleanup "$nsn" "$hv"
}
host_reaches() { python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], 8080), timeout=2).recv(64)' "$1" 2>/dev/null; }
net_cleanup() { ip link del "$2" 2>/dev/null; ip netns del "$1" 2>/dev/null; true; }

ready_reason() { jp "$NS" sandbox "$1" '{.status.conditions[?(@.type=="Ready")].reason}'; }
ready_message() { jp "$NS" sandbox "$1" '{.status.conditions[?(@.type=="Ready")].message}'; }
ready_reason_is() { [ "$(ready_reason "$1")" = "$2" ]; }
ready_message_has() { [[ "$(ready_message "$1")" =~ $2 ]]; }

setup
e2e_main
