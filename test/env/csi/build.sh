#!/usr/bin/env bash
# Builds the controller side of the real Manila CSI driver, which the e2e tests and `make demo`
# run as local processes: manila-csi-plugin (cloud-provider-openstack) and csi-provisioner
# (kubernetes-csi/external-provisioner), from source through the Go module proxy.
# The binaries are cached outside the repository, keyed by version: a second run is instant.
# Prints the folder (MANILA_SETUP_CSI_BIN for the tests) on standard output, timings on stderr.
#
# Both upstream modules pin their k8s.io dependencies with replace directives, which
# `go install module@version` refuses. Each one is built from its own go.mod and go.sum as
# downloaded from the proxy (read-only, in the module cache): exactly the dependency versions
# upstream releases with, replaces included, and nothing generated here to keep in sync.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

PLUGIN_MODULE=k8s.io/cloud-provider-openstack
PLUGIN_VERSION=v1.35.0
PROVISIONER_MODULE=github.com/kubernetes-csi/external-provisioner/v5
PROVISIONER_VERSION=v5.3.0
dir="$MANILA_SETUP_CACHE/csi/manila-${PLUGIN_VERSION#v}_provisioner-${PROVISIONER_VERSION#v}"

if [[ -f $dir/.complete ]]; then
  step "CSI binaries cached in $dir"
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
# Lean on purpose (make test's cold budget): two binaries, no cgo, no race detector, no debug
# information; go.work and a user's GOFLAGS (-mod=mod would try to write the read-only module
# cache) are kept out.
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false"

build_one() { # name, module, version, package, ldflags
  build_binary "$dir/$1" "$(module_dir "$2" "$3")" "$4" "$5"
}

build_one manila-csi-plugin "$PLUGIN_MODULE" "$PLUGIN_VERSION" cmd/manila-csi-plugin \
  "-s -w -X k8s.io/cloud-provider-openstack/pkg/version.Version=$PLUGIN_VERSION -X k8s.io/component-base/version.gitVersion=$PLUGIN_VERSION"
build_one csi-provisioner "$PROVISIONER_MODULE" "$PROVISIONER_VERSION" cmd/csi-provisioner \
  "-s -w -X main.version=$PROVISIONER_VERSION"

touch "$dir/.complete"
step "CSI binaries ready in $dir"
echo "$dir"
