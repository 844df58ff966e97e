//go:build integration

package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestStorageClassesCountSchedulableMasters runs the operator as its ServiceAccount on a compact
// cluster: three masters whose Nodes run workloads (no NoSchedule taint, as the installer leaves a
// compact cluster), their Machines made from an Active ControlPlaneMachineSet attached to the
// storage network, each with an address in the storage subnet, and no worker MachineSet. The
// classes admit the storage subnet, where the masters' pods mount from. Once the masters are
// tainted again they run no workload: neither they nor their set count, and with no worker left
// the classes admit the machine network, the default.
func TestStorageClassesCountSchedulableMasters(t *testing.T) {
	countSchedulableMasters(t, platform.ModeDriver)
}

// TestCompanionCountsSchedulableMasters is the same compact cluster on OpenShift whose platform
// runs its own Manila operator: the companion, as its own ServiceAccount (its narrower RBAC, the
// ControlPlaneMachineSet included), gives its classes the same one network the masters mount
// from, and says the same on its ManilaCompanion.
func TestCompanionCountsSchedulableMasters(t *testing.T) {
	countSchedulableMasters(t, platform.ModeCompanion)
}

func countSchedulableMasters(t *testing.T, mode platform.Mode) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, dyn: dynamic.NewForConfigOrDie(sim.Config), resync: 2 * time.Second, logs: &testenv.SyncBuffer{}}
	storageNet := cloud.Seed.Networks["storage"]
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	machineNetwork := cloud.Seed.Subnets["tenant-subnet"].CIDR
	h.openStackCluster("ostest-cmp1", "networking:\n  machineNetwork:\n  - cidr: "+machineNetwork+"\n")

	providerSpec := map[string]any{"networks": []any{
		map[string]any{"subnets": []any{map[string]any{"filter": map[string]any{"name": "ostest-cmp1-nodes"}}}},
		map[string]any{"uuid": storageNet, "noAllowedAddressPairs": true},
	}}
	cpms := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.openshift.io/v1", "kind": "ControlPlaneMachineSet",
		"metadata": map[string]any{"name": machinery.ControlPlaneMachineSetName, "namespace": machinery.MachineAPINamespace},
		"spec": map[string]any{
			"replicas": int64(3), "state": "Active", "strategy": map[string]any{"type": "RollingUpdate"},
			"selector": map[string]any{"matchLabels": map[string]any{"machine.openshift.io/cluster-api-machine-role": "master", "machine.openshift.io/cluster-api-machine-type": "master"}},
			"template": map[string]any{"machineType": "machines_v1beta1_machine_openshift_io", "machines_v1beta1_machine_openshift_io": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"machine.openshift.io/cluster-api-machine-role": "master", "machine.openshift.io/cluster-api-machine-type": "master",
					"machine.openshift.io/cluster-api-cluster": "ostest-cmp1"}},
				"spec": map[string]any{"providerSpec": map[string]any{"value": providerSpec}}}},
		},
	}}
	if _, err := h.dyn.Resource(machinery.ControlPlaneMachineSetGVR).Namespace(machinery.MachineAPINamespace).Create(ctx, cpms, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The masters: Nodes without the master taint, their Machines Running with both addresses.
	storageIP := func(i int) string {
		a := netip.MustParsePrefix(storageSubnet).Addr()
		for range 200 + i {
			a = a.Next()
		}
		return a.String()
	}
	var masters []string
	for i := range 3 {
		name := fmt.Sprintf("ostest-cmp1-master-%d", i)
		masters = append(masters, name)
		if err := sim.AddNode(ctx, name, true, testenv.NodeIP(name), storageIP(i)); err != nil {
			t.Fatal(err)
		}
		setTaints(t, ctx, sim, name, nil)
		m := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
			"metadata": map[string]any{"name": name, "namespace": machinery.MachineAPINamespace,
				"labels": map[string]any{"machine.openshift.io/cluster-api-machine-role": "master", "machine.openshift.io/cluster-api-machine-type": "master"}},
			"spec": map[string]any{"providerSpec": map[string]any{"value": providerSpec}},
		}}
		made, err := h.dyn.Resource(machinery.MachineGVR).Namespace(machinery.MachineAPINamespace).Create(ctx, m, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		made.Object["status"] = map[string]any{"phase": "Running", "nodeRef": map[string]any{"kind": "Node", "name": name},
			"addresses": []any{map[string]any{"type": "InternalIP", "address": testenv.NodeIP(name)}, map[string]any{"type": "InternalIP", "address": storageIP(i)}}}
		if _, err := h.dyn.Resource(machinery.MachineGVR).Namespace(machinery.MachineAPINamespace).UpdateStatus(ctx, made, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	creds := cloudsYAMLFor(t, cloud, testenv.CloudDemo, strings.TrimSuffix(cloud.Seed.KeystoneURL, "/v3"))
	if mode == platform.ModeCompanion {
		if err := testenv.InstallPlatform(ctx, sim.Config, testenv.PlatformOptions{}); err != nil {
			t.Fatal(err)
		}
		defer h.start(h.installCompanionAsServiceAccount(creds), Config{Mode: platform.ModeCompanion, Resync: h.resync, StorageNetworkID: storageNet, Version: "test", ManilaGracePeriod: time.Hour})()
	} else {
		defer h.start(h.installAsServiceAccount(creds), Config{Namespace: testNS, Images: testImages, Resync: h.resync, StorageNetworkID: storageNet, Version: "test"})()
	}
	prefix := operator.NamesFor(mode).StorageClassPrefix

	classesAdmit := func(what, want string) {
		t.Helper()
		h.eventually(fmt.Sprintf("every StorageClass with nfs-shareClient %s (%s)", want, what), settle, func() (bool, string) {
			list, err := sim.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			ok := 0
			for _, sc := range list.Items {
				if _, seeded := cloud.Seed.ShareTypes[sc.Annotations[operator.AnnotationShareType]]; !seeded || !strings.HasPrefix(sc.Name, prefix) {
					continue
				}
				seen = append(seen, sc.Name+"="+sc.Parameters["nfs-shareClient"])
				if sc.Parameters["nfs-shareClient"] == want {
					ok++
				}
			}
			sort.Strings(seen)
			return ok == len(cloud.Seed.ShareTypes), strings.Join(seen, " ")
		})
	}
	classesAdmit("the schedulable masters mount from the storage subnet", storageSubnet)
	// The message may follow the status by up to machinery.MessageRefresh (the count of workers).
	h.eventually("StorageNetworkReachable=True, saying the masters are attached", settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		if c == nil || c.Status != operatorv1.ConditionTrue || c.Reason != "AsExpected" {
			return false, fmt.Sprint(c)
		}
		for _, want := range []string{"the ControlPlaneMachineSet cluster attaches the masters, which run workloads, to the storage network " + storageNet,
			"all 3 workers have an address in the storage subnets " + storageSubnet} {
			if !strings.Contains(c.Message, want) {
				return false, fmt.Sprintf("does not say %q: %s", want, c.Message)
			}
		}
		return true, ""
	})

	for _, name := range masters {
		setTaints(t, ctx, sim, name, []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}})
	}
	classesAdmit("tainted masters run no workload; no worker is left", machineNetwork)
	h.eventually("StorageNetworkReachable=Unknown NoMachineSets", settle, h.condIs(operator.ConditionStorageNetworkReachable, operatorv1.ConditionUnknown, "NoMachineSets"))
}

// setTaints sets the Node's taints (nil: none), as the scheduler's mastersSchedulable or an
// administrator does.
func setTaints(t *testing.T, ctx context.Context, sim *testenv.SimCluster, node string, taints []corev1.Taint) {
	t.Helper()
	value := "null"
	if taints != nil {
		var parts []string
		for _, tt := range taints {
			parts = append(parts, fmt.Sprintf(`{"key":%q,"effect":%q}`, tt.Key, tt.Effect))
		}
		value = "[" + strings.Join(parts, ",") + "]"
	}
	if _, err := sim.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"taints":`+value+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting the taints of Node %s: %v", node, err)
	}
}
