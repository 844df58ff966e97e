package shareclient

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFromMachineAPI(t *testing.T) {
	const storage = "6a1e0b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
	spec := providerSpecWith
	set := func(name string, value map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"providerSpec": map[string]any{"value": value}}}},
		}}
	}
	machine := func(name, owner string, value map[string]any, node string, addrs ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}, "spec": map[string]any{}, "status": map[string]any{}}}
		if owner != "" {
			u.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"kind": owner, "name": "x", "apiVersion": "machine.openshift.io/v1beta1", "uid": "1"}}
		}
		if value != nil {
			u.Object["spec"] = map[string]any{"providerSpec": map[string]any{"value": value}}
		}
		if node != "" {
			u.Object["status"].(map[string]any)["nodeRef"] = map[string]any{"kind": "Node", "name": node}
		}
		var list []any
		for _, a := range addrs {
			list = append(list, map[string]any{"type": "InternalIP", "address": a})
		}
		list = append(list, map[string]any{"type": "Hostname", "address": name})
		u.Object["status"].(map[string]any)["addresses"] = list
		return u
	}
	sets := []*unstructured.Unstructured{set("a", spec("tenant", storage)), set("b", spec("tenant"))}
	machines := []*unstructured.Unstructured{
		machine("a-rolled", "MachineSet", spec("tenant", storage), "a-rolled", "10.196.0.11", "10.0.0.31"),
		// Made before set a was attached: its own spec has no storage port.
		machine("a-old", "MachineSet", spec("tenant"), "a-old", "10.196.0.12"),
		// Just created from the attached template: no address, no Node.
		machine("a-new", "MachineSet", spec("tenant", strings.ToUpper(storage)), ""),
		machine("b-1", "MachineSet", spec("tenant"), "b-1", "10.196.0.13"),
		machine("master-0", "", spec("tenant"), "master-0", "10.196.0.2"),
	}
	gotSets, gotMachines := FromMachineAPI(MachineAPI{MachineSets: sets, Machines: machines}, storage)
	wantSets := []Set{{Name: "a", Attached: true}, {Name: "b"}}
	wantMachines := []Machine{
		{Name: "a-rolled", Addresses: addrs("10.196.0.11", "10.0.0.31"), Attached: true},
		{Name: "a-old", Addresses: addrs("10.196.0.12")},
		{Name: "a-new", Attached: true, NoNode: true},
		{Name: "b-1", Addresses: addrs("10.196.0.13")},
	}
	if !reflect.DeepEqual(gotSets, wantSets) {
		t.Errorf("sets %+v, want %+v", gotSets, wantSets)
	}
	if !reflect.DeepEqual(gotMachines, wantMachines) {
		t.Errorf("machines %+v, want %+v", gotMachines, wantMachines)
	}
	// The storage network not known: nothing is attached.
	gotSets, gotMachines = FromMachineAPI(MachineAPI{MachineSets: sets, Machines: machines}, "")
	for _, s := range gotSets {
		if s.Attached {
			t.Errorf("set %s attached to an unknown network", s.Name)
		}
	}
	for _, m := range gotMachines {
		if m.Attached {
			t.Errorf("machine %s attached to an unknown network", m.Name)
		}
	}
}

// The masters count where workloads run on them: their Machines like workers', the Active
// ControlPlaneMachineSet like a set.
func TestFromMachineAPIMasters(t *testing.T) {
	const storage = "6a1e0b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
	providerSpec := providerSpecWith
	master := func(name, node string, byLabel bool, networks []string, addrs ...string) *unstructured.Unstructured {
		meta := map[string]any{"name": name}
		if byLabel {
			meta["labels"] = map[string]any{"machine.openshift.io/cluster-api-machine-role": "master"}
		} else {
			meta["ownerReferences"] = []any{map[string]any{"kind": "ControlPlaneMachineSet", "name": "cluster", "apiVersion": "machine.openshift.io/v1", "uid": "2"}}
		}
		var list []any
		for _, a := range addrs {
			list = append(list, map[string]any{"type": "InternalIP", "address": a})
		}
		status := map[string]any{"addresses": list}
		if node != "" {
			status["nodeRef"] = map[string]any{"kind": "Node", "name": node}
		}
		return &unstructured.Unstructured{Object: map[string]any{"metadata": meta,
			"spec": map[string]any{"providerSpec": map[string]any{"value": providerSpec(networks...)}}, "status": status}}
	}
	cpms := func(state string, networks ...string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "cluster"},
			"spec": map[string]any{"state": state, "template": map[string]any{"machines_v1beta1_machine_openshift_io": map[string]any{
				"spec": map[string]any{"providerSpec": map[string]any{"value": providerSpec(networks...)}}}}}}}
	}
	machines := []*unstructured.Unstructured{
		master("m-0", "m-0", true, []string{"tenant", storage}, "10.196.0.10", "10.0.0.40"),
		master("m-1", "m-1", false, []string{"tenant"}, "10.196.0.11"),
		// A replacement not joined yet: it runs nothing.
		master("m-2", "", false, []string{"tenant", storage}),
	}
	schedulable := func(node string) bool { return true }
	wantMachines := []Machine{
		{Name: "m-0", Addresses: addrs("10.196.0.10", "10.0.0.40"), Attached: true},
		{Name: "m-1", Addresses: addrs("10.196.0.11")},
	}
	tests := []struct {
		name         string
		in           MachineAPI
		wantSets     []Set
		wantMachines []Machine
	}{
		{"schedulable masters, Active set attached", MachineAPI{Machines: machines, ControlPlane: cpms("Active", "tenant", storage), RunsWorkloads: schedulable},
			[]Set{{Name: "controlplanemachineset/cluster", Attached: true}}, wantMachines},
		{"schedulable masters, Active set not attached", MachineAPI{Machines: machines, ControlPlane: cpms("Active", "tenant"), RunsWorkloads: schedulable},
			[]Set{{Name: "controlplanemachineset/cluster"}}, wantMachines},
		// An Inactive set makes no master: the masters count, the set does not.
		{"Inactive set", MachineAPI{Machines: machines, ControlPlane: cpms("Inactive", "tenant"), RunsWorkloads: schedulable}, nil, wantMachines},
		{"no set", MachineAPI{Machines: machines, RunsWorkloads: schedulable}, nil, wantMachines},
		// Tainted masters run no workload: neither they nor their set count.
		{"masters keep their taint", MachineAPI{Machines: machines, ControlPlane: cpms("Active", "tenant"), RunsWorkloads: func(string) bool { return false }}, nil, nil},
		{"Nodes unknown", MachineAPI{Machines: machines, ControlPlane: cpms("Active", "tenant")}, nil, nil},
		{"one master schedulable", MachineAPI{Machines: machines, ControlPlane: cpms("Active", "tenant"), RunsWorkloads: func(n string) bool { return n == "m-1" }},
			[]Set{{Name: "controlplanemachineset/cluster"}}, wantMachines[1:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sets, got := FromMachineAPI(tt.in, storage)
			if !reflect.DeepEqual(sets, tt.wantSets) || !reflect.DeepEqual(got, tt.wantMachines) {
				t.Errorf("sets %+v, machines %+v; want %+v, %+v", sets, got, tt.wantSets, tt.wantMachines)
			}
		})
	}
}

func TestRunsWorkloads(t *testing.T) {
	node := func(labels []string, taints ...corev1.Taint) *corev1.Node {
		n := &corev1.Node{}
		n.Labels = map[string]string{}
		for _, l := range labels {
			n.Labels[l] = ""
		}
		n.Spec.Taints = taints
		return n
	}
	master, cp := "node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane"
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"worker", node([]string{"node-role.kubernetes.io/worker"}), true},
		{"worker with a taint of its own", node(nil, corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}), true},
		{"master with its taint", node([]string{master}, corev1.Taint{Key: master, Effect: corev1.TaintEffectNoSchedule}), false},
		{"control plane with its taint", node([]string{cp, master}, corev1.Taint{Key: cp, Effect: corev1.TaintEffectNoSchedule}), false},
		{"master with NoExecute", node([]string{master}, corev1.Taint{Key: master, Effect: corev1.TaintEffectNoExecute}), false},
		{"compact master, no taint", node([]string{master, cp, "node-role.kubernetes.io/worker"}), true},
		{"master, PreferNoSchedule only", node([]string{master}, corev1.Taint{Key: master, Effect: corev1.TaintEffectPreferNoSchedule}), true},
	}
	for _, tt := range tests {
		if got := RunsWorkloads(tt.node); got != tt.want {
			t.Errorf("%s: RunsWorkloads = %t, want %t", tt.name, got, tt.want)
		}
	}
}

// providerSpecWith is a providerSpec whose networks are these, by uuid.
func providerSpecWith(networks ...string) map[string]any {
	var list []any
	for _, n := range networks {
		list = append(list, map[string]any{"uuid": n})
	}
	return map[string]any{"networks": list}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}
