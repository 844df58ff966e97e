//go:build integration

package controllers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestStorageAddressUnavailable runs the operator as its ServiceAccount on a sim cluster whose
// simulated Machine API makes real Neutron ports, for a MachineSet of 3 workers attached to a
// storage network whose subnet's allocation pool has 2 addresses: two Machines get them, the
// third fails with Neutron's "No more IP addresses available on network" and gets no Node.
// StorageNetworkReachable turns False with the reason StorageAddressUnavailable, naming that
// Machine, the subnet's free addresses as Neutron counts them and the cloud's words, and the
// gauge counts it. A larger pool and the failed Machine deleted bring the condition back.
func TestStorageAddressUnavailable(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, resync: 2 * time.Second, logs: &testenv.SyncBuffer{}}
	h.dyn = dynamic.NewForConfigOrDie(sim.Config)

	p := ostest.NewProject(t, cloud, "cap")
	small := p.CreateNetworkWith("storage-small", nil, map[string]any{"cidr": "192.168.81.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"},
		"allocation_pools": []map[string]string{{"start": "192.168.81.10", "end": "192.168.81.11"}}})

	h.openStackCluster("sim-cap", machinectl.DefaultInstallConfig)

	// The workers: a MachineSet of 3 attached to the small storage network, made by the
	// simulated Machine API with real ports.
	ports, err := machinectl.NeutronPorts(ctx, p.CloudsFile, ostest.CloudName)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, sim, machinectl.Options{NodeDelay: time.Second, Ports: ports})
	mc := machineclient.NewForConfigOrDie(sim.Config)
	spec := fmt.Sprintf(`{"apiVersion":"machine.openshift.io/v1alpha1","kind":"OpenstackProviderSpec","flavor":"m1.xlarge","image":"rhcos",`+
		`"networks":[{"filter":{},"subnets":[{"filter":{"name":"sim-cap-nodes","tags":"openshiftClusterID=sim-cap"}}]},{"uuid":%q,"noAllowedAddressPairs":true}]}`, small.ID)
	const set = "sim-cap-worker-0"
	if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Create(ctx, machinectl.MachineSet("sim-cap", "worker", set, 3, spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var failed machinev1beta1.Machine
	running := 0
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := mc.MachineV1beta1().Machines(machinectl.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		nFailed := 0
		running = 0
		for _, m := range list.Items {
			switch {
			case m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed:
				failed, nFailed = m, nFailed+1
			case m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseRunning:
				running++
			}
		}
		return nFailed == 1 && running == 2, nil
	}); err != nil {
		t.Fatalf("want 2 Machines Running and 1 Failed: %v (%d running); %s", err, running, ctl)
	}
	if failed.Status.ErrorMessage == nil || !strings.Contains(*failed.Status.ErrorMessage, "No more IP addresses available on network "+small.ID) {
		t.Fatalf("the failed Machine's errorMessage: %v", failed.Status.ErrorMessage)
	}

	creds, err := os.ReadFile(p.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	saCfg := h.installAsServiceAccount(creds)
	counts := OpenStackCalls.CapacityCounts.Load()
	defer h.start(saCfg, Config{Namespace: testNS, Images: testImages, Resync: h.resync, CloudName: ostest.CloudName, StorageNetworkID: small.ID, Version: "test"})()

	msg := waitStorageReason(h, reasonStorageAddressUnavailable)
	for _, want := range []string{
		"1 Machine attaches the storage network storage-small (" + small.ID + ") but got no address on it and has no Node: " + failed.Name + " (MachineSet " + set + ")",
		"the storage subnets have 0 free addresses (subnet storage-small-subnet-0 (" + small.SubnetIDs[0] + ") 192.168.81.0/24: 2 of 2 addresses of its allocation pools in use)",
		"No more IP addresses available on network " + small.ID,
		"openstack subnet set --allocation-pool start=FIRST,end=LAST storage-small-subnet-0",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("StorageNetworkReachable's message lacks %q:\n%s", want, msg)
		}
	}
	if g := gauge(t, MachinesWithoutStorageAddress); g != 1 {
		t.Errorf("manila_operator_machines_without_storage_address = %v, want 1", g)
	}
	if g := gauge(t, StorageSubnetFreeAddresses); g != 0 {
		t.Errorf("manila_operator_storage_subnet_free_addresses = %v, want 0", g)
	}
	if n := OpenStackCalls.CapacityCounts.Load() - counts; n < 1 || n > 3 {
		t.Errorf("%d counts of the free addresses, want 1 to 3 (one per minute at most while Machines lack an address)", n)
	}

	// The fix the message gives: a larger pool, then the failed Machine deleted; its MachineSet
	// makes a new one, which gets an address and a Node.
	p.UpdateSubnet(small.SubnetIDs[0], map[string]any{"allocation_pools": []map[string]string{{"start": "192.168.81.10", "end": "192.168.81.20"}}})
	if err := mc.MachineV1beta1().Machines(machinectl.Namespace).Delete(ctx, failed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("StorageNetworkReachable without StorageAddressUnavailable", settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		if c == nil {
			return false, "not set"
		}
		// Nor short: while the sets want more than the last count found, it is counted again
		// after 10 s, not a minute.
		return c.Reason != reasonStorageAddressUnavailable && c.Reason != reasonStorageAddressesShort && !strings.Contains(c.Message, "got no address"),
			fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	if g := gauge(t, MachinesWithoutStorageAddress); g != 0 {
		t.Errorf("manila_operator_machines_without_storage_address = %v after the fix, want 0", g)
	}
	t.Logf("after the fix: %+v", *h.condition(operator.ConditionStorageNetworkReachable))
}

// gauge reads a gauge's value.
func gauge(t *testing.T, g interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestStorageAddressesShortBeforeMachinesFail: a MachineSet attached to a storage network whose
// subnet has 2 free addresses asks for 5 replicas, and no Machine has been made yet (no Machine
// API runs here): the operator says so at once, StorageNetworkReachable False with the reason
// StorageAddressesShort, naming the set, what it wants and the free addresses, and the gauge
// holds the 3 addresses missing. Scaled down to 2, the condition leaves that reason and the
// gauge goes to 0.
func TestStorageAddressesShortBeforeMachinesFail(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, resync: 2 * time.Second, logs: &testenv.SyncBuffer{}}
	h.dyn = dynamic.NewForConfigOrDie(sim.Config)

	p := ostest.NewProject(t, cloud, "short")
	small := p.CreateNetworkWith("storage-short", nil, map[string]any{"cidr": "192.168.82.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"},
		"allocation_pools": []map[string]string{{"start": "192.168.82.10", "end": "192.168.82.11"}}})
	h.openStackCluster("sim-short", machinectl.DefaultInstallConfig)
	mc := machineclient.NewForConfigOrDie(sim.Config)
	spec := fmt.Sprintf(`{"apiVersion":"machine.openshift.io/v1alpha1","kind":"OpenstackProviderSpec","flavor":"m1.xlarge","image":"rhcos",`+
		`"networks":[{"filter":{},"subnets":[{"filter":{"name":"sim-short-nodes","tags":"openshiftClusterID=sim-short"}}]},{"uuid":%q,"noAllowedAddressPairs":true}]}`, small.ID)
	const set = "sim-short-worker-0"
	if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Create(ctx, machinectl.MachineSet("sim-short", "worker", set, 5, spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	creds, err := os.ReadFile(p.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	saCfg := h.installAsServiceAccount(creds)
	defer h.start(saCfg, Config{Namespace: testNS, Images: testImages, Resync: h.resync, CloudName: ostest.CloudName, StorageNetworkID: small.ID, Version: "test"})()

	msg := waitStorageReason(h, reasonStorageAddressesShort)
	for _, want := range []string{
		"want 5 more addresses on it (" + set + " 5), 3 more than the storage subnets have 2 free addresses",
		"openstack subnet set --allocation-pool start=FIRST,end=LAST storage-short-subnet-0) or scale the sets down",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("StorageNetworkReachable's message lacks %q:\n%s", want, msg)
		}
	}
	if g := gauge(t, StorageAddressesShort); g != 3 {
		t.Errorf("manila_operator_storage_addresses_short = %v, want 3", g)
	}

	// Scaled to what the subnet holds.
	if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Patch(ctx, set, types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("StorageNetworkReachable without StorageAddressesShort", settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		if c == nil {
			return false, "not set"
		}
		return c.Reason != reasonStorageAddressesShort, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	if g := gauge(t, StorageAddressesShort); g != 0 {
		t.Errorf("manila_operator_storage_addresses_short = %v after the scale-down, want 0", g)
	}
}

// waitStorageReason waits until StorageNetworkReachable is False with the reason, and returns its
// message.
func waitStorageReason(h *harness, reason string) string {
	h.t.Helper()
	took := h.eventually("StorageNetworkReachable=False "+reason, settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		if c == nil {
			return false, "not set"
		}
		return c.Status == operatorv1.ConditionFalse && c.Reason == reason, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	})
	h.t.Logf("%s %s after the operator started", reason, took.Round(100*time.Millisecond))
	msg := h.condition(operator.ConditionStorageNetworkReachable).Message
	h.t.Logf("StorageNetworkReachable: %s", msg)
	return msg
}
