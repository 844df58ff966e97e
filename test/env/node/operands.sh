#!/usr/bin/env bash
# Builds, from source through the Go module proxy, the binaries of the images the operator renders
# that test/env/csi/build.sh does not build already, and the CNI plugins a real node of the test
# cluster gives its pods: csi-snapshotter, csi-resizer, kube-rbac-proxy, and the reference CNI
# plugins bridge, host-local and loopback. Each is cached outside the repository, keyed by its
# version: a second run is instant. Prints the folder holding them on standard output. All come
# from the module test/env/binaries (lib.sh says why one module).
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
for m in SNAPSHOTTER RESIZER RBAC_PROXY CNI; do
  mod=${m}_MODULE ver=${m}_VERSION
  pinned "${!mod}" "${!ver}"
done
if cached "$dir"; then
  step "operand binaries and CNI plugins cached in $dir"
  echo "$dir"
  exit 0
fi
mkdir -p "$dir/cni"
build_binary "$dir/csi-snapshotter" "$SNAPSHOTTER_MODULE/cmd/csi-snapshotter" "-s -w -X main.version=$SNAPSHOTTER_VERSION"
build_binary "$dir/csi-resizer" "$RESIZER_MODULE/cmd/csi-resizer" "-s -w -X main.version=$RESIZER_VERSION"
build_binary "$dir/kube-rbac-proxy" "$RBAC_PROXY_MODULE/cmd/kube-rbac-proxy" \
  "-s -w -X k8s.io/component-base/version.gitVersion=$RBAC_PROXY_VERSION"
for p in main/bridge ipam/host-local main/loopback; do
  build_binary "$dir/cni/$(basename "$p")" "$CNI_MODULE/plugins/$p" "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_VERSION"
done

mark_complete "$dir"
step "operand binaries and CNI plugins ready in $dir"
echo "$dir"
