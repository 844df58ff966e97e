#!/usr/bin/env bash
# Builds machine-api-openstack, the OpenShift Machine API's controllers (MachineSet, machine with
# an OpenStack actuator, drain, nodelink) that the tests run as a process beside a test cluster
# and the loopback OpenStack (test/machineapi says what it is). It is built from its own module,
# test/machineapi: the Machine API operator and cluster-api-provider-openstack require library
# versions the main module and test/env/binaries cannot share.
# The binary is cached outside the repository, keyed by a hash of the module's sources and
# go.sum: a change to either builds it again, a second run is instant.
# Prints the folder (MANILA_SETUP_MACHINEAPI_BIN for the tests) on standard output, timings on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

module=$(cd "$here/../../machineapi" && pwd)
key=$(cd "$module" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
dir="$MANILA_SETUP_CACHE/machineapi/$key"

# Every change to the module leaves a new folder (about 80 MiB); those no build used for a week
# go. A folder in use is touched below, so a tree that still builds it keeps it.
find "$MANILA_SETUP_CACHE/machineapi" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -mtime +7 -exec rm -rf {} + 2>/dev/null || true

if [[ -x $dir/machine-api-openstack && -f $dir/.complete ]]; then
  touch "$dir"
  step "machine-api-openstack cached in $dir"
  echo "$dir"
  exit 0
fi

rm -rf "$dir"
mkdir -p "$dir"
t0=$(date +%s)
step "building machine-api-openstack (test/machineapi; cold: about 3 minutes; load: $(cut -d' ' -f1-3 /proc/loadavg))"
(cd "$module" && CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
  go build -trimpath -ldflags "-s -w" -o "$dir/machine-api-openstack.tmp" .)
mv "$dir/machine-api-openstack.tmp" "$dir/machine-api-openstack"
touch "$dir/.complete"
step "built machine-api-openstack in $(($(date +%s) - t0)) s; ready in $dir"
echo "$dir"
