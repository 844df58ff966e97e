//go:build integration

package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestStorageNetworkReachableJudgesNetworkAndNodes runs the operator as its ServiceAccount (RBAC
// as rendered: it lists and watches the nodes) on a sim cluster, with a project of its own in
// the loopback cloud holding one storage network per shape, each given in turn with
// --storage-network: StorageNetworkReachable judges the network as every command does
// (attach.Fitness, read from Neutron by discovery) and reports the workers whose node IP lies on
// it and those with no address on it, from their Nodes' addresses.
func TestStorageNetworkReachableJudgesNetworkAndNodes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, resync: 2 * time.Second, logs: &testenv.SyncBuffer{}}
	h.dyn = dynamic.NewForConfigOrDie(sim.Config)

	// The storage networks, as the project's member makes them. A fresh project shows Manila
	// no share yet: discovery lists these networks by their names, and --storage-network picks
	// one. The unfit one overlaps the machine network and has port security off.
	p := ostest.NewProject(t, cloud, "snr")
	const machineNetwork, overlapping = "10.196.0.0/16", "10.196.250.0/24"
	fitSubnet := func(cidr string) map[string]any {
		return map[string]any{"cidr": cidr, "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}}
	}
	dhcpOff := fitSubnet("192.168.70.0/24")
	dhcpOff["enable_dhcp"] = false
	withGateway := fitSubnet("192.168.71.0/24")
	delete(withGateway, "gateway_ip") // Neutron's default: the first address
	nets := map[string]ostest.Network{
		"storage-dhcp-off": p.CreateNetworkWith("storage-dhcp-off", nil, dhcpOff),
		"storage-unfit":    p.CreateNetworkWith("storage-unfit", map[string]any{"port_security_enabled": false}, fitSubnet(overlapping)),
		"storage-gateway":  p.CreateNetworkWith("storage-gateway", nil, withGateway),
		"storage-good":     p.CreateNetworkWith("storage-good", nil, fitSubnet("192.168.72.0/24")),
	}
	label := func(name string) string { return name + " (" + nets[name].ID + ")" }
	subnetLabel := func(name string) string { return name + "-subnet-0 (" + nets[name].SubnetIDs[0] + ")" }

	// The cluster: OpenStack, its install-config, one worker MachineSet attached to every
	// storage network with the workers' security group, and three workers beside the
	// control-plane node: worker-a has an address on the gateway and good networks, worker-b
	// took its node IP from the gateway network, worker-c has none.
	installConfig := "networking:\n  clusterNetwork:\n  - cidr: 10.128.0.0/14\n    hostPrefix: 23\n  machineNetwork:\n  - cidr: " + machineNetwork + "\n  serviceNetwork:\n  - 172.30.0.0/16\n"
	h.openStackCluster("sim-snr", installConfig)
	entries := []any{map[string]any{"uuid": cloud.Seed.Networks["tenant"]}}
	for _, name := range []string{"storage-dhcp-off", "storage-unfit", "storage-gateway", "storage-good"} {
		entries = append(entries, map[string]any{"uuid": nets[name].ID, "noAllowedAddressPairs": true})
	}
	ms := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
		"metadata": map[string]any{"name": "sim-snr-worker-0", "namespace": machinery.MachineAPINamespace},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"set": "w0"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"set": "w0"}},
				"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
					"networks": entries, "securityGroups": []any{map[string]any{"name": "sim-snr-worker"}},
				}}},
			},
		},
	}}
	if _, err := h.dyn.Resource(machinery.MachineSetGVR).Namespace(machinery.MachineAPINamespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"worker-a", "worker-b", "worker-c"} {
		if err := sim.AddNode(ctx, w, false); err != nil {
			t.Fatal(err)
		}
		if ip := netip.MustParseAddr(testenv.NodeIP(w)); netip.MustParsePrefix(overlapping).Contains(ip) {
			t.Fatalf("node %s's address %s lies in %s, which stands for a storage subnet apart from the nodes", w, ip, overlapping)
		}
	}
	if err := sim.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Every fixed IP of a machine is an InternalIP; the first is the node IP.
	// kwok writes the nodes' status too (its heartbeat): read, change and write again on a
	// conflict.
	setAddresses := func(name string, ips ...string) {
		h.t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := sim.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status.Addresses = nil
			for _, ip := range ips {
				n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
			}
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
			_, err = sim.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			h.t.Fatal(err)
		}
	}
	setAddresses("worker-a", testenv.NodeIP("worker-a"), "192.168.71.10", "192.168.72.10")
	setAddresses("worker-b", "192.168.71.11", testenv.NodeIP("worker-b"))

	creds, err := os.ReadFile(p.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	saCfg := h.installAsServiceAccount(creds)

	// run starts the operator with --storage-network set to the network named, and waits
	// until StorageNetworkReachable speaks of that network with the reason given.
	run := func(name string, status operatorv1.ConditionStatus, reason string) (stop func()) {
		t.Helper()
		stop = h.start(saCfg, Config{Namespace: testNS, Images: testImages, Resync: h.resync, CloudName: ostest.CloudName,
			StorageNetworkID: nets[name].ID, Version: "test"})
		h.waitStorageCondition(name, nets[name].ID, status, reason)
		return stop
	}
	// has waits until the message holds every part: the condition turns True or False from what
	// the controller knows first, and its message grows as the Manila controller learns the rest
	// (the storage network's subnets, from discovery), a sync or two later on a loaded machine,
	// and once more than 30 s later in a full make test (three test packages on the cloud at
	// once). The wait only caps a failure.
	has := func(parts ...string) {
		h.t.Helper()
		var msg string
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			msg = h.condition(operator.ConditionStorageNetworkReachable).Message
			for _, p := range parts {
				if !strings.Contains(msg, p) {
					return false, nil
				}
			}
			return true, nil
		})
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				h.t.Errorf("StorageNetworkReachable's message lacks %q (90 s later):\n%s", p, msg)
			}
		}
	}
	hasNot := func(parts ...string) {
		h.t.Helper()
		msg := h.condition(operator.ConditionStorageNetworkReachable).Message
		for _, p := range parts {
			if strings.Contains(msg, p) {
				h.t.Errorf("StorageNetworkReachable's message has %q:\n%s", p, msg)
			}
		}
	}
	const notReached = "workers have no address in the storage subnets %s yet (not attached, or their Machines predate the attachment): %s"
	attached := func(name string) string {
		return "every MachineSet (1) attaches its machines to the storage network " + nets[name].ID + " (given by --storage-network)"
	}

	t.Run("DHCP off: False, with the fix", func(t *testing.T) {
		h.t = t
		defer run("storage-dhcp-off", operatorv1.ConditionFalse, reasonStorageNetworkUnfit)()
		has("the storage network "+label("storage-dhcp-off")+" cannot serve as the workers' second NIC: (1) dhcp-off: network "+label("storage-dhcp-off")+
			": no subnet has DHCP enabled: the machines' port on it gets no address, and the shares stay unreachable; fix: openstack subnet set --dhcp storage-dhcp-off-subnet-0. "+attached("storage-dhcp-off"),
			"3 of 3 "+fmt.Sprintf(notReached, "192.168.70.0/24", "worker-a, worker-b, worker-c"))
		hasNot(" (2) ", "warnings", "master-0")
	})

	t.Run("port security off under security groups, and an overlap with the machine network: False, both said", func(t *testing.T) {
		h.t = t
		defer run("storage-unfit", operatorv1.ConditionFalse, reasonStorageNetworkUnfit)()
		has("cannot serve as the workers' second NIC: (1) port-security-off: network "+label("storage-unfit")+": port security is disabled on the network, and security groups are asked for",
			"fix: attach it without --security-group (the port then has no security groups), or: openstack network set --enable-port-security "+nets["storage-unfit"].ID,
			"(2) overlap: network "+label("storage-unfit")+", subnet "+subnetLabel("storage-unfit")+": its range "+overlapping+" overlaps the cluster's network "+machineNetwork)
		hasNot(" (3) ", "warnings")
	})

	t.Run("a gateway: a node IP on the storage network, then a warning only", func(t *testing.T) {
		h.t = t
		defer run("storage-gateway", operatorv1.ConditionFalse, reasonNodeIPOnStorageNetwork)()
		warning := "warnings on the storage network " + label("storage-gateway") + ": (1) default-route: network " + label("storage-gateway") + ", subnet " + subnetLabel("storage-gateway") +
			": its gateway 192.168.71.1 is handed out by DHCP"
		has("workers worker-b (192.168.71.11 in subnet "+subnetLabel("storage-gateway")+" 192.168.71.0/24) have their node IP (first InternalIP) on the storage network "+label("storage-gateway")+
			": logs, exec and port-forward to them break", "fix: give the storage subnet no default route (openstack subnet set --gateway none storage-gateway-subnet-0)",
			"1 of 3 "+fmt.Sprintf(notReached, "192.168.71.0/24", "worker-c"), warning, "fix: openstack subnet set --gateway none storage-gateway-subnet-0")

		// worker-b replaced: its node IP is back on the machine network.
		setAddresses("worker-b", testenv.NodeIP("worker-b"), "192.168.71.11")
		h.waitStorageCondition("storage-gateway", nets["storage-gateway"].ID, operatorv1.ConditionTrue, "AsExpected")
		has(attached("storage-gateway"), "1 of 3 "+fmt.Sprintf(notReached, "192.168.71.0/24", "worker-c"), warning)
		hasNot("have their node IP", "cannot serve")
		// The warning is an Event once, however many syncs saw it.
		h.waitSyncs(3, storageNetworkName)
		if got := h.storageWarningEvents(nets["storage-gateway"].ID); len(got) != 1 || !strings.HasPrefix(got[0], warning) {
			t.Errorf("StorageNetworkWarnings events about %s: %q, want one that begins %q", nets["storage-gateway"].ID, got, warning)
		}
	})

	t.Run("a fit network: no finding", func(t *testing.T) {
		h.t = t
		defer run("storage-good", operatorv1.ConditionTrue, "AsExpected")()
		h.waitSyncs(3, storageNetworkName)
		has(attached("storage-good"), "2 of 3 "+fmt.Sprintf(notReached, "192.168.72.0/24", "worker-b, worker-c"))
		hasNot("warnings", "cannot serve", ": (1) ", "have their node IP")
		if got := h.storageWarningEvents(nets["storage-good"].ID); len(got) != 0 {
			t.Errorf("StorageNetworkWarnings events about the fit network: %q", got)
		}
	})
}

// waitStorageCondition waits until StorageNetworkReachable has this status and reason and
// speaks of the storage network (by its ID) named.
func (h *harness) waitStorageCondition(name, id string, status operatorv1.ConditionStatus, reason string) {
	h.t.Helper()
	h.eventually(fmt.Sprintf("StorageNetworkReachable=%s %s for %s", status, reason, name), settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		if c == nil {
			return false, "not set"
		}
		return c.Status == status && c.Reason == reason && strings.Contains(c.Message, id), fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
}

// storageWarningEvents are the messages of the StorageNetworkWarnings Events that name id.
func (h *harness) storageWarningEvents(id string) []string {
	h.t.Helper()
	list, err := h.kube.CoreV1().Events(testNS).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == "StorageNetworkWarnings" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, id) {
			out = append(out, e.Message)
		}
	}
	return out
}
