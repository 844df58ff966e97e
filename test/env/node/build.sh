#!/usr/bin/env bash
# Builds what a real node of the test cluster runs beside the kwok nodes: the kubelet, from
# source at the control plane's version, from the module test/env/binaries like the control plane
# (test/env/kube/build.sh), so most of it is in the Go build cache by then; and installs containerd and
# runc from the distribution when they are missing (as root; Debian's packages).
# The kubelet is cached outside the repository, keyed by its version: a second run is instant.
# Prints the folder holding the kubelet on standard output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

. "$here/../versions.sh"
dir="$MANILA_SETUP_CACHE/node/k8s-${K8S_VERSION#v}"

# containerd_install installs containerd (ctr comes with it), runc, and busybox-static (the shell
# of the driver's image, test/env/node/images.sh) when one is missing.
containerd_install() {
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 &&
    [[ -x /bin/busybox ]] && return 0
  [[ $(id -u) == 0 ]] || die "containerd, runc and busybox-static are needed: apt-get install containerd runc busybox-static"
  step "installing containerd, runc and busybox-static (apt-get; about a minute)"
  local log=${TMPDIR:-/tmp}/manila-setup-apt-containerd.log
  local opts=(-o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  export DEBIAN_FRONTEND=noninteractive
  # DPkg::Lock::Timeout does not cover the lists lock of "apt-get update": wait for another apt.
  local try
  for ((try = 1; ; try++)); do
    apt-get "${opts[@]}" update -qq >"$log" 2>&1 && break
    ((try < 60)) || { tail -n 30 "$log" >&2; exit 1; }
    sleep 10
  done
  apt-get "${opts[@]}" install -y -qq --no-install-recommends containerd runc busybox-static >>"$log" 2>&1 || { tail -n 30 "$log" >&2; exit 1; }
  # The package starts containerd as a service where there is an init system; the node runs a
  # containerd of its own, with its own configuration and socket, and needs no other.
}

containerd_install

pinned k8s.io/kubernetes "$K8S_VERSION"
if cached "$dir"; then
  step "kubelet cached in $dir"
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
build_binary "$dir/kubelet" k8s.io/kubernetes/cmd/kubelet "$(kube_ldflags)"
mark_complete "$dir"
step "kubelet ready in $dir"
echo "$dir"
