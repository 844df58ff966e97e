//go:build integration

package realmachines

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/capireal"
)

// TestClusterAPIOnRealServers: the real Cluster API controllers (MachineDeployment, MachineSet,
// Machine) and CAPO's (OpenStackMachine, OpenStackServer) against the loopback cloud's Nova and
// Neutron. A MachineDeployment of 2 and a standalone MachineSet of 1 reach 3 ACTIVE servers and
// Running Machines with Nodes, each server with one port, on the machine network. After
// `clusterapi patch --network storage --security-group nfs` and `clusterapi rollout` (the
// deployment rolls by itself, the set by the command), every Machine is new and its server has
// a port on the storage network with no allowed address pairs and the nfs group, and the old
// servers are gone. After `clusterapi patch --remove --force` and `clusterapi rollout`, every Machine is
// new again and no port is left on the storage network, the old servers' included.
func TestClusterAPIOnRealServers(t *testing.T) {
	cloud := testenv.NewCloud(t)
	storage, nfs := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]
	if storage == "" || nfs == "" {
		t.Fatalf("the loopback cloud's seed has no storage network or nfs group: %v %v", cloud.Seed.Networks, cloud.Seed.SecurityGroups)
	}
	sim := testenv.NewSimCluster(t, testenv.SimOptions{})
	env := capireal.Start(t, sim, cloud)
	at := cliAt{kubeconfig: sim.Kubeconfig, cloudsFile: cloud.CloudsFile, cloud: testenv.CloudDemo}
	md, ms := env.Name("md"), env.Name("ms")
	mdSel, msSel := capireal.DeploymentLabel+"="+md, capireal.SetLabel+"="+ms

	start := time.Now()
	env.CreateMachineDeployment(t, md, 2)
	env.CreateMachineSet(t, ms, 1)
	first := append(env.WaitMachines(t, mdSel, 2, nil, capireal.WaitTimeout()), env.WaitMachines(t, msSel, 1, nil, capireal.WaitTimeout())...)
	t.Logf("3 Machines Running with Nodes on ACTIVE servers %s after the MachineDeployment and MachineSet were created", time.Since(start).Round(100*time.Millisecond))
	for _, m := range first {
		ports := serverOf(t, env, m, sim)
		if len(ports) != 1 || ports[0].NetworkID != env.MachineNetwork {
			t.Errorf("server of Machine %s: ports %+v, want one on the machine network %s", m.Name, ports, env.MachineNetwork)
		}
	}

	// Attach: the command's own code path, with the cloud to decide port security.
	start = time.Now()
	at.must(t, 0, "clusterapi", "patch", "-n", env.Namespace, "--network", storage, "--security-group", nfs)
	mdTemplate, msTemplate := templateOf(t, env, capireal.MachineDeploymentGVR, md), templateOf(t, env, capireal.MachineSetGVR, ms)
	if !strings.HasPrefix(mdTemplate, md+"-manila-") || !strings.HasPrefix(msTemplate, ms+"-manila-") {
		t.Fatalf("after clusterapi patch the deployment makes its Machines from %s and the set from %s", mdTemplate, msTemplate)
	}
	out := at.must(t, 0, "clusterapi", "rollout", "-n", env.Namespace, "--poll-interval", "500ms", "--timeout", "8m")
	if !regexp.MustCompile(ms + `\s+1/1 replaced\s+done`).MatchString(out) {
		t.Errorf("clusterapi rollout does not say it replaced the Machine of %s:\n%s", ms, out)
	}
	second := append(env.WaitMachines(t, mdSel, 2, is(mdTemplate), capireal.WaitTimeout()), env.WaitMachines(t, msSel, 1, is(msTemplate), capireal.WaitTimeout())...)
	t.Logf("patch + rollout: 3 new Machines Running with the storage port %s after the patch", time.Since(start).Round(100*time.Millisecond))
	for _, m := range second {
		if slices.ContainsFunc(first, func(old capireal.Machine) bool { return old.Name == m.Name }) {
			t.Errorf("Machine %s was not replaced", m.Name)
		}
		ports := serverOf(t, env, m, sim)
		var onStorage []capireal.Port
		for _, p := range ports {
			if p.NetworkID == storage {
				onStorage = append(onStorage, p)
			}
		}
		if len(onStorage) != 1 {
			t.Errorf("server %s of Machine %s has %d ports on the storage network, want 1: %+v", m.ServerID, m.Name, len(onStorage), ports)
			continue
		}
		p := onStorage[0]
		if len(p.AllowedAddressPairs) != 0 || !slices.Equal(p.SecurityGroups, []string{nfs}) || p.PortSecurity == nil || !*p.PortSecurity || len(p.FixedIPs) != 1 {
			t.Errorf("storage port %s of Machine %s: allowed address pairs %v, security groups %v (want [%s]), port security %v, fixed IPs %v",
				p.ID, m.Name, p.AllowedAddressPairs, p.SecurityGroups, nfs, p.PortSecurity, p.FixedIPs)
		}
	}
	serversGone(t, env, first)

	// Detach.
	start = time.Now()
	// --force: the command does not read a workload cluster's pods (it refuses without it).
	at.must(t, 0, "clusterapi", "patch", "--remove", "--force", "-n", env.Namespace, "--network", storage, "--security-group", nfs)
	mdTemplate, msTemplate = templateOf(t, env, capireal.MachineDeploymentGVR, md), templateOf(t, env, capireal.MachineSetGVR, ms)
	at.must(t, 0, "clusterapi", "rollout", "-n", env.Namespace, "--poll-interval", "500ms", "--timeout", "8m")
	third := append(env.WaitMachines(t, mdSel, 2, is(mdTemplate), capireal.WaitTimeout()), env.WaitMachines(t, msSel, 1, is(msTemplate), capireal.WaitTimeout())...)
	t.Logf("remove + rollout: 3 new Machines Running without the storage port %s after the removal", time.Since(start).Round(100*time.Millisecond))
	for _, m := range third {
		if slices.ContainsFunc(second, func(old capireal.Machine) bool { return old.Name == m.Name }) {
			t.Errorf("Machine %s was not replaced after the removal", m.Name)
		}
		if ports := serverOf(t, env, m, sim); len(ports) != 1 || ports[0].NetworkID != env.MachineNetwork {
			t.Errorf("after the removal, server of Machine %s: ports %+v, want one on the machine network %s", m.Name, ports, env.MachineNetwork)
		}
	}
	serversGone(t, env, second)
	ours := map[string]bool{}
	for _, m := range slices.Concat(first, second, third) {
		ours[m.ServerID] = true
	}
	left, err := env.PortsOnNetwork(context.Background(), storage, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if ours[p.DeviceID] || p.Description == clusterapi.PortDescription {
			t.Errorf("port %s (%q) of server %s is still on the storage network after the removal", p.ID, p.Description, p.DeviceID)
		}
	}
}

func is(template string) func(string) bool { return func(s string) bool { return s == template } }

// templateOf is the OpenStackMachineTemplate a deployment or set makes its Machines from.
func templateOf(t *testing.T, env *capireal.Env, gvr schema.GroupVersionResource, name string) string {
	t.Helper()
	u, err := env.Dyn.Resource(gvr).Namespace(env.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "infrastructureRef", "name")
	return tmpl
}

// serverOf checks that the Machine's server is ACTIVE and its Node has the server's providerID
// and its address on the machine network, and returns the server's ports.
func serverOf(t *testing.T, env *capireal.Env, m capireal.Machine, sim *testenv.SimCluster) []capireal.Port {
	t.Helper()
	ctx := context.Background()
	s, err := env.Server(ctx, m.ServerID)
	if err != nil {
		t.Fatalf("Machine %s: %v", m.Name, err)
	}
	if s.Status != "ACTIVE" || s.Name != m.Name {
		t.Errorf("server %s of Machine %s: %s named %s, want ACTIVE named as the Machine", s.ID, m.Name, s.Status, s.Name)
	}
	node, err := sim.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Node %s of Machine %s: %v", m.NodeName, m.Name, err)
	}
	if node.Spec.ProviderID != capireal.ProviderIDPrefix+s.ID {
		t.Errorf("Node %s of Machine %s has providerID %q, its server is %s", node.Name, m.Name, node.Spec.ProviderID, s.ID)
	}
	ports, err := env.Ports(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p.NetworkID == env.MachineNetwork && (len(p.FixedIPs) == 0 || node.Status.Addresses[0].Address != p.FixedIPs[0].IPAddress) {
			t.Errorf("Node %s's first address %v is not its server's address on the machine network %v", node.Name, node.Status.Addresses, p.FixedIPs)
		}
	}
	return ports
}

// serversGone waits until Nova no longer has the servers of the Machines (replaced ones: Cluster
// API deletes the OpenStackMachine, CAPO the server and its ports).
func serversGone(t *testing.T, env *capireal.Env, machines []capireal.Machine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		var left []string
		for _, m := range machines {
			if _, err := env.Server(ctx, m.ServerID); !gophercloud.ResponseCodeIs(err, 404) {
				left = append(left, fmt.Sprintf("%s (%s: %v)", m.ServerID, m.Name, err))
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("servers of replaced Machines still there after 2 minutes: %v\n%s", left, env.LogTail(40))
		case <-time.After(time.Second):
		}
	}
}
