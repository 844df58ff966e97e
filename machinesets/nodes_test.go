package machinesets

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNodeAddressesAreNodeIPs(t *testing.T) {
	node := func(name string, addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	internal := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	kube := fake.NewClientset(
		// Attached: the storage address follows the node IP.
		node("worker-a", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-a"}, internal("10.196.0.11"), internal("10.0.0.21")),
		// Not attached yet.
		node("worker-b", internal("10.196.0.12")),
		// An address that does not parse is passed over for the next one.
		node("worker-c", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.9"}, internal("not-an-ip"), internal("10.196.0.13")),
		// No InternalIP at all: nothing.
		node("worker-d", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-d"}),
	)
	got, err := NodeAddresses(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.196.0.11"), netip.MustParseAddr("10.196.0.12"), netip.MustParseAddr("10.196.0.13")}
	if !slices.Equal(got, want) {
		t.Errorf("NodeAddresses = %v, want the node IPs %v (the storage address 10.0.0.21 left out)", got, want)
	}
}
