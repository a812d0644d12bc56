#!/usr/bin/env bash
# End-to-end: the admission webhook's serving certificates.
#  - self-managed: two replicas derive the same CA from the seal key, patch an
#    EMPTY caBundle of both webhook configurations, Sandbox creates pass the
#    webhook (it stamps sandbox.dev/requested-by), the 60 s serving certificate
#    is renewed before it expires and creates keep passing after its expiry and
#    across a CA epoch change (CA lifetime 120 s); a caBundle someone reset is
#    put back.
#  - seal key rotation: a replica holding [old] and one holding [new, old]
#    (mid rollout) converge on one caBundle that trusts both and do not
#    rewrite each other's.
#  - external: replacing tls.crt/tls.key (a Secret volume update, then a
#    rename of the files) makes the webhook serve the new
#    certificate without a restart while 200 Sandboxes are being created, and
#    not one create fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0
CFG=sandbox-controller
E2E_ADMISSION=1

setup() {
  cluster_up
  grant_controller_rbac
  # The self-managed mode reads and updates the two webhook configurations
  # (manifests/rbac/role.yaml grants it with resourceNames); granted here
  # too while that rule is not in the manifests this tree carries.
  if ! kubectl auth can-i update "validatingwebhookconfigurations/$CFG" --as sandbox-controller >/dev/null 2>&1; then
    kubectl create clusterrole sandbox-controller-cabundle --verb=get,update \
      --resource=mutatingwebhookconfigurations,validatingwebhookconfigurations --resource-name=$CFG >/dev/null
    kubectl create clusterrolebinding sandbox-controller-cabundle --clusterrole=sandbox-controller-cabundle \
      --user=sandbox-controller >/dev/null
  fi
}

# register_webhooks PORT CA_FILE: the product's webhook configurations
# (manifests/webhook/, both named $CFG, failurePolicy Fail) calling
# https://127.0.0.1:PORT, with CA_FILE as caBundle, or none when CA_FILE is "".
register_webhooks() {
  kubectl delete mutatingwebhookconfiguration,validatingwebhookconfiguration $CFG --ignore-not-found >/dev/null
  kubectl create namespace sandbox-system >/dev/null 2>&1 || true
  render_admission "$1" sandbox-controller | python3 -c '
import base64, json, sys
doc, ca = json.load(sys.stdin), sys.argv[1]
for x in doc["items"]:
    for w in x.get("webhooks", []):
        if ca: w["clientConfig"]["caBundle"] = base64.b64encode(open(ca, "rb").read()).decode()
        else: w["clientConfig"].pop("caBundle", None)
print(json.dumps(doc))' "$2" | kubectl apply -f - >/dev/null
}

ca_bundle() { # ca_bundle mutating|validating
  kubectl get "${1}webhookconfiguration" $CFG -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null
}

# bundle_ok [N]: both configurations carry the same bundle of N (3) CAs.
bundle_ok() {
  local m v
  m=$(ca_bundle mutating); v=$(ca_bundle validating)
  [ -n "$m" ] && [ "$m" = "$v" ] && [ "$(echo "$m" | base64 -d | grep -c 'BEGIN CERTIFICATE')" = "${1:-3}" ]
}

# fingerprint PORT: SHA-256 fingerprint of the certificate the server presents.
fingerprint() {
  openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null | sed 's/.*=//'
}
fingerprint_is() { [ "$(fingerprint "$1")" = "$2" ]; }
fingerprint_is_not() { local f; f=$(fingerprint "$1"); [ -n "$f" ] && [ "$f" != "$2" ]; }

# not_after PORT: the presented certificate's notAfter, in Unix seconds.
not_after() {
  date -d "$(openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null |
    openssl x509 -noout -enddate | sed 's/notAfter=//')" +%s
}

# verifies PORT BUNDLE_FILE: the served chain verifies against BUNDLE_FILE for IP 127.0.0.1.
verifies() {
  openssl s_client -connect "127.0.0.1:$1" -CAfile "$2" -verify_return_error -verify_ip 127.0.0.1 \
    </dev/null >/dev/null 2>&1
}

requested_by() { jp "$1" sandbox "$2" '{.metadata.annotations.sandbox\.dev/requested-by}'; }
has_requested_by() { [ -n "$(requested_by "$1" "$2")" ]; }

# create_through_webhook NS NAME: the create succeeds and the webhook's mutation is visible.
create_through_webhook() {
  local out
  out=$(sandbox "$1" "$2" $IMG) || { fail "create $2 refused: $out"; return; }
  has_requested_by "$1" "$2" || fail "$2 has no sandbox.dev/requested-by: the mutating webhook did not run"
}

sm_start() { # sm_start NAME PORT
  controller_start "$1" --leader-elect --webhook-bind-address "127.0.0.1:$2" \
    --webhook-cert-dir "$E2E_DIR/$1-certs" --webhook-cert-mode self-managed \
    --webhook-cert-validity 60s --webhook-ca-lifetime 120s \
    --webhook-cert-dns-names localhost --webhook-cert-ips 127.0.0.1
}

test_self_managed_renewal_and_cabundle() {
  local ns=certs-sm p1 p2 fp1 na1 b1 t0
  new_namespace $ns
  p1=$(free_port); p2=$(free_port)
  register_webhooks "$p1" ""
  expect_eq "$(ca_bundle validating)" "" "caBundle before the controller"
  t0=$SECONDS
  sm_start sm1 "$p1"; local pid1=$CTL_PID
  sm_start sm2 "$p2"; local pid2=$CTL_PID
  wait_for 30 bundle_ok || { fail "caBundle not patched into both configurations"; return; }
  say "  caBundle patched after $((SECONDS - t0)) s"
  b1=$(ca_bundle validating)
  echo "$b1" | base64 -d >"$E2E_DIR/bundle1.pem"
  wait_for 20 verifies "$p1" "$E2E_DIR/bundle1.pem" || fail "replica 1's certificate does not verify against the caBundle"
  wait_for 20 verifies "$p2" "$E2E_DIR/bundle1.pem" || fail "replica 2's certificate does not verify against the caBundle"
  expect_ne "$(fingerprint "$p1")" "$(fingerprint "$p2")" "each replica has its own serving certificate"
  wait_for 20 create_quiet $ns warmup || fail "the apiserver never reached the webhook"
  create_through_webhook $ns sm-0

  fp1=$(fingerprint "$p1"); na1=$(not_after "$p1")
  say "  serving certificate $fp1 expires in $((na1 - $(date +%s))) s"
  wait_for 75 fingerprint_is_not "$p1" "$fp1" || fail "serving certificate not renewed"
  local renewed_at
  renewed_at=$(date +%s)
  [ "$renewed_at" -lt "$na1" ] || fail "renewed only after expiry ($renewed_at >= $na1)"
  say "  renewed $((na1 - renewed_at)) s before the old certificate's expiry"
  create_through_webhook $ns sm-1

  # Someone resets the caBundle: a replica puts it back (at its next renewal or check).
  kubectl patch validatingwebhookconfiguration $CFG --type=json \
    -p '[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]' >/dev/null
  wait_for 70 bundle_ok || fail "reset caBundle not restored"

  while [ "$(date +%s)" -le $((na1 + 2)) ]; do sleep 1; done
  create_through_webhook $ns sm-2

  # The CA epoch is 120 s: by now or soon the epoch changes, the bundle moves on
  # and the renewed certificates (signed by the next CA) keep passing.
  wait_for 130 bundle_differs "$b1" || fail "caBundle did not move to the next CA epoch"
  create_through_webhook $ns sm-3
  echo "$(ca_bundle validating)" | base64 -d >"$E2E_DIR/bundle2.pem"
  wait_for 45 verifies "$p2" "$E2E_DIR/bundle2.pem" || fail "replica 2 not trusted after the epoch change"
  say "  caBundle updates written: $(cat "$E2E_DIR"/sm1.log "$E2E_DIR"/sm2.log | grep -c '"webhook caBundle updated"'), renewals: $(cat "$E2E_DIR"/sm1.log "$E2E_DIR"/sm2.log | grep -c '"webhook serving certificate written"')"
  expect_eq "$(grep -h '"webhook serving certificate written"' "$E2E_DIR"/sm*.log | grep -c 'BEGIN\|PRIVATE')" 0 "key material in the logs"
  controller_stop "$pid1"; controller_stop "$pid2"
}
create_quiet() { sandbox "$1" "$2" $IMG >/dev/null && has_requested_by "$1" "$2"; }
bundle_differs() { local b; b=$(ca_bundle validating); [ -n "$b" ] && [ "$b" != "$1" ] && bundle_ok; }

# rot_start NAME PORT SEALFILE: a self-managed replica with its own seal key list.
rot_start() {
  "$CONTROLLER_BIN" --kubeconfig "$E2E_DIR/controller.kubeconfig" --seal-key-file "$3" \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 --leader-elect \
    --webhook-bind-address "127.0.0.1:$2" --webhook-cert-dir "$E2E_DIR/$1-certs" \
    --webhook-cert-mode self-managed --webhook-cert-validity 30s --webhook-ca-lifetime 300s \
    --webhook-cert-ips 127.0.0.1 --webhook-drain 0 >>"$E2E_DIR/$1.log" 2>&1 &
  CTL_PID=$!
  disown "$CTL_PID" 2>/dev/null || true
  track_pid "$CTL_PID"
}
writes() { cat "$E2E_DIR"/rot-*.log | grep -c '"webhook caBundle updated"'; }

test_seal_rotation_replicas_agree() {
  local ns=certs-rot po pn w0 pid_o pid_n
  new_namespace $ns
  head -c 48 /dev/urandom | base64 >"$E2E_DIR/new.key"
  cat "$E2E_DIR/new.key" "$E2E_DIR/seal.key" >"$E2E_DIR/rotated.key" # newest first
  po=$(free_port); pn=$(free_port)
  register_webhooks "$pn" ""
  rot_start rot-old "$po" "$E2E_DIR/seal.key"; pid_o=$CTL_PID
  rot_start rot-new "$pn" "$E2E_DIR/rotated.key"; pid_n=$CTL_PID
  wait_for 30 bundle_ok 6 || { fail "caBundle with both keys' CAs not written"; return; }
  ca_bundle validating | base64 -d >"$E2E_DIR/bundle-rot.pem"
  wait_for 20 verifies "$po" "$E2E_DIR/bundle-rot.pem" || fail "the [old] replica is not trusted"
  wait_for 20 verifies "$pn" "$E2E_DIR/bundle-rot.pem" || fail "the [new, old] replica is not trusted"
  wait_for 20 create_quiet $ns via-new || fail "create through the [new, old] replica"
  kubectl patch validatingwebhookconfiguration $CFG --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/url\",\"value\":\"https://127.0.0.1:$po/validate-sandbox\"}]" >/dev/null
  kubectl patch mutatingwebhookconfiguration $CFG --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/url\",\"value\":\"https://127.0.0.1:$po/mutate-sandbox\"}]" >/dev/null
  wait_for 20 create_quiet $ns via-old || fail "create through the [old] replica"
  # Each replica renews every 20 s and checks the caBundle after each renewal:
  # in 25 s neither may rewrite it. (The window avoids a CA epoch change,
  # where the first replica there may write its own bundle once before the
  # other puts the union back.)
  local left=$(( 300 - $(date +%s) % 300 ))
  [ "$left" -lt 30 ] && sleep $((left + 3))
  w0=$(writes)
  sleep 25
  local extra=$(( $(writes) - w0 )) allowed=0
  say "  caBundle writes in 25 s: $extra; renewals: $(cat "$E2E_DIR"/rot-*.log | grep -c '"webhook serving certificate written"')"
  [ "$extra" -le "$allowed" ] || fail "replicas rewrite each other's caBundle ($extra writes)"
  bundle_ok 6 || fail "caBundle lost a key's CAs"
  create_quiet $ns after || fail "create after the observation"
  controller_stop "$pid_o"; controller_stop "$pid_n"
}

# make_cert NAME CA: an ECDSA serving certificate for 127.0.0.1 signed by CA.
make_cert() {
  local d=$E2E_DIR/ext-pki
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/$1.key" 2>/dev/null
  openssl req -new -key "$d/$1.key" -subj "/CN=$1" -out "$d/$1.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/$1.ext"
  openssl x509 -req -in "$d/$1.csr" -CA "$d/$2.crt" -CAkey "$d/$2.key" -CAcreateserial -days 1 \
    -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
}

# install_pair NAME DIR: replaces DIR/tls.key and DIR/tls.crt by renames, as
# an operator does.
install_pair() {
  local d=$E2E_DIR/ext-pki
  cp "$d/$1.key" "$2/.tls.key.new" && mv "$2/.tls.key.new" "$2/tls.key"
  cp "$d/$1.crt" "$2/.tls.crt.new" && mv "$2/.tls.crt.new" "$2/tls.crt"
}

# install_secret NAME DIR: the layout and the atomic update of a Secret volume
# (what cert-manager's Secret looks like in the pod): DIR/..<version>/ holds
# the files, DIR/..data links to it and DIR/tls.* link through ..data; an
# update writes a new version and renames a new ..data link over the old one.
install_secret() {
  local v="..$1_$(date +%s%N)"
  mkdir "$2/$v"
  cp "$E2E_DIR/ext-pki/$1.key" "$2/$v/tls.key"; cp "$E2E_DIR/ext-pki/$1.crt" "$2/$v/tls.crt"
  ln -s "$v" "$2/..data_tmp" && mv -T "$2/..data_tmp" "$2/..data"
  [ -L "$2/tls.crt" ] || { ln -sf ..data/tls.crt "$2/tls.crt"; ln -sf ..data/tls.key "$2/tls.key"; }
}
fp_of() { openssl x509 -in "$E2E_DIR/ext-pki/$1.crt" -noout -fingerprint -sha256 | sed 's/.*=//'; }

test_external_rotation_under_load() {
  local ns=certs-ext port dir=$E2E_DIR/ext-certs fpa fpb
  new_namespace $ns
  mkdir -p "$E2E_DIR/ext-pki" "$dir"
  openssl ecparam -name prime256v1 -genkey -noout -out "$E2E_DIR/ext-pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$E2E_DIR/ext-pki/ca.key" -subj "/CN=operator-ca" -days 1 \
    -out "$E2E_DIR/ext-pki/ca.crt" 2>/dev/null
  make_cert a ca; make_cert b ca; make_cert c ca
  install_secret a "$dir"
  fpa=$(fp_of a); fpb=$(fp_of b)
  port=$(free_port)
  register_webhooks "$port" "$E2E_DIR/ext-pki/ca.crt"
  controller_start ext --webhook-bind-address "127.0.0.1:$port" --webhook-cert-dir "$dir" --webhook-cert-mode external
  wait_for 30 fingerprint_is "$port" "$fpa" || { fail "webhook does not serve certificate a"; return; }
  wait_for 20 create_quiet $ns warmup || { fail "the apiserver never reached the webhook"; return; }

  # 200 creates from 8 clients, paced over ~10 s; the pair is swapped ~3 s in.
  . "$E2E_DIR/state"
  python3 - "$APISERVER_PORT" "$E2E_DIR/pki" $ns 200 8 >"$E2E_DIR/ext-load.out" 2>&1 <<'PY' &
import http.client, json, ssl, sys, threading, time
port, pki, ns, total, clients = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ctx = ssl.create_default_context(cafile=pki + "/ca.crt")
ctx.load_cert_chain(pki + "/admin.crt", pki + "/admin.key")
fails, lock = [], threading.Lock()
def client(k):
    # a fresh connection per create: every create is its own admission call
    for i in range(k, total, clients):
        body = json.dumps({"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
                           "metadata": {"name": "load-%03d" % i, "namespace": ns},
                           "spec": {"image": "registry.local/agent:1.0"}})
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
            c.request("POST", "/apis/sandbox.dev/v1alpha1/namespaces/%s/sandboxes" % ns, body,
                      {"Content-Type": "application/json"})
            r = c.getresponse(); data = r.read(); c.close()
            if r.status != 201:
                with lock: fails.append("%d %s" % (r.status, data[:300]))
        except Exception as e:
            with lock: fails.append(repr(e))
        time.sleep(0.35)
ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
t0 = time.time()
for t in ts: t.start()
for t in ts: t.join()
print("creates %d failures %d seconds %.1f" % (total, len(fails), time.time() - t0))
for f in fails[:10]: print("FAILURE", f)
PY
  local load=$!
  sleep 3
  kill -0 $load 2>/dev/null || fail "the creates ended before the swap"
  install_secret b "$dir" # as the kubelet updates a Secret volume
  wait_for 10 fingerprint_is "$port" "$fpb" || fail "webhook does not serve certificate b without a restart"
  install_pair c "$dir" # as an operator replaces the files
  wait_for 10 fingerprint_is "$port" "$(fp_of c)" || fail "webhook does not serve certificate c without a restart"
  kill -0 $load 2>/dev/null || fail "the creates ended before the new certificates were served"
  say "  certificates b (Secret volume update) and c (files renamed) served while the creates run"
  wait $load
  say "  $(head -1 "$E2E_DIR/ext-load.out")"
  expect_match "$(head -1 "$E2E_DIR/ext-load.out")" "^creates 200 failures 0 " "admission calls failed during the swap"
  expect_eq "$(kubectl get sbx -n $ns -o name | grep -c '/load-')" 200 "Sandboxes stored"
  local unmutated
  unmutated=$(kubectl get sbx -n $ns -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.sandbox\.dev/requested-by}{"\n"}{end}' |
    awk '$1 ~ /^load-/ && $2 == ""' | wc -l)
  expect_eq "$unmutated" 0 "Sandboxes created without the webhook"
  grep -q '"TLS certificate reloaded"' "$E2E_DIR/ext.log" || fail "no reload logged"
}

setup
e2e_main
