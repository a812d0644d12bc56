#!/usr/bin/env bash
# Installs what the build and the tests need and is missing (Debian packages),
# and checks for Go (the control plane is built from Go modules).
set -euo pipefail
PKGS=(build-essential cmake pkg-config libcurl4-openssl-dev libcjson-dev libssl-dev libyaml-dev zlib1g-dev
      libcunit1-dev libevent-dev uthash-dev valgrind openssl curl python3 procps
      clang buildah  # clang: libFuzzer for hack/fuzz.sh; buildah: hack/image.sh
      clang-format cppcheck  # hack/lint.sh (clang-format 14: Debian 12's)
      # the real node (hack/realnode.sh): its runtime, network and offline images
      containerd runc containernetworking-plugins iptables ipset busybox-static util-linux
      # clients/python: the official Kubernetes client, its tests, an offline venv install
      python3-kubernetes python3-pytest python3-venv python3-pip python3-setuptools python3-wheel)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v go >/dev/null; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "deps: add /usr/local/go/bin to PATH" >&2
  else
    echo "deps: Go (>= 1.25) is required to build the local control plane; install it from your distribution or go.dev" >&2
  fi
  exit 1
fi
