#!/usr/bin/env bash
# Installs what the build and the tests need and is missing (Debian packages),
# and checks for Go (the control plane is built from Go modules).
#
#   hack/deps.sh         what hack/demo.sh needs
#   hack/deps.sh test    and the Go version the test command's tools need
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKGS=(build-essential cmake pkg-config libcurl4-openssl-dev libcjson-dev libssl-dev libyaml-dev zlib1g-dev
      libcunit1-dev libevent-dev uthash-dev valgrind openssl curl python3 procps
      ca-certificates  # TLS for Go's module downloads; only a Recommends (of libcurl4)
      clang buildah  # clang: libFuzzer for hack/fuzz.sh; buildah: hack/image.sh
      clang-format cppcheck  # hack/lint.sh (clang-format 14: Debian 12's)
      # the real node (hack/realnode.sh): its runtime, network and offline images;
      # kmod's modprobe loads overlay (and br_netfilter) where they are modules
      containerd runc containernetworking-plugins iptables ipset busybox-static util-linux iproute2 kmod
      # clients/python: the official Kubernetes client, its tests, an offline venv install
      python3-kubernetes python3-pytest python3-venv python3-pip python3-setuptools python3-wheel)
missing=()
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "${PKGS[@]}"; do
  installed "$p" || missing+=("$p")
done
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
updated=0
apt_install() {
  echo "deps: installing $*" >&2
  [ $updated = 1 ] || $SUDO apt-get update -qq
  updated=1
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi
# libFuzzer's runtime for the clang hack/fuzz.sh uses (Debian 12: clang 14,
# libclang-rt-14-dev), only a Recommends of clang's own packages.
clang_major=$(clang -dumpversion 2>/dev/null | cut -d. -f1 || true)
if [ -n "$clang_major" ] && ! installed "libclang-rt-$clang_major-dev" &&
  apt-cache show "libclang-rt-$clang_major-dev" >/dev/null 2>&1; then
  apt_install "libclang-rt-$clang_major-dev"
fi
if ! command -v go >/dev/null; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "deps: add /usr/local/go/bin to PATH" >&2
  else
    echo "deps: Go (>= 1.25) is required to build the local control plane; install it from your distribution or go.dev" >&2
  fi
  exit 1
fi
# at_least HAVE NEED: whether version HAVE >= NEED.
at_least() { [ "$(printf '%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }
have=$(go env GOVERSION 2>/dev/null || true)
[ -n "$have" ] || have=$(go version | awk '{print $3}')
have=${have#go}
# The go directives of the tree's modules: hack/gen-go.sh builds them with
# GOTOOLCHAIN=local, so no newer Go is fetched for them.
need=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$ROOT"/clients/go/go.mod "$ROOT"/clients/go/api/go.mod \
  "$ROOT"/hack/*/go.mod | sort -V | tail -n 1 || true)
if ! at_least "$have" "${need:-1.25.0}"; then
  echo "deps: Go $have is too old: the modules of this tree need Go >= ${need:-1.25.0} (their go.mod files;" \
    "hack/gen-go.sh builds with GOTOOLCHAIN=local); install a newer Go from go.dev" >&2
  exit 1
fi
# The test command's tools (hack/tools.sh) are built with the go command's own
# GOTOOLCHAIN: promtool v0.316.0's go.mod says go 1.26.7, helm v3.22.0's
# go 1.26.0. Keep in step with the versions in hack/tools.sh.
TOOLS_GO=1.26.7
if [ "${1:-}" = test ] && ! at_least "$have" "$TOOLS_GO"; then
  case $(go env GOTOOLCHAIN) in
    *auto*) echo "deps: Go $have: building promtool and helm (hack/tools.sh) fetches the Go $TOOLS_GO toolchain from the Go module proxy (GOTOOLCHAIN=$(go env GOTOOLCHAIN))" >&2 ;;
    *) echo "deps: Go $have is too old for the test command's tools: promtool (hack/tools.sh) needs Go >= $TOOLS_GO," \
         "and GOTOOLCHAIN=$(go env GOTOOLCHAIN) does not fetch it; install a newer Go from go.dev or set GOTOOLCHAIN=auto" >&2
       exit 1 ;;
  esac
fi
