#!/usr/bin/env bash
# Lays out the runtime file system of the sandbox-controller image in OUTDIR:
# the binary, exactly the shared libraries it links (ldd, followed to the real
# files and installed under their sonames), the dynamic loader, CA certificates,
# passwd/group entries for uid/gid 65532 and an empty /tmp. No shell, no
# package manager, nothing else. Used by the Dockerfile and by hack/image.sh.
#
#   hack/image-rootfs.sh BINARY OUTDIR
set -euo pipefail
bin=${1:?usage: $0 BINARY OUTDIR}
out=${2:?usage: $0 BINARY OUTDIR}
rm -rf "$out"
mkdir -p "$out/etc/ssl/certs" "$out/tmp"
chmod 1777 "$out/tmp"
install -m 0755 "$bin" "$out/sandbox-controller"

# "libfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)" and the loader
# line "/lib64/ld-linux-x86-64.so.2 (0x...)"; vdso has no file.
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u |
while read -r lib; do
  mkdir -p "$out$(dirname "$lib")"
  cp -L "$lib" "$out$lib"    # the real file under the path the loader looks up
  case "$lib" in
    */ld-linux*|*/ld-*.so*) chmod 0755 "$out$lib" ;; # the ELF interpreter must be executable
    *) chmod 0644 "$out$lib" ;;
  esac
done
[ -n "$(find "$out" -name 'ld-linux*' -o -name 'ld-*.so*' | head -1)" ] || { echo "image-rootfs: no dynamic loader found" >&2; exit 1; }

cp -L /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$out/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/etc/group"
printf 'hosts: files dns\n' >"$out/etc/nsswitch.conf"
