// Package record is the annotation in which manila-setup records, on each object it attached
// (a MachineSet, a Cluster API set, a NodePool), the storage networks and security groups it
// attached (and which of those networks got a port without port security), for the CLI, the
// wizard and the operator to report. It has no dependencies, so that the operator reads it
// without linking any client.
package record

import "encoding/json"

// Annotation holds a Record as JSON.
const Annotation = "manila-setup.io/storage-attachment"

// IDs are the Neutron IDs of storage networks and security groups.
type IDs struct {
	Networks       []string `json:"networks"`
	SecurityGroups []string `json:"securityGroups,omitempty"`
	// PortSecurityDisabled are those of Networks that have port security disabled in Neutron:
	// the machines' port on them is written without port security (Machine API
	// portSecurity: false, CAPO disablePortSecurity: true, HyperShift portSecurityPolicy:
	// Disabled), since Neutron refuses security groups and allowed address pairs there.
	PortSecurityDisabled []string `json:"portSecurityDisabled,omitempty"`
}

// Record is the value of Annotation: every storage network and security group manila-setup has
// attached to the object (the union over its runs), when and by what.
type Record struct {
	IDs
	Time string `json:"time"`
	By   string `json:"by,omitempty"`
}

// Parse returns the Record in an object's annotations, nil when there is none or it does not
// parse.
func Parse(annotations map[string]string) *Record {
	v, ok := annotations[Annotation]
	if !ok {
		return nil
	}
	var r Record
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil
	}
	return &r
}
