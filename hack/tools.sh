#!/usr/bin/env bash
# Builds the release tools the tests use from their Go modules, once, into
# ~/.cache/sandbox-controller/tools/<name>-<version>/ (override the root with
# SANDBOX_CP_CACHE), and prints the path of the binary asked for.
#
#   hack/tools.sh helm       Helm 3 (lint, template, install of manifests/helm)
#   hack/tools.sh promtool   promtool (check rules, test rules of manifests/monitoring)
#   hack/tools.sh codegen    the Kubernetes code generators (deepcopy-gen, register-gen,
#                            client-gen, lister-gen, informer-gen, applyconfiguration-gen)
#                            of k8s.io/code-generator: prints their folder (hack/gen-go.sh)
#   hack/tools.sh controller-gen  controller-gen (the CRD schema the Go types describe)
#   hack/tools.sh kube-router  kube-router, whose network policy controller enforces
#                            NetworkPolicy on the real node (hack/realnode.sh,
#                            SBX_REAL_NODE_ENFORCER=kube-router; iptables + ipset)
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
HELM_VERSION=v3.22.0
PROMETHEUS_VERSION=v0.316.0 # the Go module version of Prometheus 3.16
# The Kubernetes release clients/go is built on (its client-go and apimachinery).
CODEGEN_VERSION=v0.35.4
CONTROLLER_TOOLS_VERSION=v0.20.1 # the controller-tools release built on Kubernetes 1.35
# The NetworkPolicy enforcer of the real node: the newest release the Go proxy
# serves here. Advisories published against it and why they do not matter for a
# test-only enforcer: docs/threat-model.md ("The network enforcer of the tests").
KUBE_ROUTER_VERSION=v2.1.0
CODEGEN_CMDS=(deepcopy-gen register-gen client-gen lister-gen informer-gen applyconfiguration-gen)
CACHE=${SANDBOX_CP_CACHE:-$HOME/.cache/sandbox-controller}/tools

# One build per tool at a time: a second caller (another suite's lane, or
# hack/test.sh building every tool beside the control plane) waits for the
# first build and then finds its binary, rather than building it again.
locked() { # locked NAME: holds CACHE/.NAME.lock on fd 9 until this script exits
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.$1.lock"
  flock 9
}

tags=""
case "${1:-}" in
  helm) pkg=helm.sh/helm/v3/cmd/helm; ver=$HELM_VERSION ;;
  # Without Prometheus's service discovery plugins (its remove_all_sd build
  # tag): the tests only check and unit-test rules, and the cloud SDKs the
  # plugins pull in were most of the build (4m15s against 2m43s from empty
  # caches on 2 CPUs).
  promtool) pkg=github.com/prometheus/prometheus/cmd/promtool; ver=$PROMETHEUS_VERSION-nosd; tags=remove_all_sd ;;
  controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen; ver=$CONTROLLER_TOOLS_VERSION ;;
  kube-router) pkg=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router; ver=$KUBE_ROUTER_VERSION ;;
  codegen)
    # Six commands of one module version, built by one go install.
    dir="$CACHE/code-generator-$CODEGEN_VERSION"
    [ -x "$dir/${CODEGEN_CMDS[-1]}" ] || locked codegen
    if [ ! -x "$dir/${CODEGEN_CMDS[-1]}" ]; then
      mkdir -p "$dir"
      echo "tools: building k8s.io/code-generator $CODEGEN_VERSION from its Go module (once)" >&2
      CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags=-s \
        $(printf "k8s.io/code-generator/cmd/%s@$CODEGEN_VERSION " "${CODEGEN_CMDS[@]}") >&2
    fi
    echo "$dir"
    exit 0 ;;
  *) echo "usage: $0 helm|promtool|codegen|controller-gen|kube-router" >&2; exit 2 ;;
esac
dir="$CACHE/$1-$ver"
[ -x "$dir/$1" ] || locked "$1"
if [ ! -x "$dir/$1" ]; then
  mkdir -p "$dir"
  echo "tools: building $1 $ver from its Go module (once)" >&2
  # CGO off: a static binary that does not depend on the machine's C toolchain.
  CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags=-s ${tags:+-tags "$tags"} "$pkg@${ver%-nosd}" >&2
fi
echo "$dir/$1"
