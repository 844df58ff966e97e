package clusterapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/machinesets"
)

// FileResult is what PatchFile made of a file.
type FileResult struct {
	// Output is the file with the sets pointed at their new templates (only those lines and the
	// records differ, unless Reformatted) and the new templates appended as documents.
	Output      []byte
	Reformatted bool
	Results     []Result
	// NewTemplates are the names of the templates appended, in order.
	NewTemplates []string
	// Objects are the MachineSets, MachineDeployments and new templates of Output, as JSON.
	Objects []json.RawMessage
}

// PatchFile does what Patch does, to the Cluster API objects of a file (GitOps) and with no
// cluster: the same plan per MachineSet and MachineDeployment, against the templates of the
// same file. The sets' changes are spliced into the text and checked (internal/filepatch); each
// new template is appended as a document of its own. The old templates stay in the file: the
// running Machines were made from them, and a GitOps tool that prunes would delete them; remove
// them once no Machine uses them.
func PatchFile(ctx context.Context, name string, data []byte, opts Options) (*FileResult, error) {
	now, err := opts.check(ctx)
	if err != nil {
		return nil, err
	}
	f, err := filepatch.Parse(name, data)
	if err != nil {
		return nil, err
	}
	templates := map[string]*unstructured.Unstructured{}
	index := map[*unstructured.Unstructured]int{}
	var objects []object
	for i, o := range f.Objects() {
		var kind string
		switch {
		case strings.HasPrefix(o.APIVersion, TemplateGVR.Group+"/") && o.Kind == TemplateKind:
			kind = TemplateKind
		case o.Is(MachineSetGVR.GroupVersion().String(), KindMachineSet), o.Is(MachineDeploymentGVR.GroupVersion().String(), KindMachineDeployment):
			kind = o.Kind
		default:
			continue
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(o.JSON, &u.Object); err != nil {
			return nil, filepatch.Errorf("%s: %s: %v", name, o.Where, err)
		}
		if u.GetName() == "" {
			return nil, filepatch.Errorf("%s: %s.metadata.name: Required value: a %s needs a name", name, o.Where, kind)
		}
		if kind == TemplateKind {
			if templates[u.GetName()] != nil {
				return nil, filepatch.Errorf("%s: %s.metadata.name: Duplicate value: %q", name, o.Where, u.GetName())
			}
			templates[u.GetName()] = u
			continue
		}
		index[u] = i
		objects = append(objects, object{kind: kind, u: u})
	}
	if len(objects) == 0 {
		return nil, filepatch.Errorf("%s: no Cluster API MachineSet or MachineDeployment (apiVersion %s) in it", name, MachineSetGVR.GroupVersion())
	}
	picked, err := pick(objects, opts.Names, "in "+name)
	if err != nil {
		return nil, err
	}
	res := &FileResult{}
	patches := map[int][]byte{}
	var added []*unstructured.Unstructured
	for _, o := range picked {
		// A file's objects often leave their namespace to kubectl or kustomize: a template of
		// the same name is the one unless both say different namespaces.
		tmpl := templates[refOf(o.u).Name]
		if ns := templateNamespace(o, refOf(o.u)); tmpl != nil && ns != "" && tmpl.GetNamespace() != "" && ns != tmpl.GetNamespace() {
			tmpl = nil
		}
		p, err := planFor(o, tmpl, opts, now())
		if err != nil {
			return nil, filepatch.Errorf("%s: %v", name, err)
		}
		if p.result.Action == machinesets.ActionInvalid && tmpl == nil && refOf(o.u).isOpenStackTemplate() {
			p.result.Reason = fmt.Sprintf("spec.template.spec.infrastructureRef: Not found: OpenStackMachineTemplate %q is not in %s; put the template in the same file", refOf(o.u).Name, name)
		}
		if p.result.Action == machinesets.ActionPatched {
			patches[index[o.u]] = p.patch
			if !slices.ContainsFunc(added, func(t *unstructured.Unstructured) bool { return t.GetName() == p.template.GetName() }) {
				if existing := templates[p.template.GetName()]; existing != nil {
					if !sameSpec(existing, p.template) {
						return nil, filepatch.Errorf("%s: OpenStackMachineTemplate %s is in the file with another spec than the one manila-setup would give it", name, p.template.GetName())
					}
				} else {
					added = append(added, p.template)
				}
			}
		}
		res.Results = append(res.Results, p.result)
	}
	out, reformatted, objs, err := f.Apply(patches, "/metadata/resourceVersion")
	if err != nil {
		return nil, err
	}
	res.Output, res.Reformatted = out, reformatted
	for _, o := range objs {
		if o.Is(MachineSetGVR.GroupVersion().String(), KindMachineSet) || o.Is(MachineDeploymentGVR.GroupVersion().String(), KindMachineDeployment) {
			res.Objects = append(res.Objects, o.JSON)
		}
	}
	if len(added) == 0 {
		return res, nil
	}
	if res.Output, err = appendDocuments(name, res.Output, added); err != nil {
		return nil, err
	}
	for _, t := range added {
		res.NewTemplates = append(res.NewTemplates, t.GetName())
		b, _ := json.Marshal(t.Object)
		res.Objects = append(res.Objects, b)
	}
	return res, nil
}

// appendDocuments appends each object as a YAML document, with the file's line ends, and checks
// that the result reads back as the file's objects followed by these.
func appendDocuments(name string, data []byte, objs []*unstructured.Unstructured) ([]byte, error) {
	nl := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		nl = "\r\n"
	}
	var b bytes.Buffer
	b.Write(data)
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		b.WriteString(nl)
	}
	for _, o := range objs {
		// yaml.v3 does not fold long lines (an annotation's JSON stays on one).
		var y bytes.Buffer
		enc := yaml.NewEncoder(&y)
		enc.SetIndent(2)
		if err := enc.Encode(o.Object); err != nil {
			return nil, err
		}
		b.WriteString("---" + nl)
		b.WriteString(strings.ReplaceAll(y.String(), "\n", nl))
	}
	before, err := filepatch.Parse(name, data)
	if err != nil {
		return nil, err
	}
	after, err := filepatch.Parse(name, b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: the new templates do not read back, nothing was written: %w", name, err)
	}
	n := len(before.Objects())
	if len(after.Objects()) != n+len(objs) {
		return nil, fmt.Errorf("%s: the new templates do not read back (%d objects, want %d), nothing was written", name, len(after.Objects()), n+len(objs))
	}
	for i, o := range objs {
		want, _ := json.Marshal(o.Object)
		if !filepatch.SameJSON(after.Objects()[n+i].JSON, want) {
			return nil, fmt.Errorf("%s: the new template %s does not read back as planned, nothing was written", name, o.GetName())
		}
	}
	return b.Bytes(), nil
}
