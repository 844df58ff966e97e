#!/usr/bin/env bash
# Builds, from source through the Go module proxy, the binaries of the images the operator renders
# that test/env/csi/build.sh does not build already, and the CNI plugins a real node of the test
# cluster gives its pods: csi-snapshotter, csi-resizer, kube-rbac-proxy, and the reference CNI
# plugins bridge, host-local and loopback. Each is cached outside the repository, keyed by its
# version: a second run is instant. Prints the folder holding them on standard output.
#
# Three operand images cannot be built from source here: the module proxy serves no version of
# node-driver-registrar, livenessprobe or csi-driver-nfs (403 for the release tags, as
# +incompatible and as pseudo-versions of the tagged commits). Their images hold the stand-ins of
# test/env/node/standins, which images.sh builds from this repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

# The versions of operator.Operands (operator/images.go; a test compares the two) and of the CNI
# plugins.
SNAPSHOTTER_MODULE=github.com/kubernetes-csi/external-snapshotter/v8
SNAPSHOTTER_VERSION=v8.3.0
RESIZER_MODULE=github.com/kubernetes-csi/external-resizer
RESIZER_VERSION=v1.14.0
RBAC_PROXY_MODULE=github.com/brancz/kube-rbac-proxy
RBAC_PROXY_VERSION=v0.19.1
CNI_MODULE=github.com/containernetworking/plugins
CNI_VERSION=v1.6.2

dir="$MANILA_SETUP_CACHE/node/operands_snapshotter-${SNAPSHOTTER_VERSION#v}_resizer-${RESIZER_VERSION#v}_rbac-proxy-${RBAC_PROXY_VERSION#v}_cni-${CNI_VERSION#v}"
if [[ -f $dir/.complete ]]; then
  step "operand binaries and CNI plugins cached in $dir"
  echo "$dir"
  exit 0
fi
mkdir -p "$dir/cni"
# As test/env/csi/build.sh: static, no debug information, each module built from its own go.mod
# and go.sum as released (replaces included).
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"

# external-snapshotter replaces its client module with ./client, a folder of its repository that
# the module's zip leaves out (it is a module of its own). It is built from a copy whose go.mod
# uses the client release its go.mod requires instead.
snapshotter_src() {
  local src copy required
  src=$(module_dir "$SNAPSHOTTER_MODULE" "$SNAPSHOTTER_VERSION")
  copy="$dir/src/snapshotter"
  rm -rf "$copy" && mkdir -p "$copy"
  cp -R "$src/." "$copy/" && chmod -R u+w "$copy"
  required=$(cd "$copy" && go mod edit -json | sed -n 's/.*"Path": "\(.*external-snapshotter\/client\/v8\)",.*/\1/p' | head -1)
  [[ -n $required ]] || die "$SNAPSHOTTER_MODULE@$SNAPSHOTTER_VERSION: no client module in its go.mod"
  (cd "$copy" && go mod edit -dropreplace="$required" && GOFLAGS="-mod=mod -buildvcs=false" go mod download "$required" >/dev/null &&
    GOFLAGS="-mod=mod -buildvcs=false" go list -deps ./cmd/csi-snapshotter >/dev/null) ||
    die "$SNAPSHOTTER_MODULE@$SNAPSHOTTER_VERSION: could not use $required from the module proxy"
  echo "$copy"
}

build_binary "$dir/csi-snapshotter" "$(snapshotter_src)" cmd/csi-snapshotter "-s -w -X main.version=$SNAPSHOTTER_VERSION"
rm -rf "$dir/src"
build_binary "$dir/csi-resizer" "$(module_dir "$RESIZER_MODULE" "$RESIZER_VERSION")" cmd/csi-resizer "-s -w -X main.version=$RESIZER_VERSION"
build_binary "$dir/kube-rbac-proxy" "$(module_dir "$RBAC_PROXY_MODULE" "$RBAC_PROXY_VERSION")" cmd/kube-rbac-proxy \
  "-s -w -X k8s.io/component-base/version.gitVersion=$RBAC_PROXY_VERSION"
cni=$(module_dir "$CNI_MODULE" "$CNI_VERSION")
for p in main/bridge ipam/host-local main/loopback; do
  build_binary "$dir/cni/$(basename "$p")" "$cni" "plugins/$p" "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_VERSION"
done

touch "$dir/.complete"
step "operand binaries and CNI plugins ready in $dir"
echo "$dir"
