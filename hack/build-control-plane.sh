#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok) from Go modules into a cache outside the
# repository, keyed by version. A second run with the same versions is a no-op.
#
# Kubernetes cannot be `go install`ed (its go.mod replaces every staging module
# with a ./staging path), so we generate a tiny wrapper module that requires
# k8s.io/kubernetes at one release and pins each staging module, listed from the
# release's own go.mod, to the matching v0.Y.Z. etcd's server module has the same
# problem and gets the same treatment. Prints the bin directory on stdout.
#
#   hack/build-control-plane.sh           the control plane (kwok's fake nodes)
#   hack/build-control-plane.sh kubelet   the kubelet too, for the real node
#                                         (hack/realnode.sh): the same module,
#                                         version stamping and CGO_ENABLED=0
#
# One build at a time per cache: a second run waits for the first (flock).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.35.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.7.0}
CACHE_ROOT=${SANDBOX_CP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-controller}
BIN="$CACHE_ROOT/bin-k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
WANT=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
case "${1:-}" in
  "") ;;
  kubelet) WANT+=(kubelet) ;;
  *) echo "usage: $0 [kubelet]" >&2; exit 2 ;;
esac

log() { echo "build-control-plane: $*" >&2; }

have_all() {
  local b
  for b in "${WANT[@]}"; do [ -x "$BIN/$b" ] || return 1; done
}

if have_all; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { log "go is not installed"; exit 1; }
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$BIN" "$CACHE_ROOT/src"
exec 9>"$CACHE_ROOT/.build.lock"
if ! flock -n 9; then
  log "another build of the control plane is running in $CACHE_ROOT; waiting for it"
  flock 9
fi
if have_all; then
  echo "$BIN"
  exit 0
fi
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
staging_ver="v0.${K8S_VERSION#v1.}"

# kubernetes_module: the wrapper module in $CACHE_ROOT/src (once); sets KDIR.
kubernetes_module() {
  local dir="$CACHE_ROOT/src/kubernetes-$K8S_VERSION"
  KDIR=$dir
  mkdir -p "$dir"
  grep -q kubelet "$dir/tools.go" 2>/dev/null && return 0
  local gomod
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -f "$gomod" ] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION"; return 1; }
  local mods
  mods=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod" | sort -u)
  [ -n "$mods" ] || { log "no staging modules found in $gomod"; return 1; }
  log "kubernetes $K8S_VERSION: pinning $(echo "$mods" | wc -l) staging modules at $staging_ver"
  {
    echo "module sandbox.dev/controlplane/kubernetes"
    echo
    echo "go 1.25.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for m in $mods; do echo "	$m => $m $staging_ver"; done
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
}

# kubernetes_build CMD...: go build of k8s.io/kubernetes/cmd/CMD... into $BIN,
# version-stamped (otherwise they report v0.0.0-master).
kubernetes_build() {
  kubernetes_module
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION" c pkgs=()
  ld="$ld -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  for c; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$KDIR" && go build -trimpath -ldflags "$ld" -o "$BIN/" "${pkgs[@]}")
}

build_kubernetes() {
  log "go build kube-apiserver kube-controller-manager kube-scheduler kubectl (cold: tens of minutes)"
  kubernetes_build kube-apiserver kube-controller-manager kube-scheduler kubectl
}

build_etcd() {
  local dir="$CACHE_ROOT/src/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  cat >"$dir/go.mod" <<GOMOD
module sandbox.dev/controlplane/etcd

go 1.25.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
GOMOD
  cat >"$dir/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  log "go build etcd $ETCD_VERSION"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  local dir="$CACHE_ROOT/src/kwok-$KWOK_VERSION"
  mkdir -p "$dir"
  log "go build kwok $KWOK_VERSION"
  (cd "$dir" && GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
}

[ -x "$BIN/etcd" ] || build_etcd
[ -x "$BIN/kwok" ] || build_kwok
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [ -x "$BIN/$b" ] || { build_kubernetes; break; }
done
if [[ " ${WANT[*]} " == *" kubelet "* ]] && [ ! -x "$BIN/kubelet" ]; then
  log "go build kubelet (about a minute once the control plane is built)"
  kubernetes_build kubelet
fi
have_all || { log "some binaries are missing in $BIN"; exit 1; }
log "control plane binaries ready in $BIN"
echo "$BIN"
