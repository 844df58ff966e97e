//go:build integration

package machineapi_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/trunks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestWorkerMachineSetMakesRealServers: the installer's worker MachineSet of 2, reconciled by
// the real MachineSet and machine controllers with the OpenStack actuator, gives 2 ACTIVE Nova
// servers, each with one port on the machine network carrying the VIPs as allowed address
// pairs and the worker security group; the Machines are Running with the server's providerID,
// its addresses and a nodeRef to a Ready Node whose node IP is on the machine network.
func TestWorkerMachineSetMakesRealServers(t *testing.T) {
	// A project of its own: the cluster's network must not show up in what the tests of the
	// shared demo project list (the wizard counts the networks it offers).
	p := ostest.NewProject(t, testenv.NewCloud(t), "mapi")
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: p.CloudsFile, Cloud: ostest.CloudName, Workers: 2})
	t.Logf("2 workers Ready in %s", time.Since(start).Round(time.Second))

	mc, err := machineclient.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	machines, err := mc.MachineV1beta1().Machines(machineapi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + cl.MachineSet})
	if err != nil {
		t.Fatal(err)
	}
	if len(machines.Items) != 2 {
		t.Fatalf("%d Machines, want 2", len(machines.Items))
	}
	machineNet := netip.MustParsePrefix(machineapi.MachineNetwork)
	for _, m := range machines.Items {
		if m.Spec.ProviderID == nil || !strings.HasPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix) {
			t.Fatalf("Machine %s: providerID %v", m.Name, m.Spec.ProviderID)
		}
		id := strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix)
		srv, err := servers.Get(ctx, cl.Clients.Compute, id).Extract()
		if err != nil {
			t.Fatalf("Machine %s: server %s: %v", m.Name, id, err)
		}
		if srv.Status != "ACTIVE" || srv.Name != m.Name {
			t.Errorf("server %s: name %q status %s, want %q ACTIVE", id, srv.Name, srv.Status, m.Name)
		}
		if m.Annotations["openstack-resourceId"] != id || m.Annotations["machine.openshift.io/instance-state"] != "ACTIVE" {
			t.Errorf("Machine %s annotations %v", m.Name, m.Annotations)
		}
		pages, err := ports.List(cl.Clients.Network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ps, _ := ports.ExtractPorts(pages)
		if len(ps) != 1 {
			t.Fatalf("server %s has %d ports, want 1: %+v", id, len(ps), ps)
		}
		p := ps[0]
		var pairs []string
		for _, ap := range p.AllowedAddressPairs {
			pairs = append(pairs, ap.IPAddress)
		}
		slices.Sort(pairs)
		if p.NetworkID != cl.Cloud.NetworkID || !slices.Equal(pairs, []string{machineapi.APIVIP, machineapi.IngressVIP}) ||
			!slices.Equal(p.SecurityGroups, []string{cl.Cloud.SecurityGroupIDs["worker"]}) || p.Name != m.Name+"-0" {
			t.Errorf("server %s port %s: network %s (want %s), pairs %v, groups %v (want the worker group %s), name %s",
				id, p.ID, p.NetworkID, cl.Cloud.NetworkID, pairs, p.SecurityGroups, cl.Cloud.SecurityGroupIDs["worker"], p.Name)
		}
		if len(p.FixedIPs) != 1 {
			t.Fatalf("port %s: fixed IPs %v", p.ID, p.FixedIPs)
		}
		ip := p.FixedIPs[0].IPAddress
		if !slices.Contains(p.Tags, "openshiftClusterID="+cl.InfraID) {
			t.Errorf("port %s tags %v", p.ID, p.Tags)
		}
		// The installer's spec says trunk: true: the port is a trunk's parent.
		tpages, err := trunks.List(cl.Clients.Network, trunks.ListOpts{PortID: p.ID}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tr, _ := trunks.ExtractTrunks(tpages); len(tr) != 1 {
			t.Errorf("port %s: %d trunks, want 1 (trunk: true)", p.ID, len(tr))
		}
		// status.addresses: the port's address, then the hostname.
		if len(m.Status.Addresses) < 2 || m.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}) ||
			m.Status.Addresses[1] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: m.Name}) {
			t.Errorf("Machine %s addresses %v, want InternalIP %s then Hostname", m.Name, m.Status.Addresses, ip)
		}
		if m.Status.NodeRef == nil || m.Status.NodeRef.Name != m.Name {
			t.Fatalf("Machine %s nodeRef %v", m.Name, m.Status.NodeRef)
		}
		node, err := sim.Client.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !testenv.NodeReady(node) || node.Spec.ProviderID != *m.Spec.ProviderID || node.Annotations[machinectl.NodeMachineAnnotation] != machineapi.Namespace+"/"+m.Name {
			t.Errorf("Node %s: ready %v, providerID %q, machine annotation %q", node.Name, testenv.NodeReady(node), node.Spec.ProviderID, node.Annotations[machinectl.NodeMachineAnnotation])
		}
		if a := firstInternalIP(node); a != ip || !machineNet.Contains(netip.MustParseAddr(a)) {
			t.Errorf("Node %s node IP %s, want the port's %s on %s", node.Name, a, ip, machineNet)
		}
	}
}

func firstInternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
