#!/usr/bin/env bash
# Builds capi-controllers (this folder's main.go): the real Cluster API core controllers and
# CAPO's OpenStackMachine and OpenStackServer controllers in one program, which the Cluster API
# tests on real servers (test/testenv/capireal) run against a test apiserver and the loopback
# OpenStack; and copies beside it the CRDs of the same module versions, which those tests
# install. From source through the Go module proxy, from this folder's own module: Cluster API
# v1.9 and CAPO v0.12 need controller-runtime v0.19 and the Kubernetes v0.31 libraries, which
# neither the main module (v0.25 / v0.37) nor test/env/binaries (v0.34) can take.
# Cached outside the repository, keyed by the versions and a hash of go.sum and main.go: a
# second run is instant. Prints the folder (MANILA_SETUP_CLUSTERAPI for the tests) on standard
# output, timings on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

CLUSTER_API_VERSION=v1.9.4
CAPO_VERSION=v0.12.1
ORC_VERSION=v1.0.0

# go runs in this module only: readonly (go.sum is complete), this toolchain, no workspace.
modgo() { (cd "$here" && GOWORK=off GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" go "$@"); }

for pin in "sigs.k8s.io/cluster-api $CLUSTER_API_VERSION" \
  "sigs.k8s.io/cluster-api-provider-openstack $CAPO_VERSION" \
  "github.com/k-orc/openstack-resource-controller $ORC_VERSION"; do
  set -- $pin
  got=$(modgo list -m -f '{{.Version}}' "$1" 2>&1) || got="not there ($got)"
  [[ $got == "$2" ]] || die "test/env/clusterapi/go.mod builds $1 at $got, but build.sh names $2: change the two together"
done

stamp=$(cat "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-12)
dir="$MANILA_SETUP_CACHE/clusterapi/capi-${CLUSTER_API_VERSION#v}_capo-${CAPO_VERSION#v}_$stamp"
if [[ -f $dir/.complete ]]; then
  step "Cluster API controllers cached in $dir"
  echo "$dir"
  exit 0
fi
# Folders of other versions or sources are of no further use (80 MiB each).
rm -rf "$MANILA_SETUP_CACHE"/clusterapi/capi-*
mkdir -p "$dir/crds"

t0=$(date +%s)
step "building capi-controllers (Cluster API $CLUSTER_API_VERSION, CAPO $CAPO_VERSION; cold: minutes; load: $(cut -d' ' -f1-3 /proc/loadavg))"
CGO_ENABLED=0 modgo build -trimpath -ldflags "-s -w" -o "$dir/capi-controllers.tmp" .
mv "$dir/capi-controllers.tmp" "$dir/capi-controllers"
step "built capi-controllers in $(($(date +%s) - t0)) s"

# The CRDs the controllers read and write, from the modules they were built from: Cluster
# API's core and IPAM groups (its machine controller lists MachineDrainRules, CAPO watches
# IPAddressClaims), all of CAPO's, and ORC's Image (CAPO's OpenStackServer controller watches it).
capi=$(modgo list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
capo=$(modgo list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api-provider-openstack)
orc=$(modgo list -m -f '{{.Dir}}' github.com/k-orc/openstack-resource-controller)
cp "$capi"/config/crd/bases/cluster.x-k8s.io_*.yaml "$capi"/config/crd/bases/ipam.cluster.x-k8s.io_*.yaml \
  "$capo"/config/crd/bases/*.yaml "$orc"/config/crd/bases/openstack.k-orc.cloud_images.yaml "$dir/crds/"
chmod u+w "$dir"/crds/*.yaml

echo "$stamp" >"$dir/.complete"
step "Cluster API controllers ready in $dir"
echo "$dir"
