package clusterapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// The resources this package reads and writes.
var (
	MachineSetGVR        = clusterv1.GroupVersion.WithResource("machinesets")
	MachineDeploymentGVR = clusterv1.GroupVersion.WithResource("machinedeployments")
	TemplateGVR          = infrav1.SchemeGroupVersion.WithResource("openstackmachinetemplates")
	OpenStackMachineGVR  = infrav1.SchemeGroupVersion.WithResource("openstackmachines")
)

// The kinds of the objects whose machines get the storage network.
const (
	KindMachineSet        = "MachineSet"
	KindMachineDeployment = "MachineDeployment"
	TemplateKind          = "OpenStackMachineTemplate"
)

// ReplacesAnnotation on a template made by manila-setup names the template it replaced, the one
// a later run deletes once no Machine and no set uses it.
const ReplacesAnnotation = "manila-setup.io/replaces-template"

// PortDescription is the description of the ports manila-setup adds.
const PortDescription = "Manila storage network (manila-setup)"

// object is a MachineSet or a MachineDeployment: both make their Machines from
// spec.template.spec.infrastructureRef.
type object struct {
	kind string
	u    *unstructured.Unstructured
}

func (o object) String() string {
	return fmt.Sprintf("%s %s/%s", o.kind, o.u.GetNamespace(), o.u.GetName())
}

// templateRef is what spec.template.spec.infrastructureRef names.
type templateRef struct{ APIVersion, Kind, Namespace, Name string }

func refOf(u *unstructured.Unstructured) templateRef {
	m, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec", "infrastructureRef")
	s := func(k string) string { v, _ := m[k].(string); return v }
	return templateRef{APIVersion: s("apiVersion"), Kind: s("kind"), Namespace: s("namespace"), Name: s("name")}
}

// isOpenStackTemplate reports whether a reference is to CAPO's machine template.
func (r templateRef) isOpenStackTemplate() bool {
	return r.Kind == TemplateKind && strings.HasPrefix(r.APIVersion, infrav1.SchemeGroupVersion.Group+"/")
}

// madeByDeployment names the MachineDeployment that controls a MachineSet, "" if none does.
func madeByDeployment(o object) string {
	if o.kind != KindMachineSet {
		return ""
	}
	for _, ref := range o.u.GetOwnerReferences() {
		if ref.Kind == KindMachineDeployment && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return ""
}

// paused says why Cluster API does not act on o, "" when it does. Cluster API leaves an object
// with the paused annotation alone; OpenShift's Machine API → Cluster API migration pauses the
// Cluster API copy of a MachineSet whose authoritative API is the Machine API, and rewrites it
// from the Machine API copy: a new template there would be lost, and a rollout would wait
// forever.
func paused(o object) string {
	if _, ok := o.u.GetAnnotations()[clusterv1.PausedAnnotation]; !ok {
		return ""
	}
	return fmt.Sprintf("paused (annotation %s): Cluster API does not act on it; on OpenShift its Machine API copy is authoritative: attach the storage network there (`manila-setup machinesets patch`)", clusterv1.PausedAnnotation)
}

// plan is what attaching does to one MachineSet or MachineDeployment.
type plan struct {
	result attach.Result
	// template is the new template to create; nil when nothing changes.
	template *unstructured.Unstructured
	// patch is the JSON patch of the set or deployment: infrastructureRef.name and the record.
	patch         []byte
	before, after json.RawMessage // spec.template.spec of the old and new template, for the diff
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// port is the port added per storage network: the network by ID and a description saying who
// added it. Without allowedAddressPairs, CAPO gives the port none (the Machine API's
// noAllowedAddressPairs).
//
// On a network with port security disabled the port says disablePortSecurity: true, and has no
// securityGroups of its own. CAPO adds the machine's securityGroups to every port
// (openStackMachineSpecToOpenStackServerSpec), but resolves a port's security groups only when
// its port security is not disabled (v0.12, pkg/cloud/services/networking/port.go,
// normalizePorts), so the port is created without them, as Neutron requires on such a network.
type port struct {
	Network             networkParam `json:"network"`
	Description         string       `json:"description"`
	DisablePortSecurity *bool        `json:"disablePortSecurity,omitempty"`
}

type networkParam struct {
	ID string `json:"id"`
}

// startPlan begins the plan of o, made from tmpl (nil: not found): with the template read, or
// nil and the plan's result saying why o is left alone (skipped, invalid).
func startPlan(o object, tmpl *unstructured.Unstructured) (*plan, *infrav1.OpenStackMachineTemplate) {
	ref := refOf(o.u)
	p := &plan{result: attach.Result{Kind: o.kind, Namespace: o.u.GetNamespace(), Name: o.u.GetName(), Template: ref.Name}}
	r := &p.result
	switch {
	case paused(o) != "":
		r.Action, r.Reason = attach.ActionSkipped, paused(o)
		return p, nil
	case madeByDeployment(o) != "":
		r.Action, r.Reason = attach.ActionSkipped, fmt.Sprintf("made by MachineDeployment %s, which is patched instead", madeByDeployment(o))
		return p, nil
	case !ref.isOpenStackTemplate():
		r.Action, r.Reason = attach.ActionSkipped, fmt.Sprintf("its machines are made from a %s (%s), not an OpenStackMachineTemplate", orNone(ref.Kind), orNone(ref.APIVersion))
		return p, nil
	case tmpl == nil:
		r.Action, r.Reason = attach.ActionInvalid, fmt.Sprintf("spec.template.spec.infrastructureRef: Not found: OpenStackMachineTemplate %q in namespace %s", ref.Name, templateNamespace(o, ref))
		return p, nil
	}
	var t infrav1.OpenStackMachineTemplate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl.Object, &t); err != nil {
		r.Action, r.Reason = attach.ActionInvalid, fmt.Sprintf("OpenStackMachineTemplate %s/%s does not read as CAPO's v1beta1: %v", tmpl.GetNamespace(), tmpl.GetName(), err)
		return p, nil
	}
	return p, &t
}

// planFor decides what to do to o, whose template is tmpl (nil: not found): skipped, unchanged
// (the template has a port on every network and every security group), or patched: a new
// template and the patch pointing o at it.
func planFor(o object, tmpl *unstructured.Unstructured, a attach.Attachment, by string, now time.Time) (*plan, error) {
	p, t := startPlan(o, tmpl)
	if t == nil {
		return p, nil
	}
	r := &p.result
	spec := t.Spec.Template.Spec
	var ops []jsonPatchOp
	const specPath = "/spec/template/spec"
	var newPorts []any
	for _, id := range a.Networks {
		if !hasPortOn(spec.Ports, id) && !slices.Contains(r.AddedNetworks, neutronid.Key(id)) {
			np := port{Network: networkParam{ID: neutronid.Key(id)}, Description: PortDescription}
			if a.PortSecurityOff(id) {
				np.DisablePortSecurity = new(true)
			}
			newPorts = append(newPorts, np)
			r.AddedNetworks = append(r.AddedNetworks, neutronid.Key(id))
		}
	}
	var warnings []string
	for _, id := range a.PortSecurityOffOf(a.Networks) {
		if at := portSecurityLeftOn(spec.Ports, id); at != "" && !slices.Contains(r.AddedNetworks, neutronid.Key(id)) {
			warnings = append(warnings, fmt.Sprintf("%s: network %s has port security disabled, but spec.template.spec.%s of OpenStackMachineTemplate %s, its port, does not say disablePortSecurity: true: CAPO gives that port the machine's security groups and Neutron refuses it; a template with disablePortSecurity: true on that port (and no securityGroups on it) is needed", o, neutronid.Key(id), at, tmpl.GetName()))
		}
	}
	var newGroups []any
	for _, id := range a.SecurityGroups {
		if !hasGroup(spec.SecurityGroups, id) && !slices.Contains(r.AddedSecurityGroups, neutronid.Key(id)) {
			newGroups = append(newGroups, networkParam{ID: neutronid.Key(id)})
			r.AddedSecurityGroups = append(r.AddedSecurityGroups, neutronid.Key(id))
		}
	}
	if filtered := portsByFilter(spec.Ports); len(newPorts) > 0 && filtered != "" {
		warnings = append([]string{fmt.Sprintf("%s: OpenStackMachineTemplate %s names the network of %s by filter: if that is the storage network, the machines get two ports on it; remove the one manila-setup added (description %q)", o, tmpl.GetName(), filtered, PortDescription)}, warnings...)
	}
	r.Warning = strings.Join(warnings, "; ")
	if len(newPorts) == 0 && len(newGroups) == 0 {
		r.Action, r.Reason = attach.ActionUnchanged, "its template already has a port on every storage network and every security group"
		return p, nil
	}
	if len(newPorts) > 0 {
		if len(spec.Ports) == 0 {
			// CAPO gives a machine one default port (the cluster's network) only when ports is
			// empty: write that port out, as {} (what CAPO uses), before the storage port.
			ops = append(ops, jsonPatchOp{Op: "add", Path: specPath + "/ports", Value: append([]any{struct{}{}}, newPorts...)})
		} else {
			for _, np := range newPorts {
				ops = append(ops, jsonPatchOp{Op: "add", Path: specPath + "/ports/-", Value: np})
			}
		}
	}
	if len(newGroups) > 0 {
		if len(spec.SecurityGroups) == 0 {
			ops = append(ops, jsonPatchOp{Op: "add", Path: specPath + "/securityGroups", Value: newGroups})
		} else {
			for _, g := range newGroups {
				ops = append(ops, jsonPatchOp{Op: "add", Path: specPath + "/securityGroups/-", Value: g})
			}
		}
	}
	// The record says which of the ports added are without port security.
	a.PortSecurityDisabled = a.PortSecurityOffOf(r.AddedNetworks)
	if err := p.newTemplate(tmpl, ops, a, by, now); err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	r.Action, r.OldTemplate, r.Template = attach.ActionPatched, tmpl.GetName(), p.template.GetName()
	r.Rolls = rolls(o.kind, o.u.GetNamespace())

	// The set or deployment: its resourceVersion as precondition (409 when it changed since it
	// was read), the new template's name, and the record of what was attached.
	ops = nil
	if rv := o.u.GetResourceVersion(); rv != "" {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/resourceVersion", Value: rv})
	}
	ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/template/spec/infrastructureRef/name", Value: p.template.GetName()})
	ops = append(ops, recordOp(o.u.GetAnnotations(), attach.Attachment{Networks: r.AddedNetworks, SecurityGroups: r.AddedSecurityGroups, PortSecurityDisabled: a.PortSecurityDisabled}, by, now))
	var err error
	p.patch, err = json.Marshal(ops)
	return p, err
}

// newTemplate makes the new template: the old one's spec with ops applied, its labels,
// annotations and owners, the record of what was attached and the name of the template it
// replaces, named after the old one and a hash of the new spec (so the sets that shared a
// template share the new one, and a run that stopped half-way finds it again).
func (p *plan) newTemplate(old *unstructured.Unstructured, ops []jsonPatchOp, a attach.Attachment, by string, now time.Time) error {
	return p.newTemplateRecording(old, ops, func(annotations map[string]string) error {
		record, err := json.Marshal(attach.RecordIn(annotations).Merged(a, now, by))
		if err != nil {
			return err
		}
		annotations[attach.Annotation] = string(record)
		return nil
	})
}

// newTemplateRecording is newTemplate with record writing the record into the new template's
// annotations (a copy of the old one's).
func (p *plan) newTemplateRecording(old *unstructured.Unstructured, ops []jsonPatchOp, record func(annotations map[string]string) error) error {
	oldSpec, _, _ := unstructured.NestedMap(old.Object, "spec")
	oldJSON, err := json.Marshal(map[string]any{"spec": oldSpec})
	if err != nil {
		return err
	}
	patchJSON, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	decoded, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return err
	}
	newJSON, err := decoded.Apply(oldJSON)
	if err != nil {
		return fmt.Errorf("adding the ports to OpenStackMachineTemplate %s: %w", old.GetName(), err)
	}
	var patched map[string]any
	if err := json.Unmarshal(newJSON, &patched); err != nil {
		return err
	}
	t := &unstructured.Unstructured{Object: map[string]any{"apiVersion": old.GetAPIVersion(), "kind": TemplateKind, "spec": patched["spec"]}}
	sum := sha256.Sum256(newJSON)
	t.SetName(templateName(old, hex.EncodeToString(sum[:])[:8]))
	t.SetNamespace(old.GetNamespace())
	t.SetLabels(old.GetLabels())
	t.SetOwnerReferences(old.GetOwnerReferences())
	annotations := maps.Clone(old.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, "kubectl.kubernetes.io/last-applied-configuration")
	if err := record(annotations); err != nil {
		return err
	}
	annotations[ReplacesAnnotation] = old.GetName()
	t.SetAnnotations(annotations)
	p.template = t
	oldTemplateSpec, _, _ := unstructured.NestedMap(old.Object, "spec", "template", "spec")
	newTemplateSpec, _, _ := unstructured.NestedMap(t.Object, "spec", "template", "spec")
	p.before, _ = json.Marshal(oldTemplateSpec)
	p.after, _ = json.Marshal(newTemplateSpec)
	return nil
}

// ourSuffix is the suffix templateName gives; a template of manila-setup's loses it before the
// next one is named, so that names do not grow run after run.
var ourSuffix = regexp.MustCompile(`-manila-[0-9a-f]{8}$`)

// maxNameLength is what a DNS subdomain name, the name of a template, may hold.
const maxNameLength = 253

func templateName(old *unstructured.Unstructured, hash string) string {
	base := old.GetName()
	if _, ours := old.GetAnnotations()[ReplacesAnnotation]; ours {
		base = ourSuffix.ReplaceAllString(base, "")
	}
	suffix := "-manila-" + hash
	if len(base)+len(suffix) > maxNameLength {
		base = strings.TrimRight(base[:maxNameLength-len(suffix)], "-.")
	}
	return base + suffix
}

// recordOp is the JSON-patch operation that writes the attachment record, merged with the one
// already in annotations.
func recordOp(annotations map[string]string, a attach.Attachment, by string, now time.Time) jsonPatchOp {
	record, _ := json.Marshal(attach.RecordIn(annotations).Merged(a, now, by))
	if len(annotations) == 0 {
		return jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{attach.Annotation: string(record)}}
	}
	return jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + strings.ReplaceAll(attach.Annotation, "/", "~1"), Value: string(record)}
}

// rolls says who replaces the running machines of a kind, in namespace.
func rolls(kind, namespace string) string {
	if kind == KindMachineDeployment {
		return "Cluster API replaces its Machines itself (the MachineDeployment's rolling update)"
	}
	return "new Machines get the port; Cluster API MachineSets do not replace running Machines: `" + rolloutCommand(namespace) + "` replaces them one at a time without losing capacity"
}

// diff is the new template's spec.template.spec against the old one's, and the set's new
// reference.
func (p *plan) diff() string {
	r := p.result
	var before, after any
	_ = json.Unmarshal(p.before, &before)
	_ = json.Unmarshal(p.after, &after)
	return attach.YAMLDiff(fmt.Sprintf("OpenStackMachineTemplate %s/%s spec.template.spec", r.Namespace, r.OldTemplate), before, after) +
		attach.YAMLDiff(fmt.Sprintf("%s %s/%s spec.template.spec.infrastructureRef", r.Kind, r.Namespace, r.Name),
			map[string]string{"kind": TemplateKind, "name": r.OldTemplate}, map[string]string{"kind": TemplateKind, "name": r.Template})
}

// hasPortOn reports whether a port is on network id (by ID; a filter cannot be judged).
func hasPortOn(ports []infrav1.PortOpts, id string) bool {
	return slices.ContainsFunc(ports, func(p infrav1.PortOpts) bool {
		return p.Network != nil && p.Network.ID != nil && neutronid.Equal(*p.Network.ID, id)
	})
}

// portSecurityLeftOn names the first port on network id (by ID) that does not disable its port
// security, as ports[i]; "" if none.
func portSecurityLeftOn(ports []infrav1.PortOpts, id string) string {
	for i, p := range ports {
		if p.Network != nil && p.Network.ID != nil && neutronid.Equal(*p.Network.ID, id) && (p.DisablePortSecurity == nil || !*p.DisablePortSecurity) {
			return fmt.Sprintf("ports[%d]", i)
		}
	}
	return ""
}

// portsByFilter names the ports whose network is given by filter, "" if none.
func portsByFilter(ports []infrav1.PortOpts) string {
	var idx []string
	for i, p := range ports {
		if p.Network != nil && p.Network.Filter != nil {
			idx = append(idx, fmt.Sprintf("ports[%d]", i))
		}
	}
	return strings.Join(idx, ", ")
}

func hasGroup(groups []infrav1.SecurityGroupParam, id string) bool {
	return slices.ContainsFunc(groups, func(g infrav1.SecurityGroupParam) bool {
		return g.ID != nil && neutronid.Equal(*g.ID, id)
	})
}

func templateNamespace(o object, ref templateRef) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return o.u.GetNamespace()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
