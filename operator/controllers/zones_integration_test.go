//go:build integration

package controllers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestOperatorOnTwoZones runs the operator as its ServiceAccount against the loopback cloud of
// two availability zones (Manila exports az1's shares on storage-az1 and storage-az1-fast, az2's
// on storage-az2), for a cluster with a worker MachineSet per zone, each attached to its zone's
// networks. With no one storage network for every worker, the operator works zone by zone: the
// classes admit every zone's export subnets (each zone's workers mount from their address on
// their own zone's), the driver's runtime configuration matches them all, and
// StorageNetworkReachable is True, naming each set's zone; a set given another zone's network
// turns it False, naming the set, its zone and the network it lacks.
func TestOperatorOnTwoZones(t *testing.T) {
	cloud := testenv.NewShapedCloudParallel(t, "zones")
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, resync: 2 * time.Second, logs: &testenv.SyncBuffer{}}
	h.dyn = dynamic.NewForConfigOrDie(sim.Config)

	p := ostest.NewProject(t, cloud, "opzones")
	p.CreateSharesIn("az1", 1, "default", "az1")
	p.CreateSharesIn("az2", 1, "default", "az2")
	p.CreateSharesIn("fast", 1, "fast", "az1")
	az1, az2 := cloud.Seed.Networks["storage"], cloud.Seed.MoreStorageNetworks["storage-az2"].ID
	az1fast := cloud.Seed.MoreStorageNetworks["storage-az1-fast"].ID
	subnets := []string{cloud.Seed.Subnets["storage-subnet"].CIDR, cloud.Seed.MoreStorageNetworks["storage-az2"].Subnet.CIDR,
		cloud.Seed.MoreStorageNetworks["storage-az1-fast"].Subnet.CIDR}

	const machineNetwork = "10.196.0.0/16"
	installConfig := "networking:\n  clusterNetwork:\n  - cidr: 10.128.0.0/14\n    hostPrefix: 23\n  machineNetwork:\n  - cidr: " + machineNetwork + "\n  serviceNetwork:\n  - 172.30.0.0/16\n"
	h.openStackCluster("sim-zones", installConfig)
	machineSet := func(name, zone string, nets ...string) {
		entries := []any{map[string]any{"uuid": cloud.Seed.Networks["tenant"]}}
		for _, n := range nets {
			entries = append(entries, map[string]any{"uuid": n, "noAllowedAddressPairs": true})
		}
		ms := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
			"metadata": map[string]any{"name": name, "namespace": machinery.MachineAPINamespace},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"set": name}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"set": name}},
					"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
						"availabilityZone": zone, "networks": entries,
					}}},
				},
			},
		}}
		if _, err := h.dyn.Resource(machinery.MachineSetGVR).Namespace(machinery.MachineAPINamespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	machineSet("sim-zones-worker-0", "az1", az1, az1fast)
	machineSet("sim-zones-worker-1", "az2", az2)

	creds, err := os.ReadFile(p.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	saCfg := h.installAsServiceAccount(creds)
	defer h.start(saCfg, Config{Namespace: testNS, Images: testImages, Resync: h.resync, CloudName: ostest.CloudName, Version: "test"})()

	h.eventually("StorageNetworkReachable=True zone by zone", settle, h.condIs(operator.ConditionStorageNetworkReachable, operatorv1.ConditionTrue, "AsExpected"))
	msg := h.condition(operator.ConditionStorageNetworkReachable).Message
	for _, want := range []string{"every MachineSet (2) attaches its machines to the storage networks of its availability zone",
		`az1: "storage-az1" (` + az1 + `)`, `az2: "storage-az2" (` + az2 + `)`, "sim-zones-worker-0 (az1), sim-zones-worker-1 (az2)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("StorageNetworkReachable's message lacks %q:\n%s", want, msg)
		}
	}
	t.Logf("%s: %s", operator.ConditionStorageNetworkReachable, msg)

	h.eventually("every StorageClass admits every zone's export subnets", settle, func() (bool, string) {
		list, err := h.kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
		if err != nil || len(list.Items) == 0 {
			return false, fmt.Sprintf("%v, %d classes", err, len(list.Items))
		}
		var got []string
		ok := true
		for _, sc := range list.Items {
			clients := sc.Parameters["nfs-shareClient"]
			got = append(got, sc.Name+"="+clients)
			for _, s := range subnets {
				ok = ok && strings.Contains(clients, s)
			}
			ok = ok && !strings.Contains(clients, machineNetwork)
		}
		return ok, strings.Join(got, " ")
	})
	h.eventually("the runtime configuration matches every zone's exports", settle, func() (bool, string) {
		cm, err := h.kube.CoreV1().ConfigMaps(testNS).Get(ctx, "manila-csi-driver-runtime-config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := cm.Data["runtimeconfig.json"]
		return got == `{"nfs":{"matchExportLocationAddress":"172.18.0.0/22"}}`, got
	})

	// az2's set given az1's network instead of its own.
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"providerSpec":{"value":{"networks":[{"uuid":%q},{"uuid":%q}]}}}}}}`, cloud.Seed.Networks["tenant"], az1)
	if _, err := h.dyn.Resource(machinery.MachineSetGVR).Namespace(machinery.MachineAPINamespace).Patch(ctx, "sim-zones-worker-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("StorageNetworkReachable=False for az2's set", settle, h.condIs(operator.ConditionStorageNetworkReachable, operatorv1.ConditionFalse, "MachineSetsNotAttached"))
	msg = h.condition(operator.ConditionStorageNetworkReachable).Message
	if want := `MachineSet sim-zones-worker-1 (zone az2) does not attach "storage-az2" (` + az2 + `), where Manila exports in az2`; !strings.Contains(msg, want) || strings.Contains(msg, "sim-zones-worker-0") {
		t.Errorf("StorageNetworkReachable's message does not say %q (and only that set):\n%s", want, msg)
	}
	t.Logf("%s: %s", operator.ConditionStorageNetworkReachable, msg)
}
