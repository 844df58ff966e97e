// Package attachment reads what an OpenstackProviderSpec says of the networks and security
// groups of its machines, for the CLI and the operator alike. It has no dependencies beyond
// internal/neutronid, so that the operator reads providerSpecs without linking the MachineSet
// clients.
package attachment

import (
	"encoding/json"

	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// Spec is what an OpenstackProviderSpec says about the networks and security groups of its
// machines, read from the raw JSON. It is the one place that decides whether machines are
// attached to a network, for the CLI (machinesets list/patch, the wizard) and the operator's
// StorageNetworkReachable condition alike, so that they can never disagree.
type Spec struct {
	Networks []struct {
		UUID   string `json:"uuid"`
		Filter struct {
			ID string `json:"id"`
		} `json:"filter"`
	} `json:"networks"`
	Ports []struct {
		NetworkID string `json:"networkID"`
	} `json:"ports"`
	SecurityGroups []struct {
		UUID   string `json:"uuid"`
		Filter struct {
			ID string `json:"id"`
		} `json:"filter"`
	} `json:"securityGroups"`
}

// DecodeSpec reads the JSON of a providerSpec value. Fields that do not hold what an
// OpenstackProviderSpec holds there are an error.
func DecodeSpec(raw []byte) (Spec, error) {
	var s Spec
	err := json.Unmarshal(raw, &s)
	return s, err
}

// SpecOf reads the providerSpec value of an object decoded from JSON (an unstructured
// MachineSet's spec.template.spec.providerSpec.value); a value that does not read is an empty
// Spec, which is attached to nothing.
func SpecOf(value map[string]any) Spec {
	raw, err := json.Marshal(value)
	if err != nil {
		return Spec{}
	}
	s, _ := DecodeSpec(raw)
	return s
}

// HasNetwork reports whether the machines get a port on network id: a networks[] entry with
// that uuid or filter.id, or a ports[] entry on that networkID. IDs are compared without regard
// to case, as Neutron does.
func (s Spec) HasNetwork(id string) bool {
	for _, n := range s.Networks {
		if SameID(n.UUID, id) || SameID(n.Filter.ID, id) {
			return true
		}
	}
	for _, p := range s.Ports {
		if SameID(p.NetworkID, id) {
			return true
		}
	}
	return false
}

// HasSecurityGroup reports whether security group id is in securityGroups[], by uuid or
// filter.id.
func (s Spec) HasSecurityGroup(id string) bool {
	for _, sg := range s.SecurityGroups {
		if SameID(sg.UUID, id) || SameID(sg.Filter.ID, id) {
			return true
		}
	}
	return false
}

// SameID compares two Neutron IDs by the one rule of internal/neutronid: the same UUID in
// any case or wrapping. An empty ID matches nothing.
func SameID(a, b string) bool { return neutronid.Equal(a, b) }
