#!/usr/bin/env bash
# Builds what OpenShift's csi-snapshot-controller-operator gives every cluster, so that the test
# clusters and the sandbox can take and restore snapshots: the external-snapshotter's
# snapshot-controller (from source, through the Go module proxy, from test/env/binaries) and the
# snapshot.storage.k8s.io CRDs of the client module that controller is built against. Cached
# outside the repository, keyed by version: a second run is instant. Prints the folder
# (MANILA_SETUP_SNAPSHOTS for the tests: snapshot-controller and crds/*.yaml) on standard
# output, timings on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

# The controller's release, the same as the csi-snapshotter sidecar the operator renders
# (operator/images.go), and the client module its go.mod requires: the CRDs come from there.
CONTROLLER_MODULE=github.com/kubernetes-csi/external-snapshotter/v8
CONTROLLER_VERSION=v8.3.0
CLIENT_MODULE=github.com/kubernetes-csi/external-snapshotter/client/v8
CLIENT_VERSION=v8.2.0

dir="$MANILA_SETUP_CACHE/snapshots/snapshot-controller-${CONTROLLER_VERSION#v}_client-${CLIENT_VERSION#v}"
pinned "$CONTROLLER_MODULE" "$CONTROLLER_VERSION"
pinned "$CLIENT_MODULE" "$CLIENT_VERSION"
if cached "$dir"; then
  step "snapshot-controller and snapshot CRDs cached in $dir"
  echo "$dir"
  exit 0
fi
mkdir -p "$dir/crds"
build_binary "$dir/snapshot-controller" "$CONTROLLER_MODULE/cmd/snapshot-controller" "-s -w -X main.version=$CONTROLLER_VERSION"
# Only the three CRDs of volume snapshots: the group snapshot ones are behind a feature gate the
# controller leaves off, as OpenShift does.
client_dir=$(cd "$binaries_module" && GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=readonly \
  go mod download -json "$CLIENT_MODULE@$CLIENT_VERSION" | jq -r .Dir)
for kind in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
  install -m 0644 "$client_dir/config/crd/snapshot.storage.k8s.io_$kind.yaml" "$dir/crds/"
done
mark_complete "$dir"
step "snapshot-controller and snapshot CRDs ready in $dir"
echo "$dir"
