package machinesets

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeAddresses are the nodes' internal addresses: they tell the machines' own network
// (openstack.Discovery.NetworkProblem) from the one Manila exports on.
func NodeAddresses(ctx context.Context, kube kubernetes.Interface) ([]netip.Addr, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes (for their addresses): %w", err)
	}
	var out []netip.Addr
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip)
			}
		}
	}
	return out, nil
}
