#!/usr/bin/env bash
# Builds the sandbox-controller image OFFLINE (no base image, no registry) with
# buildah, from the binary of a Release build and the files hack/image-rootfs.sh
# lays out (the same runtime file system as the Dockerfile's final stage):
#   `buildah from scratch`, vfs storage under build/buildah, chroot isolation.
# Writes build/sandbox-controller-<VERSION>.oci.tar (an OCI archive: load it
# with `skopeo copy oci-archive:... docker-daemon:...`, `podman load -i`, or
# `ctr images import`), prints its size, and smoke-tests it with
# `buildah run ... --version`.
#
#   hack/image.sh            build, archive, smoke-test
#   SBX_BUILD_DIR=DIR        take the binary from DIR (default: a Release build in build-image/)
#   SBX_IMAGE_OUT=DIR        write the archive (and buildah's store) in DIR (default build/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VERSION=$(head -n1 VERSION)
IMAGE=sandbox-controller:$VERSION
OUT=${SBX_IMAGE_OUT:-$ROOT/build}
mkdir -p "$OUT"

command -v buildah >/dev/null || {
  echo "image: installing buildah (Debian package)" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq buildah >/dev/null
}

if [ -n "${SBX_BUILD_DIR:-}" ]; then
  BIN=$SBX_BUILD_DIR/sandbox-controller
else
  cmake -S . -B build-image -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-image -j2 --target sandbox-controller >/dev/null
  BIN=$ROOT/build-image/sandbox-controller
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-image.XXXXXX")
store=$OUT/buildah
B=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
ctrs=()
cleanup() {
  local c
  for c in "${ctrs[@]:-}"; do [ -n "$c" ] && "${B[@]}" rm "$c" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT

strip -o "$work/sandbox-controller" "$BIN"
bash hack/image-rootfs.sh "$work/sandbox-controller" "$work/rootfs"

ctr=$("${B[@]}" from --isolation chroot scratch)
ctrs+=("$ctr")
"${B[@]}" copy "$ctr" "$work/rootfs/" / >/dev/null
"${B[@]}" config --user 65532:65532 --workingdir / \
  --entrypoint '["/sandbox-controller"]' --cmd '' \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --port 9443 --port 8443 --port 8081 \
  --label org.opencontainers.image.title=sandbox-controller \
  --label org.opencontainers.image.version="$VERSION" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  "$ctr"
"${B[@]}" rmi -f "$IMAGE" >/dev/null 2>&1 || true
"${B[@]}" commit --quiet --format oci --rm "$ctr" "$IMAGE" >/dev/null
ctrs=()
archive=$OUT/sandbox-controller-$VERSION.oci.tar
rm -f "$archive"
"${B[@]}" push --quiet "$IMAGE" "oci-archive:$archive:$IMAGE" >/dev/null

rootfs_bytes=$(du -sb "$work/rootfs" | cut -f1)
archive_bytes=$(stat -c %s "$archive")
echo "image: $IMAGE -> $archive"
echo "image: files $(find "$work/rootfs" -type f | wc -l), uncompressed file system $rootfs_bytes bytes ($(awk -v b="$rootfs_bytes" 'BEGIN{printf "%.1f", b/1048576}') MiB), archive $archive_bytes bytes ($(awk -v b="$archive_bytes" 'BEGIN{printf "%.1f", b/1048576}') MiB)"

# Smoke test: a container of the committed image runs the binary as uid 65532
# (chroot isolation: no user namespace or network needed).
run=$("${B[@]}" from --isolation chroot --pull-never "$IMAGE")
ctrs+=("$run")
out=$("${B[@]}" run --isolation chroot "$run" -- /sandbox-controller --version)
echo "image: smoke test: buildah run $IMAGE -- /sandbox-controller --version -> $out"
[ "$out" = "sandbox-controller $VERSION" ] || { echo "image: smoke test FAILED" >&2; exit 1; }
user=$("${B[@]}" inspect --format '{{.OCIv1.Config.User}}' "$IMAGE")
[ "$user" = "65532:65532" ] || { echo "image: runs as '$user', not 65532:65532" >&2; exit 1; }
if "${B[@]}" run --isolation chroot "$run" -- /bin/sh -c true >/dev/null 2>&1; then
  echo "image: a shell exists in the image" >&2; exit 1
fi
echo "image: user $user, no /bin/sh: ok"
