# The versions of the cluster's binaries, for the scripts that build them (test/env/kube for
# the control plane and kwok, test/env/node for the kubelet): one place, so that the kubelet is
# always the control plane's version. Their Go modules (test/env/kube/kubernetes,
# test/env/node/kubelet) pin the same k8s.io versions.
K8S_VERSION=v1.34.10
ETCD_VERSION=v3.5.24
KWOK_VERSION=v0.8.0

# kube_ldflags are the linker flags that stamp a Kubernetes binary with K8S_VERSION, as its own
# release build does (component-base/version).
kube_ldflags() {
  local ver=k8s.io/component-base/version minor=${K8S_VERSION#v1.}
  echo "-s -w -X $ver.gitVersion=$K8S_VERSION -X $ver.gitMajor=1 -X $ver.gitMinor=${minor%%.*} -X $ver.gitTreeState=clean"
}
