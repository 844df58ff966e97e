//go:build tools

// Package tools pins the Kubernetes control-plane commands that test/env/kube/build.sh compiles.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
