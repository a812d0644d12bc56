#!/bin/sh
# Regenerates the TLS fixtures of the kube/client tests: a test CA, a server
# certificate valid only for the name "kube.test" (so requests to 127.0.0.1
# need tls-server-name), a client certificate (CN=tester, O=system:masters),
# and an unrelated CA. Test-only keys; valid for 100 years.
set -eu
cd "$(dirname "$0")"
days=36500
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
for ca in ca other-ca; do
  key $ca.key
  openssl req -x509 -new -key $ca.key -sha256 -days $days -subj "/CN=sbx-test-$ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out $ca.crt
done
rm -f other-ca.key
leaf() { # leaf NAME SUBJECT EXTS
  key $1.key
  openssl req -new -key $1.key -subj "$2" -out $1.csr
  printf '%s\n' "$3" > $1.ext
  openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days $days \
    -extfile $1.ext -out $1.crt 2>/dev/null
  rm -f $1.csr $1.ext
}
leaf server "/CN=kube.test" "subjectAltName=DNS:kube.test
extendedKeyUsage=serverAuth"
leaf client "/O=system:masters/CN=tester" "extendedKeyUsage=clientAuth"
rm -f ca.srl ca.key
