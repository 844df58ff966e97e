package capireal

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ProviderIDPrefix is how CAPO names a server in a Machine's and a Node's spec.providerID.
const ProviderIDPrefix = "openstack:///"

// registerNodes does for each ACTIVE server named with prefix what its kubelet would on boot:
// registers a Node of the server's name with spec.providerID openstack:///<server ID> (what
// Cluster API's Machine controller matches the Machine's providerID against) and the server's
// addresses, the one on machineNetwork first (the node IP). The Node is annotated for kwok, which
// keeps it Ready. It returns how many Nodes it made.
func registerNodes(ctx context.Context, kube kubernetes.Interface, cloud *cloudClients, prefix, machineNetwork string) (int, error) {
	all, err := cloud.serversNamed(ctx, prefix)
	if err != nil {
		return 0, err
	}
	made := 0
	// As a cloud controller manager's node lifecycle controller does: a Node whose server is
	// gone is deleted (Cluster API deletes a deleted Machine's Node itself only in a cluster with
	// control-plane Machines, which this one has not).
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing Nodes: %w", err)
	}
	exists := map[string]bool{}
	for _, s := range all {
		exists[ProviderIDPrefix+s.ID] = true
	}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, prefix) && strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) && !exists[n.Spec.ProviderID] {
			if err := kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("deleting Node %s, whose server %s is gone: %w", n.Name, n.Spec.ProviderID, err)
			}
		}
	}
	for _, s := range all {
		if s.Status != "ACTIVE" {
			continue
		}
		if _, err := kube.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return made, fmt.Errorf("reading Node %s: %w", s.Name, err)
		}
		addresses, err := nodeAddresses(s, machineNetwork)
		if err != nil {
			return made, err
		}
		if err := createNode(ctx, kube, s.Name, ProviderIDPrefix+s.ID, addresses); err != nil {
			return made, err
		}
		made++
	}
	return made, nil
}

// nodeAddresses are a server's fixed addresses as a Node's InternalIPs: those on machineNetwork
// (by network name, as Nova lists them) first, then the others by network name.
func nodeAddresses(s servers.Server, machineNetwork string) ([]string, error) {
	var networks []string
	for name := range s.Addresses {
		networks = append(networks, name)
	}
	sort.Slice(networks, func(i, j int) bool {
		if (networks[i] == machineNetwork) != (networks[j] == machineNetwork) {
			return networks[i] == machineNetwork
		}
		return networks[i] < networks[j]
	})
	var out []string
	for _, name := range networks {
		list, _ := s.Addresses[name].([]any)
		for _, a := range list {
			m, _ := a.(map[string]any)
			addr, _ := m["addr"].(string)
			if _, err := netip.ParseAddr(addr); err != nil {
				return nil, fmt.Errorf("server %s (%s) has address %q on network %s, not an IP address", s.Name, s.ID, addr, name)
			}
			out = append(out, addr)
		}
	}
	if onMachineNetwork, _ := s.Addresses[machineNetwork].([]any); len(onMachineNetwork) == 0 {
		return nil, fmt.Errorf("server %s (%s) is ACTIVE with no address on the machine network %s (addresses: %v)", s.Name, s.ID, machineNetwork, s.Addresses)
	}
	return out, nil
}

func createNode(ctx context.Context, kube kubernetes.Interface, name, providerID string, addresses []string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node-role.kubernetes.io/worker": "", "type": "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	for _, a := range addresses {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	_, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering Node %s (%s): %w", name, providerID, err)
	}
	return nil
}
