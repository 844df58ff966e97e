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
// the server, one per port.
func FromMachineAPI(machineSets, machines []*unstructured.Unstructured, storageNetworkID string) ([]Set, []Machine) {
	var sets []Set
	for _, u := range machineSets {
		value, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "providerSpec", "value")
		spec, _ := value.(map[string]any)
		sets = append(sets, Set{Name: u.GetName(), Attached: storageNetworkID != "" && attachment.SpecOf(spec).HasNetwork(storageNetworkID)})
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
		m := Machine{Name: u.GetName()}
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
