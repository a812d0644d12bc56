#!/usr/bin/env bash
# Can the controller, as its pod spec runs it, read the certificate Secret
# that cert-manager writes (issue 15 finding 7)? Source after lib.sh and
# lib_admission.sh (manifests_json); needs a
# control plane (the controller syncs its caches before it serves the
# webhook) with the CRDs of the rendered kinds (crd_stub for cert-manager's).
#
# cert_secret_readable NAME RENDERED: from RENDERED (the manifests of an
# install, YAML) takes the Deployment sandbox-controller (the uid, gid and
# groups its pod spec gives the manager container, and the serving-certs
# Secret volume with its defaultMode) and the Certificate (its DNS names).
# It writes that Secret the way kubelet writes a secret volume (ca.crt,
# tls.crt, tls.key owned by root, mode defaultMode; with an fsGroup, group
# fsGroup and mode | 0440: kubelet's SetVolumeOwnership on a read-only
# volume), starts the real controller binary as that uid with those groups
# (setpriv) and checks that the webhook and the metrics listener serve that
# certificate. The controller keeps running for servicemonitor_verifies
# until certmount_done. 0 when it served the certificate.
cert_secret_readable() {
  local name=$1 rendered=$2 d
  [ "$(id -u)" = 0 ] || { fail "$name: needs root (setpriv runs the controller as the pod's uid)"; return 1; }
  manifests_json "$E2E_DIR/$name.json" "$rendered" || { fail "$name: cannot read the manifests"; return 1; }
  local uid gid groups fsgroup mode mountpath dns
  read -r uid gid groups fsgroup mode mountpath dns < <(python3 - "$E2E_DIR/$name.json" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))['items']
dep = next(x for x in items if x['kind'] == 'Deployment' and x['metadata']['name'] == 'sandbox-controller')
cert = next(x for x in items if x['kind'] == 'Certificate')
ps = dep['spec']['template']['spec']
psc = ps.get('securityContext', {})
c = next(c for c in ps['containers'] if c['name'] == 'manager')
csc = c.get('securityContext', {})
uid = csc.get('runAsUser', psc.get('runAsUser'))
# the image's passwd gives uid 65532 the primary group 65532 (hack/image-rootfs.sh)
gid = csc.get('runAsGroup', psc.get('runAsGroup', 65532))
fs = psc.get('fsGroup')
groups = [g for g in [fs] + psc.get('supplementalGroups', []) if g is not None]
vol = next(v for v in ps['volumes'] if v['name'] == 'serving-certs')
mount = next(m for m in c['volumeMounts'] if m['name'] == 'serving-certs')
print(uid, gid, ','.join(str(g) for g in groups) or '-', '-' if fs is None else fs,
      '%o' % vol['secret'].get('defaultMode', 0o644), mount['mountPath'], ','.join(cert['spec']['dnsNames']))
PY
  ) || { fail "$name: no Deployment with a serving-certs Secret and a Certificate"; return 1; }
  say "  $name: uid $uid gid $gid groups $groups, Secret mode $mode at $mountpath, DNS $dns"
  # the controller reads its certificates there by default (--webhook-cert-dir)
  expect_eq "$mountpath" /tmp/k8s-webhook-server/serving-certs "$name: where the Secret is mounted"
  d=$(mktemp -d "${TMPDIR:-/tmp}/sbx-certmount.XXXXXX")
  chmod 0755 "$d"
  mkdir -p "$d/certs" "$d/run"
  CERTMOUNT_DIR=$d/certs
  local c=$d/certs san
  san="subjectAltName=IP:127.0.0.1$(tr ',' '\n' <<<"$dns" | sed 's/^/,DNS:/' | tr -d '\n')"
  openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$d/ca.key" -subj "/CN=certmount-ca" -days 1 -out "$c/ca.crt" 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out "$c/tls.key" 2>/dev/null
  openssl req -new -key "$c/tls.key" -subj "/CN=sandbox-controller-webhook" -out "$d/tls.csr" 2>/dev/null
  printf 'extendedKeyUsage=serverAuth\n%s\n' "$san" >"$d/ext"
  openssl x509 -req -in "$d/tls.csr" -CA "$c/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 1 \
    -extfile "$d/ext" -out "$c/tls.crt" 2>/dev/null
  local fmode=$((8#$mode)) group=0
  if [ "$fsgroup" != - ]; then group=$fsgroup; fmode=$((fmode | 8#440)); fi
  chown "0:$group" "$c"/*
  chmod "$(printf '%o' "$fmode")" "$c"/*
  # the controller's other inputs (kubeconfig, seal key), readable by uid
  cp "$E2E_DIR/pki/ca.crt" "$E2E_DIR/pki/admin.crt" "$E2E_DIR/pki/admin.key" "$E2E_DIR/seal.key" "$d/run/"
  sed "s#$E2E_DIR/pki/#$d/run/#g" "$E2E_DIR/kubeconfig" >"$d/run/kubeconfig"
  chmod 0644 "$d/run"/*
  local wp mp gargs=(--clear-groups)
  wp=$(free_port); mp=$(free_port)
  CERTMOUNT_METRICS_PORT=$mp
  [ "$groups" != - ] && gargs=(--groups="$groups")
  setpriv --reuid="$uid" --regid="$gid" "${gargs[@]}" -- "$CONTROLLER_BIN" --kubeconfig "$d/run/kubeconfig" \
    --seal-key-file "$d/run/seal.key" --owner-authorization namespace --webhook-cert-mode cert-manager \
    --webhook-cert-dir "$c" --webhook-bind-address "127.0.0.1:$wp" --webhook-drain 0 \
    --metrics-bind-address "127.0.0.1:$mp" --metrics-cert-path "$c" --metrics-secure \
    --health-probe-bind-address 127.0.0.1:0 >"$E2E_DIR/certmount-$name.log" 2>&1 &
  local pid=$! want ok=0
  track_pid "$pid"
  CERTMOUNT_PID=$pid
  want=$(openssl x509 -in "$c/tls.crt" -noout -fingerprint -sha256 | sed 's/.*=//')
  wait_for 60 sh -c "! kill -0 $pid || { $(declare -f served_fingerprint_is); served_fingerprint_is $wp $want; }"
  if served_fingerprint_is "$wp" "$want" && served_fingerprint_is "$mp" "$want"; then
    ok=1
  else
    fail "$name: the controller (uid $uid, groups $groups) does not serve the mounted certificate: $(grep -m1 '"level":"error"' "$E2E_DIR/certmount-$name.log" || tail -1 "$E2E_DIR/certmount-$name.log")"
  fi
  [ "$ok" = 1 ]
}

# served_fingerprint_is PORT FINGERPRINT: the TLS server on 127.0.0.1:PORT
# presents the certificate with that SHA-256 fingerprint.
served_fingerprint_is() {
  [ "$(openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null | sed 's/.*=//')" = "$2" ]
}

# certmount_done: stops cert_secret_readable's controller and removes what it
# wrote outside $E2E_DIR.
certmount_done() {
  [ -n "${CERTMOUNT_PID:-}" ] && controller_stop "$CERTMOUNT_PID"
  [ -n "${CERTMOUNT_DIR:-}" ] && rm -rf "${CERTMOUNT_DIR%/certs}"
  CERTMOUNT_PID= CERTMOUNT_DIR=
}

# servicemonitor_verifies NAME: after cert_secret_readable NAME (its manifests
# must hold a ServiceMonitor too), the ServiceMonitor's scrape verifies the
# certificate: no insecureSkipVerify, its CA is a key of the Certificate's
# Secret, its serverName one of the Certificate's DNS names, and a TLS client
# with exactly that CA file and server name accepts what /metrics serves.
servicemonitor_verifies() {
  local name=$1 key server
  read -r key server < <(python3 - "$E2E_DIR/$name.json" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))['items']
cert = next(x for x in items if x['kind'] == 'Certificate')
sm = next(x for x in items if x['kind'] == 'ServiceMonitor')
for ep in sm['spec']['endpoints']:
    tls = ep.get('tlsConfig', {})
    ca = tls.get('ca', {}).get('secret', {})
    ok = (not tls.get('insecureSkipVerify') and ca.get('name') == cert['spec']['secretName']
          and tls.get('serverName') in cert['spec']['dnsNames'])
    print(ca.get('key', '-') if ok else '-', tls.get('serverName') if ok else json.dumps(tls, separators=(',', ':')))
PY
  )
  [ "${key:--}" != - ] || { fail "$name: the ServiceMonitor does not verify with the Certificate's Secret and DNS name: tlsConfig $server"; return 1; }
  openssl s_client -connect "127.0.0.1:$CERTMOUNT_METRICS_PORT" -CAfile "$CERTMOUNT_DIR/$key" \
    -verify_hostname "$server" -verify_return_error </dev/null >"$E2E_DIR/$name-verify.out" 2>&1 ||
    fail "$name: /metrics does not verify with $key and serverName $server: $(grep -m1 -i 'verify' "$E2E_DIR/$name-verify.out")"
}
