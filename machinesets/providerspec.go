package machinesets

//lint:file-ignore SA1019 networks[].filter.id is deprecated for networks[].uuid, but MachineSets written before still use it, and it names the same network

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

// Names of the Machine API objects this package works with.
const (
	// Namespace holds the MachineSets and Machines of an OpenShift cluster.
	Namespace = "openshift-machine-api"
	// RoleLabel is the installer's label for a MachineSet's role: worker, infra, master.
	RoleLabel = "machine.openshift.io/cluster-api-machine-role"
	// TypeLabel is the installer's older label with the same meaning as RoleLabel.
	TypeLabel = "machine.openshift.io/cluster-api-machine-type"
	// DeleteMachineAnnotation on a Machine makes the MachineSet controller delete it first when
	// the set is scaled down.
	DeleteMachineAnnotation = "machine.openshift.io/delete-machine"
	// OpenstackProviderSpecKind is the kind of the providerSpec of OpenStack machines.
	OpenstackProviderSpecKind = "OpenstackProviderSpec"
)

// providerSpecField is the field path of the providerSpec inside a MachineSet, for messages.
const providerSpecField = "spec.template.spec.providerSpec.value"

// NotOpenStackError says that a providerSpec is not an OpenstackProviderSpec.
type NotOpenStackError struct {
	Kind       string
	APIVersion string
}

func (e *NotOpenStackError) Error() string {
	if e.Kind == "" {
		return "its providerSpec has no kind, so it is not an OpenstackProviderSpec"
	}
	return fmt.Sprintf("its providerSpec is of kind %s (%s), not OpenstackProviderSpec", e.Kind, e.APIVersion)
}

// errNoProviderSpec says that a Machine or MachineSet has no providerSpec.value at all.
var errNoProviderSpec = errors.New("it has no " + providerSpecField)

// ProviderSpec is an OpenstackProviderSpec as stored in a MachineSet or Machine, read two ways:
// Spec, the typed machine/v1alpha1 view used to decide what is present, and Fields, the stored
// JSON object key by key, which is what a patch is computed against, so that fields this
// version of openshift/api does not know survive.
type ProviderSpec struct {
	Spec   machinev1alpha1.OpenstackProviderSpec
	Fields map[string]json.RawMessage
	// attached is the attachment rule's view of the same JSON (machinesets/attachment), shared
	// with the operator.
	attached attachment.Spec
}

// DecodeProviderSpec reads raw (the JSON of providerSpec.value). It returns *NotOpenStackError
// for the providerSpec of another platform, and an error naming the field for an
// OpenstackProviderSpec that does not decode.
func DecodeProviderSpec(raw []byte) (*ProviderSpec, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errNoProviderSpec
	}
	return decodeProviderSpecAt(raw, providerSpecField)
}

// decodeProviderSpecAt is DecodeProviderSpec of a providerSpec that is not empty, its errors
// naming it as field.
func decodeProviderSpecAt(raw []byte, providerSpecField string) (*ProviderSpec, error) {
	p := &ProviderSpec{}
	if err := json.Unmarshal(raw, &p.Fields); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %v", providerSpecField, err)
	}
	var kind, apiVersion string
	_ = json.Unmarshal(p.Fields["kind"], &kind)
	_ = json.Unmarshal(p.Fields["apiVersion"], &apiVersion)
	if kind != OpenstackProviderSpecKind {
		return nil, &NotOpenStackError{Kind: kind, APIVersion: apiVersion}
	}
	if err := json.Unmarshal(raw, &p.Spec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%s.%s: Invalid value: a JSON %s, where an OpenstackProviderSpec has a %s", providerSpecField, te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("%s is not a valid OpenstackProviderSpec: %v", providerSpecField, err)
	}
	// The typed decode above accepted the JSON, so the attachment view (a subset) does too.
	p.attached, _ = attachment.DecodeSpec(raw)
	return p, nil
}

// HasNetwork reports whether the machines get a port on network id (attachment.Spec.HasNetwork:
// networks[] by uuid or filter.id, ports[] by networkID, without regard to case).
func (p *ProviderSpec) HasNetwork(id string) bool { return p.attached.HasNetwork(id) }

// HasSecurityGroup reports whether security group id is in securityGroups[], by uuid or filter.id.
func (p *ProviderSpec) HasSecurityGroup(id string) bool { return p.attached.HasSecurityGroup(id) }

// portSecurityLeftOn returns the path (in the providerSpec) of the first entry that gives the
// machines a port on network id without disabling its port security (networks[i], ports[i]),
// "" if there is none.
func (p *ProviderSpec) portSecurityLeftOn(id string) string {
	for i, n := range p.Spec.Networks {
		if (attachment.SameID(n.UUID, id) || attachment.SameID(n.Filter.ID, id)) && (n.PortSecurity == nil || *n.PortSecurity) {
			return fmt.Sprintf("networks[%d]", i)
		}
	}
	for i, port := range p.Spec.Ports {
		if attachment.SameID(port.NetworkID, id) && (port.PortSecurity == nil || *port.PortSecurity) {
			return fmt.Sprintf("ports[%d]", i)
		}
	}
	return ""
}

// attachments returns a key for every network and security group the machines get, the same for
// an entry however it names its target: a machine created from a template has all the keys of
// the template. Keys read like "network 4b1e..." for use in messages.
func (p *ProviderSpec) attachments() []string {
	var keys []string
	for _, n := range p.Spec.Networks {
		switch {
		case n.UUID != "":
			keys = append(keys, "network "+strings.ToLower(n.UUID))
		case n.Filter.ID != "":
			keys = append(keys, "network "+strings.ToLower(n.Filter.ID))
		default:
			keys = append(keys, "network "+canonical(n))
		}
	}
	for _, port := range p.Spec.Ports {
		if port.NetworkID != "" {
			keys = append(keys, "network "+strings.ToLower(port.NetworkID))
		} else {
			keys = append(keys, "port "+canonical(port))
		}
	}
	for _, sg := range p.Spec.SecurityGroups {
		switch {
		case sg.UUID != "":
			keys = append(keys, "security group "+strings.ToLower(sg.UUID))
		case sg.Filter.ID != "":
			keys = append(keys, "security group "+strings.ToLower(sg.Filter.ID))
		case sg.Name != "":
			keys = append(keys, "security group "+sg.Name)
		default:
			keys = append(keys, "security group "+canonical(sg))
		}
	}
	return keys
}

func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// MissingFrom returns the networks and security groups of template that machine lacks, e.g.
// ["network 4b1e...", "security group 77c0..."], sorted; none means the machine is up to date.
func MissingFrom(template, machine *ProviderSpec) []string {
	have := map[string]bool{}
	for _, k := range machine.attachments() {
		have[k] = true
	}
	var missing []string
	for _, k := range template.attachments() {
		if !have[k] {
			missing = append(missing, k)
			have[k] = true
		}
	}
	sort.Strings(missing)
	return missing
}

// UpToDate reports whether a machine has the networks and security groups of its template, no
// fewer (an attachment not rolled yet) and no more (a removal not rolled yet).
func UpToDate(template, machine *ProviderSpec) bool {
	return len(MissingFrom(template, machine)) == 0 && len(MissingFrom(machine, template)) == 0
}

// Role returns a MachineSet's role from the installer's labels (on the set, else on its
// template): "worker", "infra", "master"...; "" when unlabelled.
func Role(ms *machinev1beta1.MachineSet) string {
	for _, labels := range []map[string]string{ms.Labels, ms.Spec.Template.Labels} {
		for _, key := range []string{RoleLabel, TypeLabel} {
			if r := labels[key]; r != "" {
				return r
			}
		}
	}
	return ""
}

// IsControlPlane reports whether role names control-plane machines, which are never touched.
func IsControlPlane(role string) bool { return role == "master" || role == "control-plane" }

// templateProviderSpec returns the raw providerSpec of a MachineSet's template.
func templateProviderSpec(ms *machinev1beta1.MachineSet) []byte {
	if v := ms.Spec.Template.Spec.ProviderSpec.Value; v != nil {
		return v.Raw
	}
	return nil
}

// machineProviderSpec returns the raw providerSpec of a Machine.
func machineProviderSpec(m *machinev1beta1.Machine) []byte {
	if v := m.Spec.ProviderSpec.Value; v != nil {
		return v.Raw
	}
	return nil
}

// Zone is the availability zone a MachineSet makes its machines in (its providerSpec's
// availabilityZone), or "" when it names none or its providerSpec is not OpenStack's. On a
// cloud of several zones a set is attached to its own zone's storage network.
func Zone(ms *machinev1beta1.MachineSet) string {
	spec, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		return ""
	}
	return spec.Spec.AvailabilityZone
}
