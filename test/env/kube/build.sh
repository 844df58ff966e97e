#!/usr/bin/env bash
# Builds the Kubernetes control plane the tests run against, from source through the Go module
# proxy: kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok (fake nodes).
# The binaries are cached outside the repository, keyed by version: a second run is instant.
# Prints the folder (usable as KUBEBUILDER_ASSETS) on standard output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

. "$here/../versions.sh"
dir="$MANILA_SETUP_CACHE/kube/k8s-${K8S_VERSION#v}_etcd-${ETCD_VERSION#v}_kwok-${KWOK_VERSION#v}"

if [[ -f $dir/.complete ]]; then
  step "kube binaries cached in $dir"
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
# One build at a time uses the cores best; the Go build cache makes a rebuild quick.
ldflags=$(kube_ldflags)

build_one() { # name, module dir, package, ldflags
  local name=$1 mod=$2 pkg=$3 flags=${4:-"-s -w"}
  [[ -x $dir/$name ]] && { step "$name already built"; return; }
  step "building $name (cold: several minutes)"
  (cd "$here/$mod" && go build -trimpath -ldflags "$flags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
  step "built $name"
}

build_one etcd etcd go.etcd.io/etcd/server/v3
build_one kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build_one kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build_one kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"

if [[ ! -x $dir/kwok ]]; then
  step "building kwok $KWOK_VERSION"
  GOBIN="$dir" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi
# kwok refuses to start without Stage objects; its module ships the standard ones.
stages="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
[[ -d $stages ]] || go mod download "sigs.k8s.io/kwok@$KWOK_VERSION"
{
  for f in "$stages"/node/fast/*.yaml "$stages"/node/heartbeat-with-lease/*.yaml "$stages"/pod/fast/*.yaml; do
    [[ $(basename "$f") == kustomization.yaml ]] && continue
    echo "---"; cat "$f"
  done
} > "$dir/kwok-stages.yaml.tmp"
mv "$dir/kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"

touch "$dir/.complete"
step "kube binaries ready in $dir"
echo "$dir"
