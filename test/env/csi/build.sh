#!/usr/bin/env bash
# Builds the controller side of the real Manila CSI driver, which the e2e tests and `make demo`
# run as local processes: manila-csi-plugin (cloud-provider-openstack) and csi-provisioner
# (kubernetes-csi/external-provisioner), from source through the Go module proxy, from the
# module test/env/binaries (lib.sh says why one module).
# The binaries are cached outside the repository, keyed by version: a second run is instant.
# Prints the folder (MANILA_SETUP_CSI_BIN for the tests) on standard output, timings on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

PLUGIN_MODULE=k8s.io/cloud-provider-openstack
PLUGIN_VERSION=v1.35.0
PROVISIONER_MODULE=github.com/kubernetes-csi/external-provisioner/v5
PROVISIONER_VERSION=v5.3.0
dir="$MANILA_SETUP_CACHE/csi/manila-${PLUGIN_VERSION#v}_provisioner-${PROVISIONER_VERSION#v}"

pinned "$PLUGIN_MODULE" "$PLUGIN_VERSION"
pinned "$PROVISIONER_MODULE" "$PROVISIONER_VERSION"
if cached "$dir"; then
  step "CSI binaries cached in $dir"
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
build_binary "$dir/manila-csi-plugin" "$PLUGIN_MODULE/cmd/manila-csi-plugin" \
  "-s -w -X k8s.io/cloud-provider-openstack/pkg/version.Version=$PLUGIN_VERSION -X k8s.io/component-base/version.gitVersion=$PLUGIN_VERSION"
build_binary "$dir/csi-provisioner" "$PROVISIONER_MODULE/cmd/csi-provisioner" "-s -w -X main.version=$PROVISIONER_VERSION"

mark_complete "$dir"
step "CSI binaries ready in $dir"
echo "$dir"
