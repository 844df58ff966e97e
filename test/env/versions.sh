# The versions of the cluster's binaries, for the scripts that build them (test/env/kube for
# the control plane, etcd and kwok, test/env/node for the kubelet): one place, so that the kubelet
# is always the control plane's version. The module they are built from, test/env/binaries,
# requires the same versions (the scripts check); etcd is the v3.6 release the Kubernetes
# libraries there require (kwok is built from its own go.mod, kube/build.sh says why).
K8S_VERSION=v1.34.10
ETCD_VERSION=v3.6.5
KWOK_VERSION=v0.8.0

# kube_ldflags are the linker flags that stamp a Kubernetes binary with K8S_VERSION, as its own
# release build does (component-base/version).
kube_ldflags() {
  local ver=k8s.io/component-base/version minor=${K8S_VERSION#v1.}
  echo "-s -w -X $ver.gitVersion=$K8S_VERSION -X $ver.gitMajor=1 -X $ver.gitMinor=${minor%%.*} -X $ver.gitTreeState=clean"
}
