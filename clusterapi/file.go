package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// PatchFile does what Patch does, to the Cluster API objects of a file (GitOps) and with no
// cluster (attach.PatchFile): the same plan per MachineSet and MachineDeployment, against the
// templates of the same file. The sets' changes are spliced into the text and checked
// (internal/filepatch); each new template is appended as a document of its own
// (FileResult.Appended). The old templates stay in the file: the running Machines were made from
// them, and a GitOps tool that prunes would delete them; remove them once no Machine uses them.
func PatchFile(ctx context.Context, name string, data []byte, scope Scope, opts attach.Options) (*attach.FileResult, error) {
	return attach.PatchFile(ctx, &fileTarget{scope: scope, templates: map[string]*unstructured.Unstructured{}}, name, data, opts)
}

// fileTarget is the attach.FileTarget of the Cluster API objects of one file.
type fileTarget struct {
	scope     Scope
	name      string
	templates map[string]*unstructured.Unstructured // the file's, by name
}

// FromFile decodes the sets, deployments and templates of the file and picks by name.
func (t *fileTarget) FromFile(name string, objs []filepatch.Object) ([]attach.FileSelected[object], int, error) {
	t.name = name
	index := map[*unstructured.Unstructured]int{}
	var objects []object
	found := 0
	for i, o := range objs {
		var kind string
		switch {
		case strings.HasPrefix(o.APIVersion, TemplateGVR.Group+"/") && o.Kind == TemplateKind:
			kind = TemplateKind
		case o.Is(MachineSetGVR.GroupVersion().String(), KindMachineSet), o.Is(MachineDeploymentGVR.GroupVersion().String(), KindMachineDeployment):
			kind = o.Kind
		default:
			continue
		}
		found++
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(o.JSON, &u.Object); err != nil {
			return nil, 0, filepatch.Errorf("%s: %s: %v", name, o.Where, err)
		}
		if u.GetName() == "" {
			return nil, 0, filepatch.Errorf("%s: %s.metadata.name: Required value: a %s needs a name", name, o.Where, kind)
		}
		if kind == TemplateKind {
			if t.templates[u.GetName()] != nil {
				return nil, 0, filepatch.Errorf("%s: %s.metadata.name: Duplicate value: %q", name, o.Where, u.GetName())
			}
			t.templates[u.GetName()] = u
			continue
		}
		index[u] = i
		objects = append(objects, object{kind: kind, u: u})
	}
	if len(objects) == 0 {
		return nil, 0, filepatch.Errorf("%s: no Cluster API MachineSet or MachineDeployment (apiVersion %s) in it", name, MachineSetGVR.GroupVersion())
	}
	picked, err := pick(objects, t.scope.Names, "in "+name)
	if err != nil {
		return nil, 0, err
	}
	out := make([]attach.FileSelected[object], len(picked))
	for i, o := range picked {
		out[i] = attach.FileSelected[object]{Selected: attach.Selected[object]{Object: o}, Index: index[o.u]}
	}
	return out, found, nil
}

// Ref names a set or deployment in messages.
func (*fileTarget) Ref(o object) attach.Ref { return (*Target).Ref(nil, o) }

// PlanFile plans o against the template of the file it names; a new template is appended.
func (t *fileTarget) PlanFile(o object, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	return t.planFile(o, func(tmpl *unstructured.Unstructured) (*plan, error) { return planFor(o, tmpl, a, by, now) })
}

// planFile plans o with planner, against the template of the file it names.
func (t *fileTarget) planFile(o object, planner func(tmpl *unstructured.Unstructured) (*plan, error)) (attach.Plan, error) {
	// A file's objects often leave their namespace to kubectl or kustomize: a template of the
	// same name is the one unless both say different namespaces.
	tmpl := t.templates[refOf(o.u).Name]
	if ns := templateNamespace(o, refOf(o.u)); tmpl != nil && ns != "" && tmpl.GetNamespace() != "" && ns != tmpl.GetNamespace() {
		tmpl = nil
	}
	p, err := planner(tmpl)
	if err != nil {
		return attach.Plan{}, err
	}
	if p.result.Action == attach.ActionInvalid && tmpl == nil && refOf(o.u).isOpenStackTemplate() {
		p.result.Reason = fmt.Sprintf("spec.template.spec.infrastructureRef: Not found: OpenStackMachineTemplate %q is not in %s; put the template in the same file", refOf(o.u).Name, t.name)
	}
	change := attach.FileChange{Patch: p.patch}
	if p.result.Action == attach.ActionPatched && p.template != nil {
		if existing := t.templates[p.template.GetName()]; existing != nil {
			if !sameSpec(existing, p.template) {
				return attach.Plan{}, fmt.Errorf("OpenStackMachineTemplate %s is in the file with another spec than the one manila-setup would give it", p.template.GetName())
			}
		} else {
			change.Append = []map[string]any{p.template.Object}
		}
	}
	return attach.Plan{Result: p.result, Change: change, Diff: p.diff}, nil
}

// Output: the sets and deployments of the patched file go to the structured output (the new
// templates are added after them).
func (*fileTarget) Output(o filepatch.Object) bool {
	return o.Is(MachineSetGVR.GroupVersion().String(), KindMachineSet) || o.Is(MachineDeploymentGVR.GroupVersion().String(), KindMachineDeployment)
}
