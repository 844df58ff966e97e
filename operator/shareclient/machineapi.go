package shareclient

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

// FromMachineAPI reads the rule's Sets and Machines off the MachineSets and Machines of
// openshift-machine-api (as the operator's caches or a client list them). A set is attached when
// its providerSpec gives new machines a port on the storage network (networks[] or ports[], the
// rule every command uses); storageNetworkID "" means the storage network is not known, and no
// set counts as attached. Only Machines a MachineSet made are workers here: control-plane
// machines are not made by MachineSets, and workloads do not mount there. A Machine's addresses
// are its status.addresses, where the Machine API's OpenStack provider puts every fixed IP of
// the server, one per port, once the server exists; its Node is status.nodeRef, set when the
// Node joins; whether it is attached is read off its own spec.providerSpec (a copy of its set's
// template when it was made), by the same rule as the sets'.
func FromMachineAPI(machineSets, machines []*unstructured.Unstructured, storageNetworkID string) ([]Set, []Machine) {
	attached := func(obj map[string]any, fields ...string) bool {
		value, _, _ := unstructured.NestedFieldNoCopy(obj, fields...)
		spec, _ := value.(map[string]any)
		return storageNetworkID != "" && attachment.SpecOf(spec).HasNetwork(storageNetworkID)
	}
	var sets []Set
	for _, u := range machineSets {
		sets = append(sets, Set{Name: u.GetName(), Attached: attached(u.Object, "spec", "template", "spec", "providerSpec", "value")})
	}
	var out []Machine
	for _, u := range machines {
		fromSet := false
		for _, ref := range u.GetOwnerReferences() {
			fromSet = fromSet || ref.Kind == "MachineSet"
		}
		if !fromSet {
			continue
		}
		node, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name")
		m := Machine{Name: u.GetName(), NoNode: node == "", Attached: attached(u.Object, "spec", "providerSpec", "value")}
		addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
		for _, a := range addrs {
			am, _ := a.(map[string]any)
			s, _ := am["address"].(string)
			if ip, err := netip.ParseAddr(s); err == nil {
				m.Addresses = append(m.Addresses, ip)
			}
		}
		out = append(out, m)
	}
	return sets, out
}
