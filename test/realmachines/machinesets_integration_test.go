//go:build integration

package realmachines

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsecurity"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
)

// realMachinesCluster is an installer-shaped cluster whose workers are real servers of a project
// of its own, made by the real Machine API (test/testenv/machineapi); the commands find the
// cluster and the project through the returned cliAt.
func realMachinesCluster(t *testing.T, ctx context.Context, prefix string, opts machineapi.ClusterOptions) (*ostest.Project, *testenv.SimCluster, *machineapi.Cluster, machineclient.Interface, cliAt) {
	t.Helper()
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, prefix)
	// A compact cluster's masters are its Machines; otherwise one control-plane Node stands apart.
	simOpts := testenv.SimOptions{ControlPlaneNodes: 1}
	if opts.Compact {
		simOpts.ControlPlaneNodes = 0
	}
	sim := testenv.NewSimCluster(t, simOpts)
	opts.CloudsFile, opts.Cloud = p.CloudsFile, ostest.CloudName
	cl := machineapi.NewCluster(t, ctx, sim, opts)
	mc, err := machineclient.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	return p, sim, cl, mc, cliAt{kubeconfig: sim.Kubeconfig, cloudsFile: p.CloudsFile, cloud: ostest.CloudName}
}

// serverPorts are the Neutron ports of the server of a Machine, by its providerID.
func serverPorts(t *testing.T, ctx context.Context, cl *machineapi.Cluster, m machinev1beta1.Machine) (string, []ports.Port) {
	t.Helper()
	if m.Spec.ProviderID == nil {
		t.Fatalf("Machine %s has no providerID", m.Name)
	}
	id := strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix)
	srv, err := servers.Get(ctx, cl.Clients.Compute, id).Extract()
	if err != nil {
		t.Fatalf("Machine %s: server %s: %v", m.Name, id, err)
	}
	if srv.Status != "ACTIVE" {
		t.Errorf("Machine %s: server %s is %s, want ACTIVE", m.Name, id, srv.Status)
	}
	pages, err := ports.List(cl.Clients.Network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ports.ExtractPorts(pages)
	if err != nil {
		t.Fatal(err)
	}
	return id, ps
}

// TestRealMachinesTakeTheStorageNetwork: `machinesets patch` adds the storage network
// (noAllowedAddressPairs) and a security group to the installer's worker MachineSet, and
// `machinesets rollout` replaces its two Machines; the real Machine API makes every new server
// with a port on the storage network that has no allowed address pairs and the groups asked
// for, beside its machine network port (the VIPs as pairs), and the old servers are deleted
// with their ports; the Nodes' node IP stays on the machine network. Then `patch --remove` and a
// rollout leave no port of the cluster on the storage network.
func TestRealMachinesTakeTheStorageNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	p, sim, cl, mc, cli := realMachinesCluster(t, ctx, "realmachines", machineapi.ClusterOptions{Workers: 2})
	storage := p.CreateNetworkWith("rm-storage", nil, map[string]any{"cidr": "10.78.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}})
	nfs := p.CreateSecurityGroup("rm-nfs", true)
	set := cl.MachineSet
	old := liveMachines(t, ctx, mc, set)
	rollFlags := []string{"--poll-interval", "1s", "--timeout", "8m"}

	// The storage network has no Manila export here: --force.
	code, out, errOut := cli.run(t, "machinesets", "patch", "--network", storage.ID, "--security-group", nfs, "--force")
	if code != 0 || !strings.Contains(out, "added network "+storage.ID) {
		t.Fatalf("patch: exit %d\n%s%s", code, out, errOut)
	}
	start := time.Now()
	code, out, errOut = cli.run(t, append([]string{"machinesets", "rollout"}, rollFlags...)...)
	if code != 0 || !strings.Contains(out, set+"  2/2 replaced  done") {
		t.Fatalf("rollout: exit %d\n%s%s\nmachine-api-openstack log:\n%s", code, out, errOut, cl.Log(30))
	}
	t.Logf("rollout of 2 real machines onto the storage network: %s\n%s", time.Since(start).Round(time.Second), out)

	machineNet := netip.MustParsePrefix(machineapi.MachineNetwork)
	worker := cl.Cloud.SecurityGroupIDs["worker"]
	attached := liveMachines(t, ctx, mc, set)
	if len(attached) != 2 {
		t.Fatalf("%d Machines after the rollout, want 2", len(attached))
	}
	for _, m := range attached {
		if slices.ContainsFunc(old, func(o machinev1beta1.Machine) bool { return o.Name == m.Name }) {
			t.Errorf("old Machine %s was not replaced", m.Name)
		}
		id, ps := serverPorts(t, ctx, cl, m)
		var onStorage, onNodes []ports.Port
		for _, port := range ps {
			switch port.NetworkID {
			case storage.ID:
				onStorage = append(onStorage, port)
			case cl.Cloud.NetworkID:
				onNodes = append(onNodes, port)
			default:
				t.Errorf("server %s: port %s on unexpected network %s", id, port.ID, port.NetworkID)
			}
		}
		if len(onStorage) != 1 || len(onNodes) != 1 {
			t.Fatalf("server %s (Machine %s): %d ports on the storage network, %d on the machine network; want 1 and 1", id, m.Name, len(onStorage), len(onNodes))
		}
		sp, np := onStorage[0], onNodes[0]
		if len(sp.AllowedAddressPairs) != 0 {
			t.Errorf("storage port %s of server %s has allowed address pairs %v, want none (noAllowedAddressPairs)", sp.ID, id, sp.AllowedAddressPairs)
		}
		for _, port := range []ports.Port{sp, np} {
			groups := slices.Sorted(slices.Values(port.SecurityGroups))
			want := slices.Sorted(slices.Values([]string{worker, nfs}))
			if !slices.Equal(groups, want) {
				t.Errorf("port %s (network %s) of server %s: security groups %v, want the worker group and %s: %v", port.ID, port.NetworkID, id, groups, nfs, want)
			}
		}
		if len(np.AllowedAddressPairs) != 2 {
			t.Errorf("machine network port %s of server %s: allowed address pairs %v, want the two VIPs", np.ID, id, np.AllowedAddressPairs)
		}
		if len(sp.FixedIPs) != 1 || !strings.HasPrefix(sp.FixedIPs[0].IPAddress, "10.78.0.") {
			t.Errorf("storage port %s: fixed IPs %v, want one in 10.78.0.0/24", sp.ID, sp.FixedIPs)
		}
		// The Machine lists both addresses; its Node keeps its node IP on the machine network.
		var internal []string
		for _, a := range m.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if !slices.Contains(internal, sp.FixedIPs[0].IPAddress) || !slices.Contains(internal, np.FixedIPs[0].IPAddress) {
			t.Errorf("Machine %s InternalIPs %v, want both ports' addresses", m.Name, internal)
		}
		node, err := sim.Client.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip := nodeInternalIP(node); !machineNet.Contains(netip.MustParseAddr(ip)) || ip != np.FixedIPs[0].IPAddress {
			t.Errorf("Node %s node IP %s, want the machine network port's %s", node.Name, ip, np.FixedIPs[0].IPAddress)
		}
	}
	// The rollout is done once the old Machines are being deleted; the machine controller drains
	// their Nodes and deletes their servers and ports shortly after.
	for _, m := range old {
		waitMachineGone(t, ctx, cl, m)
	}

	// --remove, then a rollout: no port of the cluster is left on the storage network.
	code, out, errOut = cli.run(t, "machinesets", "patch", "--remove")
	if code != 0 || !strings.Contains(out, "removed network "+storage.ID) {
		t.Fatalf("patch --remove: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli.run(t, append([]string{"machinesets", "rollout"}, rollFlags...)...)
	if code != 0 || !strings.Contains(out, set+"  2/2 replaced  done") {
		t.Fatalf("rollout after --remove: exit %d\n%s%s\nmachine-api-openstack log:\n%s", code, out, errOut, cl.Log(30))
	}
	for _, m := range liveMachines(t, ctx, mc, set) {
		id, ps := serverPorts(t, ctx, cl, m)
		if len(ps) != 1 || ps[0].NetworkID != cl.Cloud.NetworkID {
			t.Errorf("server %s (Machine %s) after --remove: ports %+v, want only its machine network port", id, m.Name, ps)
		}
	}
	for _, m := range attached {
		waitMachineGone(t, ctx, cl, m)
	}
	pages, err := ports.List(cl.Clients.Network, ports.ListOpts{NetworkID: storage.ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := ports.ExtractPorts(pages)
	for _, port := range left {
		if strings.HasPrefix(port.Name, cl.InfraID+"-") {
			t.Errorf("port %s (%s) of the cluster still on the storage network after --remove and a rollout", port.ID, port.Name)
		}
	}
}

// waitMachineGone waits (2 minutes at most) until the server of a deleted Machine is gone from
// Nova and no port of it is left in Neutron: CAPO deletes the ports after it saw the server go
// (it looks every 10 s), and Nova unbinds them before, so a port can outlive its server a while.
func waitMachineGone(t *testing.T, ctx context.Context, cl *machineapi.Cluster, m machinev1beta1.Machine) {
	t.Helper()
	id := strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix)
	var state string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := servers.Get(ctx, cl.Clients.Compute, id).Extract()
		if !gophercloud.ResponseCodeIs(err, 404) {
			state = fmt.Sprintf("server still there (%v)", err)
			return false, nil
		}
		pages, err := ports.List(cl.Clients.Network, ports.ListOpts{}).AllPages(ctx)
		if err != nil {
			return false, err
		}
		all, err := ports.ExtractPorts(pages)
		var left []string
		for _, p := range all {
			if p.DeviceID == id || strings.HasPrefix(p.Name, m.Name+"-") {
				left = append(left, p.Name)
			}
		}
		state = fmt.Sprintf("ports left: %v", left)
		return err == nil && len(left) == 0, err
	})
	if err != nil {
		t.Errorf("old Machine %s, server %s: %s: %v\nmachine-api-openstack log:\n%s", m.Name, id, state, err, cl.Log(20))
	}
}

// TestRealMachinesNeutronRefusalStopsTheRollout: the storage network patched into the worker
// MachineSet has its port security switched off afterwards while the set asks for security
// groups, so Neutron refuses the new server's port. As with the OpenShift provider, that is a
// create error, not an invalid configuration: the machine controller keeps the Machine
// Provisioning and tries again (it never gets a server or a providerID), CAPO deletes the ports
// it made for it at each try, and Neutron's words reach the Machine as a Warning event. The
// rollout stops on the third such refusal, long before its --timeout, saying Neutron's words,
// with the old Machine serving.
func TestRealMachinesNeutronRefusalStopsTheRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p, sim, cl, mc, cli := realMachinesCluster(t, ctx, "rmrefusal", machineapi.ClusterOptions{Workers: 1})
	storage := p.CreateNetworkWith("rm-refused", nil, map[string]any{"cidr": "10.79.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}})
	nfs := p.CreateSecurityGroup("rm-refused-nfs", true)
	set := cl.MachineSet
	old := liveMachines(t, ctx, mc, set)
	if len(old) != 1 {
		t.Fatalf("%d Machines, want 1", len(old))
	}
	oldServer, _ := serverPorts(t, ctx, cl, old[0])

	code, out, errOut := cli.run(t, "machinesets", "patch", "--network", storage.ID, "--security-group", nfs, "--force")
	if code != 0 {
		t.Fatalf("patch: exit %d\n%s%s", code, out, errOut)
	}
	// Port security off on the network: a port on it cannot have security groups.
	off := false
	if _, err := networks.Update(ctx, cl.Clients.Network, storage.ID, portsecurity.NetworkUpdateOptsExt{
		UpdateOptsBuilder: networks.UpdateOpts{}, PortSecurityEnabled: &off}).Extract(); err != nil {
		t.Fatalf("switching port security off on network %s: %v", storage.ID, err)
	}
	// The timeout is far: the rollout stops on the repeated refusal, with Neutron's words.
	start := time.Now()
	code, out, errOut = cli.run(t, "machinesets", "rollout", "--poll-interval", "1s", "--timeout", "8m")
	if code == 0 || !strings.Contains(out+errOut, "was refused each time (phase Provisioning)") || !strings.Contains(out+errOut, "Port security must be enabled") {
		t.Fatalf("rollout: exit %d, want it stopped on the new Machine with Neutron's refusal\n%s%s\nmachine-api-openstack log:\n%s", code, out, errOut, cl.Log(30))
	}
	t.Logf("stopped rollout after %s:\n%s%s", time.Since(start).Round(time.Second), out, errOut)

	var fresh *machinev1beta1.Machine
	for _, m := range liveMachines(t, ctx, mc, set) {
		if m.Name != old[0].Name {
			fresh = &m
		}
	}
	if fresh == nil {
		t.Fatal("no new Machine")
	}
	if phase := ptrString(fresh.Status.Phase); phase != machinev1beta1.PhaseProvisioning || fresh.Spec.ProviderID != nil || fresh.Status.ErrorMessage != nil {
		t.Errorf("new Machine %s: phase %q, providerID %v, errorMessage %v; want Provisioning, none, none", fresh.Name, phase, fresh.Spec.ProviderID, fresh.Status.ErrorMessage)
	}
	events, err := sim.Client.CoreV1().Events(machineapi.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + fresh.Name + ",type=Warning"})
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	// CAPO's recorder title-cases the reason: the event reads "Failedcreateport".
	for _, e := range events.Items {
		if strings.EqualFold(e.Reason, "FailedCreatePort") && strings.Contains(e.Message, "Port security must be enabled") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no Warning event FailedCreatePort with Neutron's message on Machine %s: %+v", fresh.Name, events.Items)
	}
	// Nova never got a server for it; no port of it is on the refused network, and the machine
	// network port of each try is deleted after it (the machine controller tries again and
	// again, so one may exist for a moment: never more than one).
	pages, err := servers.List(cl.Clients.Compute, servers.ListOpts{Name: "^" + fresh.Name + "$"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if srvs, _ := servers.ExtractServers(pages); len(srvs) != 0 {
		t.Errorf("Machine %s has %d servers, want none", fresh.Name, len(srvs))
	}
	ppages, err := ports.List(cl.Clients.Network, ports.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := ports.ExtractPorts(ppages)
	var tries []string
	for _, port := range all {
		if !strings.HasPrefix(port.Name, fresh.Name+"-") {
			continue
		}
		if port.NetworkID != cl.Cloud.NetworkID {
			t.Errorf("port %s (%s) of the refused Machine on network %s", port.ID, port.Name, port.NetworkID)
		}
		tries = append(tries, port.ID)
	}
	if len(tries) > 1 {
		t.Errorf("the refused Machine's tries left %d ports on the machine network: %v", len(tries), tries)
	}
	// The old Machine serves on.
	still, err := mc.MachineV1beta1().Machines(machineapi.Namespace).Get(ctx, old[0].Name, metav1.GetOptions{})
	if err != nil || ptrString(still.Status.Phase) != machinev1beta1.PhaseRunning {
		t.Errorf("old Machine %s: %v, phase %v", old[0].Name, err, still)
	}
	if srv, err := servers.Get(ctx, cl.Clients.Compute, oldServer).Extract(); err != nil || srv.Status != "ACTIVE" {
		t.Errorf("old server %s: %v", oldServer, err)
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
