//go:build tools

// Package tools pins the node's Kubernetes command that test/env/node/build.sh compiles: the
// kubelet, at the version of the control plane (test/env/kube).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
