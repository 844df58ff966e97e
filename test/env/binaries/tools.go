//go:build tools

// Package tools names the upstream commands test/env/kube, test/env/csi, test/env/node and
// test/env/snapshots build from this module, so that go mod tidy keeps everything they import.
package tools

import (
	_ "github.com/brancz/kube-rbac-proxy/cmd/kube-rbac-proxy"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner"
	_ "github.com/kubernetes-csi/external-resizer/cmd/csi-resizer"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
	_ "k8s.io/cloud-provider-openstack/cmd/manila-csi-plugin"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
