#!/usr/bin/env bash
# Builds the Kubernetes control plane the tests run against, from source through the Go module
# proxy: kube-apiserver, kube-controller-manager, kube-scheduler and etcd from the module
# test/env/binaries (lib.sh says why one module), and kwok (fake nodes) from its own go.mod: no
# kwok release compiles against the cluster's k8s.io v0.34 libraries (v0.7.0 uses an apimachinery
# constant v0.34 removed, v0.8.0 is written for v0.36), so it keeps its own copy of them.
# The binaries are cached outside the repository, keyed by version: a second run is instant.
# Prints the folder (usable as KUBEBUILDER_ASSETS) on standard output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

. "$here/../versions.sh"
dir="$MANILA_SETUP_CACHE/kube/k8s-${K8S_VERSION#v}_etcd-${ETCD_VERSION#v}_kwok-${KWOK_VERSION#v}"

pinned k8s.io/kubernetes "$K8S_VERSION"
pinned go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
if cached "$dir"; then
  step "kube binaries cached in $dir"
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
ldflags=$(kube_ldflags)
build_binary "$dir/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build_binary "$dir/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build_binary "$dir/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
# etcd's own main package is in the etcd repository's root module, which the module proxy serves
# without the server: test/env/binaries/etcd calls the same etcdmain.Main.
build_binary "$dir/etcd" ./etcd "-s -w"
if [[ ! -x $dir/kwok ]]; then
  step "building kwok $KWOK_VERSION (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS=-buildvcs=false GOBIN="$dir" \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  step "built kwok (load: $(cut -d' ' -f1-3 /proc/loadavg))"
fi

# kwok refuses to start without Stage objects; its module ships the standard ones.
kwok_src=$(GOWORK=off go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
stages="$kwok_src/kustomize/stage"
[[ -d $stages ]] || die "sigs.k8s.io/kwok@$KWOK_VERSION: no $stages in the module cache"
{
  for f in "$stages"/node/fast/*.yaml "$stages"/node/heartbeat-with-lease/*.yaml "$stages"/pod/fast/*.yaml; do
    [[ $(basename "$f") == kustomization.yaml ]] && continue
    echo "---"; cat "$f"
  done
} > "$dir/kwok-stages.yaml.tmp"
mv "$dir/kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"

mark_complete "$dir"
step "kube binaries ready in $dir"
echo "$dir"
