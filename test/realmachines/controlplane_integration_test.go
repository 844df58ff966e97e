//go:build integration

package realmachines

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestControlPlanePatchRollsRealMasters: on a compact cluster whose three masters are real
// servers under the installer's ControlPlaneMachineSet (RollingUpdate), `controlplane patch
// --rollout` adds the storage network and a group to its template; the control-plane-machine-set
// rules (test/machineapi/controlplane) replace the masters one index at a time, a new master
// first, etcd's hook holding each old one until the new is ready, and the command follows them,
// checking the first new master: never fewer than two Ready masters, never two replacements at
// once. Every new master's server has a port on the storage network without allowed address
// pairs and with the groups asked for, its node IP on the machine network; the old servers are
// gone.
func TestControlPlanePatchRollsRealMasters(t *testing.T) { rollRealMasters(t, machinev1.RollingUpdate) }

// TestControlPlaneRolloutOnDelete is the same with strategy OnDelete, where nothing moves until
// a master is deleted: `controlplane patch --rollout` deletes one outdated master at a time, each
// once the previous replacement is ready and the set counts every master ready again.
func TestControlPlaneRolloutOnDelete(t *testing.T) { rollRealMasters(t, machinev1.OnDelete) }

func rollRealMasters(t *testing.T, strategy machinev1.ControlPlaneMachineSetStrategyType) {
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	start := time.Now()
	p, sim, cl, mc, cli := realMachinesCluster(t, ctx, "compact", machineapi.ClusterOptions{Compact: true})
	t.Logf("compact cluster: 3 masters Ready in %s", time.Since(start).Round(time.Second))
	old := masterNames(t, ctx, mc)
	storage := p.CreateNetworkWith("cp-storage", nil, map[string]any{"cidr": "10.77.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}})
	nfs := p.CreateSecurityGroup("cp-nfs", true)
	if strategy != machinev1.RollingUpdate {
		patch := []byte(`{"spec":{"strategy":{"type":"` + string(strategy) + `"}}}`)
		if _, err := mc.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).Patch(ctx, machinesets.ControlPlaneName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Watch the masters while they roll: Ready Nodes of masters, and replacements at once.
	stop := make(chan struct{})
	watched := make(chan [2]int, 1)
	go func() {
		minReady, maxSurge := 3, 0
		for {
			select {
			case <-stop:
				watched <- [2]int{minReady, maxSurge}
				return
			case <-time.After(500 * time.Millisecond):
			}
			ready, live := readyMasters(ctx, sim, mc)
			if ready >= 0 {
				minReady = min(minReady, ready)
				maxSurge = max(maxSurge, live-3)
			}
		}
	}()
	// The storage network has no Manila export here: --force. The command returns once every
	// master is on the template and ready.
	t0 := time.Now()
	code, out, errOut := cli.run(t, "controlplane", "patch", "--network", storage.ID, "--security-group", nfs, "--force", "--rollout",
		"--poll-interval", "2s", "--timeout", "15m")
	if code != 0 || !strings.Contains(out, "controlplanemachineset/cluster  patched") ||
		!strings.Contains(out, "3/3 masters on the template  every master (3) is on the template and ready") || !strings.Contains(out, ": check passed (") {
		close(stop)
		t.Fatalf("controlplane patch --rollout (%s): exit %d\n%s%s\nmachine-api-openstack log:\n%s", strategy, code, out, errOut, cl.Log(40))
	}
	t.Logf("$ manila-setup controlplane patch --rollout (%s)\n%s", strategy, out)
	if strategy == machinev1.OnDelete && strings.Count(out, "deleted master ") != 3 {
		t.Errorf("OnDelete: the command deleted %d masters, want 3 (one at a time)", strings.Count(out, "deleted master "))
	}
	// The set reports every master updated, as the command saw.
	if err := cl.WaitMasters(ctx, 3, time.Minute); err != nil {
		close(stop)
		t.Fatalf("the masters were not replaced: %v", err)
	}
	close(stop)
	seen := <-watched
	t.Logf("3 masters replaced in %s; fewest Ready masters during the rollout %d, most replacements at once %d", time.Since(t0).Round(time.Second), seen[0], seen[1])
	if seen[0] < 2 || seen[1] > 1 {
		t.Errorf("during the rollout: %d Ready masters at the fewest (want 2 or more), %d replacements at once (want 1 at most)", seen[0], seen[1])
	}
	code, out, errOut = cli.run(t, "controlplane", "list")
	if code != 0 || !strings.Contains(out, "attached") || !strings.Contains(out, "3/3") {
		t.Errorf("controlplane list after the rollout: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("$ manila-setup controlplane list\n%s", out)

	now := masterNames(t, ctx, mc)
	for _, name := range now {
		if slices.Contains(old, name) {
			t.Errorf("master %s was not replaced (masters now %v)", name, now)
		}
	}
	list, err := mc.MachineV1beta1().Machines(machinesets.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.RoleLabel + "=master"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if m.DeletionTimestamp != nil {
			continue
		}
		id, ps := serverPorts(t, ctx, cl, m)
		var onStorage []ports.Port
		for _, port := range ps {
			if port.NetworkID == storage.ID {
				onStorage = append(onStorage, port)
			}
		}
		if len(onStorage) != 1 || len(onStorage[0].AllowedAddressPairs) != 0 || !slices.Contains(onStorage[0].SecurityGroups, nfs) ||
			!slices.Contains(onStorage[0].SecurityGroups, cl.Cloud.SecurityGroupIDs["master"]) {
			t.Errorf("master %s (server %s): storage ports %+v, want one without address pairs, with groups %s and the master group", m.Name, id, onStorage, nfs)
		}
		if m.Status.NodeRef == nil {
			t.Errorf("master %s has no Node", m.Name)
			continue
		}
		node, err := sim.Client.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip := nodeInternalIP(node); !strings.HasPrefix(ip, "10.196.") {
			t.Errorf("master %s: node IP %s, want it on the machine network %s", m.Name, ip, machineapi.MachineNetwork)
		}
	}
}

// masterNames are the master Machines not being deleted.
func masterNames(t *testing.T, ctx context.Context, mc machineclient.Interface) []string {
	t.Helper()
	live, err := machinectl.LiveMachines(ctx, mc, machinectl.RoleLabel+"=master")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range live {
		names = append(names, m.Name)
	}
	return names
}

// readyMasters counts the masters whose Node is Ready, and the master Machines not being
// deleted; -1 when the cluster could not be read.
func readyMasters(ctx context.Context, sim *testenv.SimCluster, mc machineclient.Interface) (ready, live int) {
	list, err := mc.MachineV1beta1().Machines(machinesets.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.RoleLabel + "=master"})
	if err != nil {
		return -1, 0
	}
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			live++
		}
		if m.Status.NodeRef == nil || m.Status.Phase == nil || *m.Status.Phase != machinev1beta1.PhaseRunning && *m.Status.Phase != machinev1beta1.PhaseDeleting {
			continue
		}
		node, err := sim.Client.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, live
}

// TestControlPlaneRolloutStopsOnAFullStorageSubnet: the storage subnet fills up after the check
// that `controlplane patch` makes (another project's servers took its last addresses), so Neutron
// refuses the new master's storage port. `controlplane patch --rollout` stops on the repeated
// refusal with Neutron's words instead of waiting for its timeout; the three masters are
// untouched and Ready; Nova never got a server for the new master. The way back the refusal
// names, `controlplane patch --remove --force`, gives the template its original networks, the
// operator deletes the Machine it could not make, and the masters are at rest again.
func TestControlPlaneRolloutStopsOnAFullStorageSubnet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p, sim, cl, mc, cli := realMachinesCluster(t, ctx, "cpfull", machineapi.ClusterOptions{Compact: true})
	old := masterNames(t, ctx, mc)
	// Two addresses in the pool, both taken by ports of servers of another cluster.
	storage := p.CreateNetworkWith("cp-full", nil, map[string]any{"cidr": "10.76.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"},
		"allocation_pools": []map[string]string{{"start": "10.76.0.10", "end": "10.76.0.11"}}})
	for i := range 2 {
		p.CreatePort(storage.ID, fmt.Sprintf("other-cluster-%d", i), fmt.Sprintf("3f0c1e2a-0000-4000-8000-00000000000%d", i))
	}

	// --force: the storage network has no Manila export here, and the capacity check refuses a
	// full subnet (capacity_integration_test.go); a subnet that fills up after it is the case.
	start := time.Now()
	code, out, errOut := cli.run(t, "controlplane", "patch", "--network", storage.ID, "--force", "--rollout", "--poll-interval", "1s", "--timeout", "10m")
	if code == 0 || !strings.Contains(out+errOut, "was refused each time") || !strings.Contains(out+errOut, "No more IP addresses available") ||
		!strings.Contains(out+errOut, "controlplane patch --remove --force") {
		t.Fatalf("controlplane patch --rollout: exit %d, want it stopped on the new master with Neutron's refusal\n%s%s\nmachine-api-openstack log:\n%s", code, out, errOut, cl.Log(30))
	}
	t.Logf("stopped after %s:\n%s%s", time.Since(start).Round(time.Second), out, errOut)

	// The old masters are all there and Ready; the new one has no server.
	var fresh string
	for _, name := range masterNames(t, ctx, mc) {
		if !slices.Contains(old, name) {
			fresh = name
		}
	}
	if fresh == "" {
		t.Fatal("no new master Machine")
	}
	if ready, live := readyMasters(ctx, sim, mc); ready != 3 || live != 4 {
		t.Errorf("%d Ready masters of %d live Machines, want the 3 old ones Ready beside the new one", ready, live)
	}
	for _, name := range old {
		m, err := mc.MachineV1beta1().Machines(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || m.DeletionTimestamp != nil {
			t.Errorf("old master %s: %v, deleting %v; want it kept", name, err, m.DeletionTimestamp)
		}
	}
	pages, err := servers.List(cl.Clients.Compute, servers.ListOpts{Name: "^" + fresh + "$"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if srvs, _ := servers.ExtractServers(pages); len(srvs) != 0 {
		t.Errorf("new master %s has %d servers, want none", fresh, len(srvs))
	}

	// The way back.
	code, out, errOut = cli.run(t, "controlplane", "patch", "--remove", "--force")
	if code != 0 || !strings.Contains(out, "controlplanemachineset/cluster") {
		t.Fatalf("controlplane patch --remove --force: exit %d\n%s%s", code, out, errOut)
	}
	if err := cl.WaitMasters(ctx, 3, 3*time.Minute); err != nil {
		t.Fatalf("after --remove: %v", err)
	}
	if now := masterNames(t, ctx, mc); !slices.Equal(now, old) {
		t.Errorf("masters after --remove: %v, want the old ones %v", now, old)
	}
}
