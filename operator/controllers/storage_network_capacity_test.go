package controllers

import (
	"net/netip"
	"strings"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// machineObj is a Machine of MachineSet set whose providerSpec attaches networks, with a phase,
// an errorMessage, a Node or not, and addresses.
func machineObj(name, set string, networks []string, phase, message string, node bool, addrs ...string) *unstructured.Unstructured {
	nets := []any{}
	for _, n := range networks {
		nets = append(nets, map[string]any{"uuid": n})
	}
	status := map[string]any{}
	if phase != "" {
		status["phase"] = phase
	}
	if message != "" {
		status["errorMessage"], status["errorReason"] = message, "InvalidConfiguration"
	}
	if node {
		status["nodeRef"] = map[string]any{"kind": "Node", "name": name}
	}
	var as []any
	for _, a := range addrs {
		as = append(as, map[string]any{"type": "InternalIP", "address": a})
	}
	if len(as) > 0 {
		status["addresses"] = as
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": "openshift-machine-api",
			"ownerReferences": []any{map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": set, "uid": "u1"}}},
		"spec":   map[string]any{"providerSpec": map[string]any{"value": map[string]any{"networks": nets}}},
		"status": status,
	}}
	return u
}

func TestMachinesWithoutStorageAddress(t *testing.T) {
	const netID = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	const full = "error creating Openstack instance: creating the port on network " + netID + ": No more IP addresses available on network " + netID + "."
	subnet := openstack.Subnet{ID: "5b7a3f55-4f83-4f7e-9d64-4f2f8b4f9a10", Name: "storage-subnet", CIDR: netip.MustParsePrefix("10.9.0.0/24"), IPVersion: 4, DHCP: true}
	machines := []*unstructured.Unstructured{
		machineObj("w-ok", "w", []string{netID}, "Running", "", true, "10.0.0.5", "10.9.0.10"),
		machineObj("w-full-b", "w", []string{netID}, "Failed", full, false),
		machineObj("w-full-a", "w", []string{netID}, "Failed", full, false),
		machineObj("w-booting", "w", []string{netID}, "Provisioning", "", false),
		machineObj("w-flavor", "w", []string{netID}, "Failed", "error creating Openstack instance: flavor m1.huge not found", false),
		machineObj("w-old", "w", nil, "Failed", full, false),                           // does not attach the network
		machineObj("w-addr", "w", []string{netID}, "Failed", full, false, "10.9.0.11"), // has its address
	}
	failed := failedWithoutStorageAddress(machines, netID, []openstack.Subnet{subnet})
	var names []string
	for _, m := range failed {
		names = append(names, m.name)
	}
	if got, want := strings.Join(names, " "), "w-flavor w-full-a w-full-b"; got != want {
		t.Fatalf("failed without a storage address: %s, want %s", got, want)
	}

	capacity := storageCapacity{subnets: []openstack.SubnetCapacity{{Subnet: subnet, Size: 3, Used: 2, Free: 1}}}
	kept := withoutAddress(failed, capacity)
	if len(kept) != 2 || kept[0].name != "w-full-a" {
		t.Fatalf("without an address for lack of addresses: %v, want w-full-a and w-full-b (the flavor's failure is not the subnet's)", kept)
	}
	capacity.subnets[0].Used, capacity.subnets[0].Free = 3, 0
	if kept := withoutAddress(failed, capacity); len(kept) != 3 {
		t.Errorf("with no free address left every failed Machine counts: %v", kept)
	}

	r := storageReport{network: "storage (" + netID + ")", subnets: []openstack.Subnet{subnet}, unaddressed: withoutAddress(failed, capacity), capacity: capacity}
	status, reason, msg := r.apply(operatorv1.ConditionTrue, "AsExpected", "every MachineSet (1) attaches its machines to the storage network")
	if status != operatorv1.ConditionFalse || reason != reasonStorageAddressUnavailable {
		t.Errorf("status %s, reason %s; want False, %s", status, reason, reasonStorageAddressUnavailable)
	}
	for _, want := range []string{
		"3 Machines attach the storage network storage (" + netID + ") but got no address on it and have no Node: w-flavor, w-full-a, w-full-b (MachineSet w)",
		"the storage subnets have 0 free addresses (subnet storage-subnet (5b7a3f55-4f83-4f7e-9d64-4f2f8b4f9a10) 10.9.0.0/24: 3 of 3 addresses of its allocation pools in use)",
		"No more IP addresses available on network " + netID,
		"openstack subnet set --allocation-pool start=FIRST,end=LAST storage-subnet",
		"every MachineSet (1) attaches",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}

	// A node IP on the storage network keeps its reason first.
	r.nodeIPOn = []nodeOnSubnet{{name: "w-ok", addr: netip.MustParseAddr("10.9.0.10"), subnet: subnet}}
	if _, reason, _ := r.apply(operatorv1.ConditionTrue, "AsExpected", ""); reason != reasonNodeIPOnStorageNetwork {
		t.Errorf("reason %s, want %s", reason, reasonNodeIPOnStorageNetwork)
	}
}

// A scale-up past the storage subnet's free addresses is said before any Machine fails: the
// replicas not made yet and the Machines without a server yet want an address each; a Machine
// past Provisioning has its port already, which the free count took.
func TestStorageAddressesWanted(t *testing.T) {
	const netID = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	subnet := openstack.Subnet{ID: "5b7a3f55-4f83-4f7e-9d64-4f2f8b4f9a10", Name: "storage-subnet", CIDR: netip.MustParsePrefix("10.9.0.0/24"), IPVersion: 4, DHCP: true}
	set := func(name string, replicas int64, networks ...string) *unstructured.Unstructured {
		nets := []any{}
		for _, n := range networks {
			nets = append(nets, map[string]any{"uuid": n})
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{"networks": nets}}}}},
		}}
	}
	sets := []*unstructured.Unstructured{set("w", 400, netID), set("other", 50)}
	machines := []*unstructured.Unstructured{
		machineObj("w-ok", "w", []string{netID}, "Running", "", true, "10.0.0.5", "10.9.0.10"),
		machineObj("w-provisioned", "w", []string{netID}, "Provisioned", "", false),
		machineObj("w-new", "w", []string{netID}, "", "", false),
		machineObj("w-booting", "w", []string{netID}, "Provisioning", "", false),
		machineObj("w-failed", "w", []string{netID}, "Failed", "No more IP addresses available on network "+netID, false),
	}
	w := addressesWanted(sets, machines, netID, []openstack.Subnet{subnet})
	// 400 replicas, 5 Machines: 395 not made; w-new and w-booting have no server yet.
	if w.total != 397 || w.bySet["w"] != 397 || len(w.bySet) != 1 {
		t.Fatalf("wanted %+v, want 397 for set w only", w)
	}
	capacity := storageCapacity{subnets: []openstack.SubnetCapacity{{Subnet: subnet, Size: 250, Used: 100, Free: 150}}}
	r := storageReport{network: "storage (" + netID + ")", subnets: []openstack.Subnet{subnet}, capacity: capacity, wanted: w, short: w.total - capacity.free()}
	status, reason, msg := r.apply(operatorv1.ConditionTrue, "AsExpected", "every MachineSet (1) attaches its machines to the storage network")
	if status != operatorv1.ConditionFalse || reason != reasonStorageAddressesShort {
		t.Errorf("status %s, reason %s; want False, %s", status, reason, reasonStorageAddressesShort)
	}
	for _, want := range []string{
		"want 397 more addresses on it (w 397), 247 more than the storage subnets have 150 free addresses",
		"openstack subnet set --allocation-pool start=FIRST,end=LAST storage-subnet) or scale the sets down",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	// Enough room: nothing to say.
	if w := addressesWanted([]*unstructured.Unstructured{set("w", 5, netID)}, machines, netID, []openstack.Subnet{subnet}); w.total != 2 {
		t.Errorf("5 replicas, 5 Machines, 2 without a server: wanted %d, want 2", w.total)
	}
}
