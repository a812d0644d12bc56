# syntax=docker/dockerfile:1
# sandbox-controller image: a Debian build stage, then a runtime of only the
# binary, exactly the shared libraries it links, CA certificates and a passwd
# entry for uid 65532 (no shell, no package manager). hack/image.sh builds the
# same file system offline with buildah (no base image needed).
#   docker build -t sandbox-controller:$(cat VERSION) .

FROM debian:bookworm-slim AS build
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake pkg-config ca-certificates libcurl4-openssl-dev libcjson-dev libssl-dev \
      libyaml-dev zlib1g-dev libcunit1-dev libevent-dev uthash-dev binutils && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build -j"$(nproc)" --target sandbox-controller \
 && strip /build/sandbox-controller \
 && bash hack/image-rootfs.sh /build/sandbox-controller /rootfs \
 && /build/sandbox-controller --version

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
EXPOSE 9443 8443 8081
ENTRYPOINT ["/sandbox-controller"]
