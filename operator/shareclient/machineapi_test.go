package shareclient

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFromMachineAPI(t *testing.T) {
	const storage = "6a1e0b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
	spec := func(networks ...string) map[string]any {
		var list []any
		for _, n := range networks {
			list = append(list, map[string]any{"uuid": n})
		}
		return map[string]any{"networks": list}
	}
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
	gotSets, gotMachines := FromMachineAPI(sets, machines, storage)
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
	gotSets, gotMachines = FromMachineAPI(sets, machines, "")
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

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}
