#!/usr/bin/env bash
# Builds the release tools the tests use from their Go modules, once, into
# ~/.cache/sandbox-controller/tools/<name>-<version>/ (override the root with
# SANDBOX_CP_CACHE), and prints the path of the binary asked for.
#
#   hack/tools.sh helm       Helm 3 (lint, template, install of manifests/helm)
#   hack/tools.sh promtool   promtool (check rules, test rules of manifests/monitoring)
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
HELM_VERSION=v3.22.0
PROMETHEUS_VERSION=v0.316.0 # the Go module version of Prometheus 3.16
CACHE=${SANDBOX_CP_CACHE:-$HOME/.cache/sandbox-controller}/tools

case "${1:-}" in
  helm) pkg=helm.sh/helm/v3/cmd/helm; ver=$HELM_VERSION ;;
  promtool) pkg=github.com/prometheus/prometheus/cmd/promtool; ver=$PROMETHEUS_VERSION ;;
  *) echo "usage: $0 helm|promtool" >&2; exit 2 ;;
esac
dir="$CACHE/$1-$ver"
if [ ! -x "$dir/$1" ]; then
  mkdir -p "$dir"
  echo "tools: building $1 $ver from its Go module (once)" >&2
  # CGO off: a static binary that does not depend on the machine's C toolchain.
  CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags=-s "$pkg@$ver" >&2
fi
echo "$dir/$1"
