package machinesets

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/textdiff"
)

// providerSpecPointer is the JSON pointer of the providerSpec inside a MachineSet.
const providerSpecPointer = "/spec/template/spec/providerSpec/value"

// Plan is what patching one MachineSet would do, computed from the object alone.
type Plan struct {
	Name            string
	Role            string
	ResourceVersion string
	// Zone is the providerSpec's availabilityZone: where the machines are made.
	Zone string
	// Skip says why the MachineSet is left alone (not OpenStack, control plane, no
	// providerSpec, a providerSpec that does not decode); empty when it can be patched.
	Skip string
	// Invalid is set with Skip when the MachineSet's OpenstackProviderSpec is broken.
	Invalid bool
	// Warning is what to check later, set when the patch goes ahead (see MigrationWarning).
	Warning string
	// AddNetworks and AddSecurityGroups are the IDs that are absent and get appended.
	AddNetworks       []string
	AddSecurityGroups []string
	// Patch is the RFC 6902 JSON patch that does it, nil when nothing changes. It sets
	// metadata.resourceVersion to ResourceVersion, so the apiserver refuses it with a conflict
	// if the MachineSet changed since it was read.
	Patch []byte

	ms            *machinev1beta1.MachineSet
	previewed     bool
	before, after string
	previewErr    error
}

// Result is what the plan means before anything is written: patched when it writes, else
// invalid, skipped or unchanged.
func (p *Plan) Result() attach.Result {
	res := attach.Result{Kind: "MachineSet", Namespace: Namespace, Name: p.Name, Role: p.Role, Zone: p.Zone, Action: attach.ActionPatched,
		AddedNetworks: p.AddNetworks, AddedSecurityGroups: p.AddSecurityGroups, Warning: p.Warning}
	res.ClusterAPI = p.ms != nil && ClusterAPIAuthoritative(p.ms)
	switch {
	case p.Invalid:
		res.Action, res.Reason = attach.ActionInvalid, p.Skip
	case p.Skip != "":
		res.Action, res.Reason = attach.ActionSkipped, p.Skip
	case !p.Changed():
		res.Action, res.Reason = attach.ActionUnchanged, "already attached"
	}
	return res
}

// Changed reports whether the plan writes anything.
func (p *Plan) Changed() bool { return p.Patch != nil }

// Preview returns the providerSpec as YAML before and after the patch, the patch applied by
// the library the apiserver applies it with. Computed on demand: patching does not need it.
func (p *Plan) Preview() (before, after string, err error) {
	if !p.previewed {
		p.previewed = true
		p.before = attach.ToYAML(templateProviderSpec(p.ms))
		p.after = p.before
		if p.Changed() {
			var raw []byte
			if raw, p.previewErr = applyToProviderSpec(p.ms, p.Patch); p.previewErr == nil {
				p.after = attach.ToYAML(raw)
			}
		}
	}
	return p.before, p.after, p.previewErr
}

// Diff is a unified diff of the providerSpec, "" when nothing changes.
func (p *Plan) Diff() string {
	if !p.Changed() {
		return ""
	}
	before, after, err := p.Preview()
	if err != nil {
		return fmt.Sprintf("(no preview: the patch does not apply locally: %v)\n", err)
	}
	return textdiff.Unified("MachineSet "+p.Name+" "+providerSpecField,
		"MachineSet "+p.Name+" "+providerSpecField+" (patched)", []byte(before), []byte(after))
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// storageNetwork is the networks[] entry appended for a storage network: like the installer's
// additionalNetworkIDs, without allowed address pairs (the API and ingress VIPs only live on
// the machine network).
//
// On a network with port security disabled the entry also says portSecurity: false. MAPO
// passes it on to CAPO as the port's DisablePortSecurity (machine-api-provider-openstack,
// pkg/machine/convert.go, networkParamToCapov1PortOpt), and CAPO then gives the port neither
// allowed address pairs nor the machine's securityGroups (pkg/cloud/services/networking,
// CreatePort: "inherit port security groups from the instance" only when port security is not
// disabled), which Neutron would refuse on such a network. Without it the port inherits the
// machine's securityGroups and its creation fails.
type storageNetwork struct {
	UUID                  string `json:"uuid"`
	NoAllowedAddressPairs bool   `json:"noAllowedAddressPairs"`
	PortSecurity          *bool  `json:"portSecurity,omitempty"`
}

type securityGroup struct {
	UUID string `json:"uuid"`
}

// storagePort is the ports[] entry appended for a storage network to a providerSpec whose
// primary NIC is a ports[] entry (no networks[]: SR-IOV and DPDK workers are written so). The
// provider makes every networks[] port before any ports[] one, and the first port is the
// node's primary NIC (machine-api-provider-openstack, pkg/machine/convert.go createCAPOPorts:
// "The order of the networks is important, first network is the one that will be used for
// kubelet"), so a networks[] entry would put the storage port first. As a ports[] entry after
// the others it comes last; it names no allowed address pairs (a ports[] entry has only its
// own), says trunk: false (a port without a trunk flag takes the spec's, and with trunk: true
// it became a trunk parent: seen on the real actuator), and carries the security groups asked
// for (a ports[] entry that names none inherits the machine's). nameSuffix marks it as
// manila-setup's, which --remove takes away; Neutron chooses its address among the network's
// subnets, as for a networks[] entry by uuid.
type storagePort struct {
	NetworkID      string    `json:"networkID"`
	NameSuffix     string    `json:"nameSuffix"`
	SecurityGroups *[]string `json:"securityGroups,omitempty"`
	PortSecurity   *bool     `json:"portSecurity,omitempty"`
	Trunk          bool      `json:"trunk"`
}

// storagePortSuffixPrefix starts the nameSuffix of the ports[] entries manila-setup writes: the
// port is named <machine>-manila-<first 8 characters of the network ID>.
const storagePortSuffixPrefix = "manila-"

func storagePortSuffix(networkID string) string {
	k := neutronid.Key(networkID)
	return storagePortSuffixPrefix + k[:min(8, len(k))]
}

// portsFirst tells whether the providerSpec's primary NIC is a ports[] entry: ports[] and no
// networks[] entry.
func (p *ProviderSpec) portsFirst() bool {
	return len(p.Spec.Networks) == 0 && len(p.Spec.Ports) > 0
}

// PlanPatch computes the patch that attaches want to ms, recording now and by in the
// attach.Annotation. It never fails: a MachineSet that cannot be patched gets a Skip reason.
func PlanPatch(ms *machinev1beta1.MachineSet, want attach.Attachment, now time.Time, by string) *Plan {
	p := &Plan{Name: ms.Name, Role: Role(ms), ResourceVersion: ms.ResourceVersion, ms: ms}
	if IsControlPlane(p.Role) {
		p.Skip = fmt.Sprintf("control-plane MachineSet (role %s): control-plane machines are never touched", p.Role)
		return p
	}
	if why := NotMachineAPIAuthoritative(ms); why != "" {
		p.Skip = why
		return p
	}
	spec, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		var notOpenStack *NotOpenStackError
		if !errors.As(err, &notOpenStack) && !errors.Is(err, errNoProviderSpec) {
			p.Invalid = true
		}
		p.Skip = err.Error()
		return p
	}
	p.Zone = spec.Spec.AvailabilityZone
	p.AddNetworks, p.AddSecurityGroups = spec.lacks(want)
	warnings := portSecurityWarnings(spec, providerSpecField, want, p.AddNetworks)
	if len(p.AddNetworks) == 0 && len(p.AddSecurityGroups) == 0 {
		p.Warning = strings.Join(warnings, "; ")
		return p
	}
	if len(p.AddNetworks) > 0 {
		warnings = append([]string{MigrationWarning(ms)}, warnings...)
	}
	p.Warning = strings.Join(slices.DeleteFunc(warnings, func(w string) bool { return w == "" }), "; ")
	p.Patch = attachPatch(spec, providerSpecPointer, ms.ObjectMeta, want, p.AddNetworks, p.AddSecurityGroups, now, by)
	return p
}

// lacks returns the networks and security groups of want that the providerSpec does not give its
// machines, each once, in want's order.
func (p *ProviderSpec) lacks(want attach.Attachment) (networks, groups []string) {
	for _, id := range want.Networks {
		if !p.HasNetwork(id) && !attach.ContainsID(networks, id) {
			networks = append(networks, neutronid.Key(id))
		}
	}
	for _, id := range want.SecurityGroups {
		if !p.HasSecurityGroup(id) && !attach.ContainsID(groups, id) {
			groups = append(groups, neutronid.Key(id))
		}
	}
	return networks, groups
}

// attachStates are the list's states of want's networks and security groups in the providerSpec.
func (p *ProviderSpec) attachStates(want attach.Attachment) (network, groups string) {
	network = attach.AttachState(want.Networks, p.HasNetwork)
	groups = attach.AttachState(want.SecurityGroups, p.HasSecurityGroup)
	if len(want.Networks) > 0 && len(want.SecurityGroups) == 0 {
		groups = attach.StateAttached // nothing asked for, nothing missing
	}
	return network, groups
}

// portSecurityWarnings are the warnings of the entries (in the providerSpec at field) that give
// the machines a port on a network of want whose port security is off without saying
// portSecurity: false; adding names the networks the patch adds, whose entries say it.
func portSecurityWarnings(spec *ProviderSpec, field string, want attach.Attachment, adding []string) []string {
	var warnings []string
	for _, id := range want.PortSecurityOffOf(want.Networks) {
		if at := spec.portSecurityLeftOn(id); at != "" && !attach.ContainsID(adding, id) {
			warnings = append(warnings, fmt.Sprintf("network %s has port security disabled, but %s.%s, its entry, does not say portSecurity: false: the new machines' port on it inherits their security groups and Neutron refuses it; add portSecurity: false there", neutronid.Key(id), field, at))
		}
	}
	return warnings
}

// attachPatch is the JSON patch that appends the networks and security groups to the
// providerSpec at pointer of an object with meta, and records want in its attach.Annotation,
// with the resourceVersion read as precondition.
func attachPatch(spec *ProviderSpec, pointer string, meta metav1.ObjectMeta, want attach.Attachment, addNetworks, addGroups []string, now time.Time, by string) []byte {
	var ops []jsonPatchOp
	if meta.ResourceVersion != "" {
		// "add" replaces an existing member: the patched object carries the resourceVersion we
		// read, and the apiserver answers 409 Conflict if the stored one is newer.
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/resourceVersion", Value: meta.ResourceVersion})
	}
	var nets []any
	for _, id := range addNetworks {
		if spec.portsFirst() {
			port := storagePort{NetworkID: id, NameSuffix: storagePortSuffix(id)}
			if len(addGroups)+len(want.SecurityGroups) > 0 {
				groups := make([]string, 0, len(want.SecurityGroups))
				for _, g := range want.SecurityGroups {
					groups = append(groups, neutronid.Key(g))
				}
				port.SecurityGroups = &groups
			}
			if want.PortSecurityOff(id) {
				port.PortSecurity, port.SecurityGroups = new(false), nil
			}
			nets = append(nets, port)
			continue
		}
		n := storageNetwork{UUID: id, NoAllowedAddressPairs: true}
		if want.PortSecurityOff(id) {
			n.PortSecurity = new(false)
		}
		nets = append(nets, n)
	}
	list := "networks"
	if spec.portsFirst() {
		list = "ports"
	}
	ops = append(ops, appendOps(pointer, spec.Fields, list, nets)...)
	var sgs []any
	for _, id := range addGroups {
		sgs = append(sgs, securityGroup{UUID: id})
	}
	ops = append(ops, appendOps(pointer, spec.Fields, "securityGroups", sgs)...)

	recorded := want
	recorded.PortSecurityDisabled = want.PortSecurityOffOf(addNetworks)
	record, _ := json.Marshal(attach.RecordIn(meta.Annotations).Merged(recorded, now, by))
	if len(meta.Annotations) == 0 {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{attach.Annotation: string(record)}})
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(attach.Annotation), Value: string(record)})
	}
	patch, _ := json.Marshal(ops)
	return patch
}

// appendOps appends values to the array at key of the providerSpec at pointer, or adds the
// array when the key is absent or null.
func appendOps(pointer string, fields map[string]json.RawMessage, key string, values []any) []jsonPatchOp {
	if len(values) == 0 {
		return nil
	}
	path := pointer + "/" + key
	if raw, ok := fields[key]; ok && strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
		ops := make([]jsonPatchOp, 0, len(values))
		for _, v := range values {
			ops = append(ops, jsonPatchOp{Op: "add", Path: path + "/-", Value: v})
		}
		return ops
	}
	return []jsonPatchOp{{Op: "add", Path: path, Value: values}}
}

// escapePointer escapes a key for use in a JSON pointer (RFC 6901).
func escapePointer(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// applyToProviderSpec applies patch to ms and returns the resulting providerSpec JSON.
func applyToProviderSpec(ms *machinev1beta1.MachineSet, patch []byte) ([]byte, error) {
	return applyAt(ms, patch, providerSpecPointer)
}

// applyAt applies patch to obj, by the library the apiserver applies it with, and returns the
// JSON at pointer in the result.
func applyAt(obj any, patch []byte, pointer string) ([]byte, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	decoded, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	patched, err := decoded.Apply(doc)
	if err != nil {
		return nil, err
	}
	// Raw at every step: the value comes back as the apiserver stores it (no float rounding).
	node := json.RawMessage(patched)
	for _, key := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(node, &m); err != nil {
			return nil, fmt.Errorf("%s: no object at %q: %w", pointer, key, err)
		}
		node = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(key)]
	}
	return node, nil
}

// Skipped says why Patch would leave ms alone whatever it attaches (a control-plane set, one
// Cluster API is authoritative for, not OpenStack's), or "".
func Skipped(ms *machinev1beta1.MachineSet) string {
	return PlanPatch(ms, attach.Attachment{}, time.Time{}, "").Skip
}
