package machinesets

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeAddresses are the nodes' node IPs: they tell the machines' own network
// (openstack.Discovery.NetworkProblem) from the one Manila exports on.
//
// Only a node's first InternalIP counts. A node lists one InternalIP per family, its node IP,
// when the kubelet is given --node-ip (OpenShift's nodeip-configuration does): the cloud
// provider then drops the server's other addresses. A node that lists them all also lists its
// storage address once its MachineSet has the storage network; counting that address would
// call the storage network the machines' own, and attaching another set, or patching the same
// one again, would be refused.
func NodeAddresses(ctx context.Context, kube kubernetes.Interface) ([]netip.Addr, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes (for their addresses): %w", err)
	}
	var out []netip.Addr
	for _, n := range nodes.Items {
		if ip, ok := nodeIP(n); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

// nodeIP is a node's first InternalIP that parses.
func nodeIP(n corev1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			return ip, true
		}
	}
	return netip.Addr{}, false
}
