package machinesets

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	yaml "go.yaml.in/yaml/v3"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/internal/yamlpatch"
)

// FileResult is what PatchFile made of a file.
type FileResult struct {
	// Output is the file with the MachineSets patched; every other byte is the input's unless
	// Reformatted.
	Output []byte
	// Reformatted says the file had to be written out again as a whole (a flow-style list, a
	// value replaced): same content, other formatting.
	Reformatted bool
	// Results says, per MachineSet of the file, what was done (ActionPatched: changed in Output).
	Results []PatchResult
	// Objects are the MachineSets of Output, as JSON, in file order (for -o json).
	Objects []json.RawMessage
	// Others counts the documents and List items that are not MachineSets, kept as they were.
	Others int
}

// fileObject is one MachineSet of a file: where it is in the YAML and what it holds.
type fileObject struct {
	node *yaml.Node
	raw  []byte
	ms   *machinev1beta1.MachineSet
}

// PatchFile does what Patch does, to the MachineSets of a file instead of a cluster, for
// clusters managed from Git: the same plan, so the same change (appended networks and security
// groups, the attachment annotation), applied to the YAML text so that only the added lines
// differ. The file may hold several documents and Lists (kind List or MachineSetList); other
// objects are kept as they are. name is the file's name, for messages. The result is checked:
// each MachineSet of the output must decode to the input with the plan's JSON patch applied,
// which is what the apiserver would store, and every other object to itself.
func PatchFile(ctx context.Context, name string, data []byte, opts PatchOptions) (*FileResult, error) {
	now, err := opts.check(ctx)
	if err != nil {
		return nil, err
	}
	objects, others, err := objectsIn(name, data)
	if err != nil {
		return nil, err
	}
	sets := make([]*machinev1beta1.MachineSet, len(objects))
	for i, o := range objects {
		sets[i] = o.ms
	}
	picked, err := pickMachineSets(sets, opts.Selection, "in "+name)
	if err != nil {
		return nil, err
	}
	plans := map[*machinev1beta1.MachineSet]*Plan{}
	res := &FileResult{Others: others}
	for _, s := range picked {
		r := PatchResult{Name: s.ms.Name, Role: Role(s.ms)}
		if s.skip != "" {
			r.Action, r.Reason = ActionSkipped, s.skip
		} else if plan := PlanPatch(s.ms, opts.Attachment, now(), opts.By); plan.result(&r, false) {
			r.Action, plans[s.ms] = ActionPatched, plan
		}
		res.Results = append(res.Results, r)
	}

	res.Output, res.Reformatted, err = applyPlans(name, data, plans, false)
	if err == nil {
		err = checkPatchedFile(name, data, res.Output, plans)
	}
	if err != nil && !res.Reformatted {
		// The splice did not give what was planned: write the whole file out instead.
		res.Output, res.Reformatted, err = applyPlans(name, data, plans, true)
		if err == nil {
			err = checkPatchedFile(name, data, res.Output, plans)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the patched file is not what was planned, nothing was written: %w", name, err)
	}
	patched, _, _ := objectsIn(name, res.Output)
	for _, o := range patched {
		res.Objects = append(res.Objects, o.raw)
	}
	return res, nil
}

// FileError is a file that cannot be patched as it is (not YAML, a MachineSet that does not
// decode, no MachineSet at all).
type FileError struct{ msg string }

func (e *FileError) Error() string { return e.msg }

// applyPlans applies each plan's JSON patch to its MachineSet in a fresh parse of data (the
// resourceVersion check is the apiserver's business: a file has no newer version).
func applyPlans(name string, data []byte, plans map[*machinev1beta1.MachineSet]*Plan, reformat bool) ([]byte, bool, error) {
	stream, err := yamlpatch.Parse(data)
	if err != nil {
		return nil, false, err
	}
	objects, _, err := objectsOf(name, stream)
	if err != nil {
		return nil, false, err
	}
	if reformat {
		stream.Reformat()
	}
	for _, o := range objects {
		plan := planFor(plans, o.ms.Name)
		if plan == nil {
			continue
		}
		// The values as raw JSON: their keys stay in the plan's order (uuid first).
		var ops []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(plan.Patch, &ops); err != nil {
			return nil, false, err
		}
		for _, op := range ops {
			if op.Path == "/metadata/resourceVersion" {
				continue
			}
			if err := stream.Add(o.node, op.Path, op.Value); err != nil {
				return nil, false, fmt.Errorf("MachineSet %s: %w", o.ms.Name, err)
			}
		}
	}
	return stream.Bytes()
}

// planFor finds a MachineSet's plan by name: plans are keyed by the objects of another parse.
func planFor(plans map[*machinev1beta1.MachineSet]*Plan, name string) *Plan {
	for ms, p := range plans {
		if ms.Name == name {
			return p
		}
	}
	return nil
}

// checkPatchedFile checks that out holds the same objects as in, each MachineSet with its plan
// applied the way the apiserver applies it, and nothing else changed.
func checkPatchedFile(name string, in, out []byte, plans map[*machinev1beta1.MachineSet]*Plan) error {
	before, err := documentsAsJSON(in)
	if err != nil {
		return err
	}
	after, err := documentsAsJSON(out)
	if err != nil {
		return fmt.Errorf("the output does not parse: %w", err)
	}
	if len(before) != len(after) {
		return fmt.Errorf("%d documents became %d", len(before), len(after))
	}
	objects, _, err := objectsIn(name, in)
	if err != nil {
		return err
	}
	want := map[string][]byte{}
	for _, o := range objects {
		if plan := planFor(plans, o.ms.Name); plan != nil {
			patch, err := jsonpatch.DecodePatch(plan.Patch)
			if err != nil {
				return err
			}
			patched, err := patch.Apply(o.raw)
			if err != nil {
				return err
			}
			want[o.ms.Name] = patched
		}
	}
	got, _, err := objectsIn(name, out)
	if err != nil {
		return err
	}
	for _, o := range got {
		if w, ok := want[o.ms.Name]; ok && !sameJSON(w, o.raw) {
			return fmt.Errorf("MachineSet %s differs from the planned change", o.ms.Name)
		}
	}
	// Everything but the planned MachineSets is unchanged.
	for i := range before {
		if !sameJSON(before[i], after[i]) && !documentHasPlanned(after[i], want) {
			return fmt.Errorf("document %d changed", i+1)
		}
	}
	return nil
}

// documentHasPlanned reports whether a document is, or lists, a MachineSet with a plan.
func documentHasPlanned(doc []byte, planned map[string][]byte) bool {
	var d struct {
		Metadata struct{ Name string } `json:"metadata"`
		Items    []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return false
	}
	if _, ok := planned[d.Metadata.Name]; ok {
		return true
	}
	for _, it := range d.Items {
		if _, ok := planned[it.Metadata.Name]; ok {
			return true
		}
	}
	return false
}

func documentsAsJSON(data []byte) ([][]byte, error) {
	stream, err := yamlpatch.Parse(data)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, root := range stream.Roots() {
		raw, err := nodeJSON(root)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// objectsIn parses data and finds its MachineSets (see objectsOf).
func objectsIn(name string, data []byte) ([]fileObject, int, error) {
	stream, err := yamlpatch.Parse(data)
	if err != nil {
		return nil, 0, &FileError{fmt.Sprintf("%s: not YAML: %v", name, err)}
	}
	return objectsOf(name, stream)
}

// objectsOf finds the MachineSets of a stream: documents of kind MachineSet, and the items of
// Lists. It counts the other documents and items.
func objectsOf(name string, stream *yamlpatch.Stream) ([]fileObject, int, error) {
	var objects []fileObject
	others := 0
	add := func(where string, n *yaml.Node) error {
		raw, err := nodeJSON(n)
		if err != nil {
			return &FileError{fmt.Sprintf("%s: %s: %v", name, where, err)}
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		_ = json.Unmarshal(raw, &meta)
		if meta.Kind != "MachineSet" || meta.APIVersion != machinev1beta1.GroupVersion.String() {
			others++
			return nil
		}
		var ms machinev1beta1.MachineSet
		if err := json.Unmarshal(raw, &ms); err != nil {
			return &FileError{fmt.Sprintf("%s: %s: not a MachineSet: %v", name, where, err)}
		}
		if ms.Name == "" {
			return &FileError{fmt.Sprintf("%s: %s.metadata.name: Required value: a MachineSet needs a name", name, where)}
		}
		if slices.ContainsFunc(objects, func(o fileObject) bool { return o.ms.Name == ms.Name }) {
			return &FileError{fmt.Sprintf("%s: %s.metadata.name: Duplicate value: %q", name, where, ms.Name)}
		}
		objects = append(objects, fileObject{node: n, raw: raw, ms: &ms})
		return nil
	}
	for i, root := range stream.Roots() {
		where := fmt.Sprintf("document %d", i+1)
		if root == nil {
			continue
		}
		var head struct {
			Kind string `yaml:"kind"`
		}
		_ = root.Decode(&head)
		if items := listItems(root); head.Kind == "List" || head.Kind == "MachineSetList" {
			for j, it := range items {
				if err := add(fmt.Sprintf("%s, items[%d]", where, j), it); err != nil {
					return nil, 0, err
				}
			}
			continue
		}
		if err := add(where, root); err != nil {
			return nil, 0, err
		}
	}
	if len(objects) == 0 {
		return nil, 0, &FileError{fmt.Sprintf("%s: no MachineSet (apiVersion %s, kind MachineSet) in it", name, machinev1beta1.GroupVersion)}
	}
	return objects, others, nil
}

func listItems(root *yaml.Node) []*yaml.Node {
	if root.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "items" && root.Content[i+1].Kind == yaml.SequenceNode {
			return root.Content[i+1].Content
		}
	}
	return nil
}

// nodeJSON is a YAML node as JSON, read the way kubectl and the apiserver read YAML
// (sigs.k8s.io/yaml: timestamps stay strings, keys must be strings).
func nodeJSON(n *yaml.Node) ([]byte, error) {
	text, err := yaml.Marshal(n)
	if err != nil {
		return nil, err
	}
	return sigsyaml.YAMLToJSON(text)
}
