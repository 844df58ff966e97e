#!/usr/bin/env bash
# Builds the images a real node of the test cluster runs, offline with podman, each an archive
# that `ctr images import` loads under the name a pod spec uses:
#   test/env/node/images.sh OUTDIR
# writes OUTDIR/pause.tar and OUTDIR/manila-setup-operator.tar and prints one line per image:
# reference, archive. The names are $IMAGE_REPO/pause:$NODE_IMAGE_TAG and the operator's own
# build (build/image.sh) as $IMAGE_REPO/manila-setup-operator:$NODE_IMAGE_TAG.
# podman's storage lives in OUTDIR/podman and is removed at the end: nothing is left behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
. "$here/../lib.sh"
. "$top/build/podman.sh"

out=${1:?usage: $0 OUTDIR}
IMAGE_REPO=${IMAGE_REPO:-localhost/manila-setup}
NODE_IMAGE_TAG=${NODE_IMAGE_TAG:-node-test}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PODMAN_ROOT=$out/podman PODMAN_CONF_DIR=$out/podman-conf
trap 'rm -rf "$PODMAN_ROOT" "$PODMAN_CONF_DIR" "$out/pause-ctx"' EXIT
podman_install

# The sandbox image: a static binary that waits for a signal, on an empty base.
ctx=$out/pause-ctx
mkdir -p "$ctx"
(cd "$top" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -buildid=" -o "$ctx/pause" ./test/env/node/pause)
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
ref=$IMAGE_REPO/pause:$NODE_IMAGE_TAG
podman_ build -q --timestamp 0 -t "$ref" -f "$ctx/Containerfile" "$ctx" >/dev/null
# docker-archive keeps the full name, which `ctr images import` gives the image.
podman_ save -q --format docker-archive -o "$out/pause.tar" "$ref"
printf '%s\t%s\n' "$ref" "$out/pause.tar"

# The operator's image, built as make image builds it.
ref=$IMAGE_REPO/manila-setup-operator:$NODE_IMAGE_TAG
VERSION=$NODE_IMAGE_TAG IMAGE_REPO=$IMAGE_REPO IMAGE_DIR=$out/oci BINARIES=manila-setup-operator \
  "$top/build/image.sh" build >/dev/null
podman_ save -q --format docker-archive -o "$out/manila-setup-operator.tar" "$ref"
rm -rf "$out/oci"
printf '%s\t%s\n' "$ref" "$out/manila-setup-operator.tar"
