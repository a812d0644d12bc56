#!/usr/bin/env bash
# Builds the images the local real node (hack/realnode.sh) runs, offline: no
# registry is reachable, so every image a pod names is built here with buildah
# from scratch and imported into the node's containerd.
#
#   sbx.local/pause:1     containerd's sandbox_image: hack/realnode/pause.c,
#                         static, alone in the image
#   sbx.local/sandbox:1   a sandbox image: Debian's busybox-static with every
#                         applet linked in /bin (sh, id, ls, cat, base64, head,
#                         wc, mv, sleep, nc, ...), the user agent (uid/gid
#                         1000, HOME /home/agent), /tmp, working directory
#                         /workspace; command `sleep infinity`
#
# Writes OCI archives to a cache folder keyed by their inputs (this script,
# pause.c, the busybox-static version) and prints that folder; a second run
# with the same inputs is a no-op. Nothing else on the machine changes.
# One build per folder at a time (a lock in it; suites side by side wait for
# the first build), and an archive gets its name only once both are built
# and the smoke test passed, so a half-written one is never taken as cached.
#
#   hack/realnode-images.sh          build if needed, print the folder
#   SBX_REALNODE_IMAGES=DIR          use DIR instead of the cache
set -euo pipefail
HACK=$(cd "$(dirname "$0")" && pwd)
CACHE_ROOT=${SANDBOX_CP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-controller}
PAUSE_IMAGE=sbx.local/pause:1
SANDBOX_IMAGE=sbx.local/sandbox:1

log() { echo "realnode-images: $*" >&2; }

for c in buildah gcc busybox; do
  command -v "$c" >/dev/null || { log "$c is missing (hack/deps.sh installs it)"; exit 1; }
done
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] ||
  { log "a static libc (libc6-dev) is missing"; exit 1; }
busybox_bin=$(readlink -f "$(command -v busybox)")
file_is_static() { ! ldd "$1" >/dev/null 2>&1; }
file_is_static "$busybox_bin" || { log "$busybox_bin is not static: install busybox-static"; exit 1; }

key=$( { cat "$0" "$HACK/realnode/pause.c"; dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || sha256sum "$busybox_bin"; } |
  sha256sum | cut -c1-16)
OUT=${SBX_REALNODE_IMAGES:-$CACHE_ROOT/realnode-images/$key}
cached() { [ -s "$OUT/pause.oci.tar" ] && [ -s "$OUT/sandbox.oci.tar" ]; }
if cached; then
  echo "$OUT"
  exit 0
fi
mkdir -p "$OUT"
# Held on fd 9 until this script exits (as hack/tools.sh's builds).
exec 9>"$OUT/.lock"
flock 9
if cached; then # built by the run we waited for
  echo "$OUT"
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-realnode-images.XXXXXX")
# The archives are written here, beside their final names (a rename within
# one file system is atomic).
part=$(mktemp -d "$OUT/.part.XXXXXX")
B=(buildah --root "$work/store/root" --runroot "$work/store/run" --storage-driver vfs)
ctrs=()
cleanup() {
  local c
  for c in "${ctrs[@]:-}"; do [ -n "$c" ] && "${B[@]}" rm "$c" >/dev/null 2>&1; done
  "${B[@]}" rmi -a -f >/dev/null 2>&1 || true
  rm -rf "$work" "$part"
}
trap cleanup EXIT

# commit CTR NAME ARCHIVE: commits the working container as NAME and writes
# it as an OCI archive whose reference is NAME, as part/ARCHIVE (the end of
# this script moves it to OUT).
commit() {
  "${B[@]}" commit --quiet --format oci --rm "$1" "$2" >/dev/null
  ctrs=()
  "${B[@]}" push --quiet "$2" "oci-archive:$part/$3:$2" >/dev/null
}

log "pause image $PAUSE_IMAGE"
mkdir -p "$work/pause"
gcc -static -O2 -s -o "$work/pause/pause" "$HACK/realnode/pause.c"
ctr=$("${B[@]}" from --isolation chroot scratch); ctrs=("$ctr")
"${B[@]}" copy "$ctr" "$work/pause/pause" /pause >/dev/null
"${B[@]}" config --entrypoint '["/pause"]' --cmd '' --user 65535:65535 \
  --label org.opencontainers.image.title=sbx-pause "$ctr"
commit "$ctr" "$PAUSE_IMAGE" pause.oci.tar

log "sandbox image $SANDBOX_IMAGE (busybox-static $(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || echo '?'))"
r=$work/sandbox
mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/workspace" "$r/root" "$r/home"
chmod 1777 "$r/tmp"
install -m 0755 "$busybox_bin" "$r/bin/busybox"
for a in $("$busybox_bin" --list); do
  [ "$a" = busybox ] || ln -s busybox "$r/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
printf 'root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n' >"$r/etc/group"
printf 'hosts: files\n' >"$r/etc/nsswitch.conf"
mkdir -p "$work/home/agent"
ctr=$("${B[@]}" from --isolation chroot scratch); ctrs=("$ctr")
"${B[@]}" copy "$ctr" "$r/" / >/dev/null
"${B[@]}" copy --chown 1000:1000 "$ctr" "$work/home/" /home/ >/dev/null
"${B[@]}" config --user 1000:1000 --workingdir /workspace --cmd '["sleep","infinity"]' --entrypoint '' \
  --env PATH=/bin --env HOME=/home/agent \
  --label org.opencontainers.image.title=sbx-sandbox "$ctr"
commit "$ctr" "$SANDBOX_IMAGE" sandbox.oci.tar

# Smoke test: the sandbox image's shell and the programs the Python client's
# file methods run (clients/python/src/sandbox_client/_exec.py).
run=$("${B[@]}" from --isolation chroot --pull-never "$SANDBOX_IMAGE"); ctrs=("$run")
got=$("${B[@]}" run --isolation chroot "$run" -- sh -c 'id; printf hi | base64 | base64 -d | wc -c
  for p in head mv mkdir dirname chmod rm sleep ls cat nc; do [ -x "/bin/$p" ] || echo "missing $p"; done')
"${B[@]}" rm "$run" >/dev/null; ctrs=()
case "$got" in
  *missing*) log "smoke test of $SANDBOX_IMAGE failed: $got"; exit 1 ;;
  *"uid=1000(agent) gid=1000(agent)"*2) ;;
  *) log "smoke test of $SANDBOX_IMAGE failed: $got"; exit 1 ;;
esac
# Each rename is atomic; the cache check wants both, so the sandbox archive,
# whose name ends the build, goes last.
mv -f "$part/pause.oci.tar" "$OUT/pause.oci.tar"
mv -f "$part/sandbox.oci.tar" "$OUT/sandbox.oci.tar"
log "images in $OUT: $(cd "$OUT" && du -b ./*.oci.tar | awk '{printf "%s %.1f MiB  ", $2, $1/1048576}')"
echo "$OUT"
