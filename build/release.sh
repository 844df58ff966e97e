#!/usr/bin/env bash
# make release: the manila-setup CLI for every platform admins run it on, static, with the
# version stamped, and a SHA256SUMS file to check the downloads against.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VERSION=${VERSION:?VERSION is needed (make release sets it from git describe)}
COMMIT=${COMMIT:-unknown}
OUT=${RELEASE_DIR:-$top/bin/release}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}

rm -rf "$OUT"
mkdir -p "$OUT"
for p in $PLATFORMS; do
  os=${p%/*} arch=${p#*/}
  name=manila-setup-$VERSION-$os-$arch
  echo "building $name" >&2
  (cd "$top" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOFLAGS=-buildvcs=false go build -trimpath \
    -ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$COMMIT" -o "$OUT/$name" ./cmd/manila-setup)
done
(cd "$OUT" && sha256sum manila-setup-* >SHA256SUMS)
cat "$OUT/SHA256SUMS"
