#!/usr/bin/env bash
# make image: builds the operator and CLI images offline with podman and writes each as an OCI
# archive; make image-push pushes them where REGISTRY says.
#   build/image.sh build    VERSION=... COMMIT=... IMAGE_REPO=... IMAGE_DIR=...
#   build/image.sh push     the same; to REGISTRY (default IMAGE_REPO), e.g. quay.io/yourteam
# Prints one line per image: reference, image ID, archive.
# Reproducible: binaries built with -trimpath and no build ID, image layers and config stamped
# with time 0 (--timestamp 0): the same commit, Go version and CA bundle give the same image ID.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/podman.sh"

VERSION=${VERSION:?VERSION is needed (make image sets it from git describe)}
COMMIT=${COMMIT:-unknown}
IMAGE_REPO=${IMAGE_REPO:-localhost/manila-setup}
IMAGE_DIR=${IMAGE_DIR:-$top/bin/images}
BINARIES=${BINARIES:-manila-setup-operator manila-setup}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[[ $VERSION == latest ]] && { echo "error: VERSION latest: images are tagged with their version, never :latest" >&2; exit 2; }

build() {
  podman_install
  [[ -r $CA_BUNDLE ]] || { echo "error: no CA bundle at $CA_BUNDLE (apt-get install ca-certificates, or set CA_BUNDLE)" >&2; exit 2; }
  mkdir -p "$IMAGE_DIR"
  local bin ctx ref id
  for bin in $BINARIES; do
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' EXIT
    (cd "$top" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$COMMIT" -o "$ctx/$bin" "./cmd/$bin")
    cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
    sed "s/@BINARY@/$bin/g" "$here/Containerfile.in" >"$ctx/Containerfile"
    if [[ $bin == manila-setup ]]; then
      # The CLI image is also a must-gather image: oc adm must-gather --image runs
      # /usr/bin/gather, which the CLI answers as `must-gather --dest-dir /must-gather`. A link,
      # copied as a folder so that it stays one: no second copy of the binary.
      mkdir "$ctx/gather"
      ln -s /usr/local/bin/manila-setup "$ctx/gather/gather"
      printf 'COPY gather/ /usr/bin/\n' >>"$ctx/Containerfile"
    fi
    ref=$IMAGE_REPO/$bin:$VERSION
    podman_ build -q --timestamp 0 -t "$ref" \
      --build-arg VERSION="$VERSION" --build-arg REVISION="$COMMIT" -f "$ctx/Containerfile" "$ctx" >/dev/null
    rm -f "$IMAGE_DIR/$bin-$VERSION.oci.tar"
    podman_ save -q --format oci-archive -o "$IMAGE_DIR/$bin-$VERSION.oci.tar" "$ref"
    id=$(podman_ image inspect --format '{{.Id}}' "$ref")
    printf '%s\t%s\t%s\n' "$ref" "$id" "$IMAGE_DIR/$bin-$VERSION.oci.tar"
    rm -rf "$ctx"
    trap - EXIT
  done
}

push() {
  # By default the images go where their names say (IMAGE_REPO), which is also where the CLI of
  # the same build points the operator Deployment.
  REGISTRY=${REGISTRY:-$IMAGE_REPO}
  [[ $REGISTRY == localhost/* ]] && { echo "error: REGISTRY $REGISTRY: give your registry: make image-push IMAGE_REPO=quay.io/yourteam (or REGISTRY=...)" >&2; exit 2; }
  local bin archive
  for bin in $BINARIES; do
    archive=$IMAGE_DIR/$bin-$VERSION.oci.tar
    [[ -f $archive ]] || { echo "error: $archive is missing: run make image first" >&2; exit 2; }
    podman_ load -q -i "$archive" >/dev/null
    podman_ push "$IMAGE_REPO/$bin:$VERSION" "docker://$REGISTRY/$bin:$VERSION"
    echo "pushed $REGISTRY/$bin:$VERSION"
  done
}

case ${1:-build} in
  build) build ;;
  push) push ;;
  *) echo "usage: $0 build|push" >&2; exit 2 ;;
esac
