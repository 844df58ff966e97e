package machinesets

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

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

// fileEntry is one object of a file: a document, or an item of a List. ms is set for a
// MachineSet.
type fileEntry struct {
	node *yaml.Node
	raw  []byte // as JSON
	ms   *machinev1beta1.MachineSet
}

// fileContent is a parsed file: its stream and every object in it, in order.
type fileContent struct {
	stream  *yamlpatch.Stream
	entries []fileEntry
}

func (f *fileContent) machineSets() []*machinev1beta1.MachineSet {
	var out []*machinev1beta1.MachineSet
	for _, e := range f.entries {
		if e.ms != nil {
			out = append(out, e.ms)
		}
	}
	return out
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
	in, err := parseFile(name, data)
	if err != nil {
		return nil, err
	}
	sets := in.machineSets()
	picked, err := pickMachineSets(sets, opts.Selection, "in "+name)
	if err != nil {
		return nil, err
	}
	plans := map[string]*Plan{}
	res := &FileResult{Others: len(in.entries) - len(sets)}
	for _, s := range picked {
		r := PatchResult{Name: s.ms.Name, Role: Role(s.ms)}
		if s.skip != "" {
			r.Action, r.Reason = ActionSkipped, s.skip
		} else if plan := PlanPatch(s.ms, opts.Attachment, now(), opts.By); plan.result(&r, false) {
			r.Action, plans[s.ms.Name] = ActionPatched, plan
		}
		res.Results = append(res.Results, r)
	}
	want, err := plannedObjects(in, plans)
	if err != nil {
		return nil, err
	}

	var out *fileContent
	res.Output, res.Reformatted, err = applyPlans(in, plans, false)
	if err == nil {
		out, err = checkPatchedFile(name, in, res.Output, want)
	}
	if err != nil && !res.Reformatted {
		// The splice did not give what was planned: write the whole file out instead, from a
		// fresh parse (the first one's nodes were edited).
		if in, err = parseFile(name, data); err == nil {
			res.Output, res.Reformatted, err = applyPlans(in, plans, true)
		}
		if err == nil {
			out, err = checkPatchedFile(name, in, res.Output, want)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the patched file is not what was planned, nothing was written: %w", name, err)
	}
	for _, e := range out.entries {
		if e.ms != nil {
			res.Objects = append(res.Objects, e.raw)
		}
	}
	return res, nil
}

// FileError is a file that cannot be patched as it is (not YAML, a MachineSet that does not
// decode, no MachineSet at all).
type FileError struct{ msg string }

func (e *FileError) Error() string { return e.msg }

// plannedObjects is each planned MachineSet as the apiserver would store it: its JSON with the
// plan's JSON patch applied.
func plannedObjects(in *fileContent, plans map[string]*Plan) (map[string][]byte, error) {
	want := map[string][]byte{}
	for _, e := range in.entries {
		plan := plans[nameOf(e)]
		if e.ms == nil || plan == nil {
			continue
		}
		patch, err := jsonpatch.DecodePatch(plan.Patch)
		if err != nil {
			return nil, err
		}
		if want[e.ms.Name], err = patch.Apply(e.raw); err != nil {
			return nil, err
		}
	}
	return want, nil
}

func nameOf(e fileEntry) string {
	if e.ms == nil {
		return ""
	}
	return e.ms.Name
}

// applyPlans applies each plan's JSON patch to its MachineSet in the parsed file (the
// resourceVersion check is the apiserver's business: a file has no newer version).
func applyPlans(in *fileContent, plans map[string]*Plan, reformat bool) ([]byte, bool, error) {
	if reformat {
		in.stream.Reformat()
	}
	for _, e := range in.entries {
		plan := plans[nameOf(e)]
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
			if err := in.stream.Add(e.node, op.Path, op.Value); err != nil {
				return nil, false, fmt.Errorf("MachineSet %s: %w", e.ms.Name, err)
			}
		}
	}
	return in.stream.Bytes()
}

// checkPatchedFile parses the output and checks that it holds the input's objects, in order,
// each planned MachineSet as want has it and every other object unchanged.
func checkPatchedFile(name string, in *fileContent, output []byte, want map[string][]byte) (*fileContent, error) {
	out, err := parseFile(name, output)
	if err != nil {
		return nil, fmt.Errorf("the output does not parse: %w", err)
	}
	if len(out.entries) != len(in.entries) {
		return nil, fmt.Errorf("%d objects became %d", len(in.entries), len(out.entries))
	}
	for i, e := range out.entries {
		expected, planned := want[nameOf(e)]
		if !planned {
			expected = in.entries[i].raw
		}
		if nameOf(e) != nameOf(in.entries[i]) || !sameJSON(expected, e.raw) {
			return nil, fmt.Errorf("object %d (%s) is not what was planned", i+1, nameOf(in.entries[i]))
		}
	}
	return out, nil
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// parseFile parses a file and finds its objects: documents, and the items of Lists (kind List
// or MachineSetList); those of apiVersion machine.openshift.io/v1beta1, kind MachineSet, are
// decoded. At least one MachineSet, each named once.
func parseFile(name string, data []byte) (*fileContent, error) {
	stream, err := yamlpatch.Parse(data)
	if err != nil {
		return nil, &FileError{fmt.Sprintf("%s: not YAML: %v", name, err)}
	}
	f := &fileContent{stream: stream}
	seen := map[string]bool{}
	add := func(where string, n *yaml.Node) error {
		raw, err := nodeJSON(n)
		if err != nil {
			return &FileError{fmt.Sprintf("%s: %s: %v", name, where, err)}
		}
		e := fileEntry{node: n, raw: raw}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		_ = json.Unmarshal(raw, &meta)
		if meta.Kind == "MachineSet" && meta.APIVersion == machinev1beta1.GroupVersion.String() {
			var ms machinev1beta1.MachineSet
			if err := json.Unmarshal(raw, &ms); err != nil {
				return &FileError{fmt.Sprintf("%s: %s: not a MachineSet: %v", name, where, err)}
			}
			if ms.Name == "" {
				return &FileError{fmt.Sprintf("%s: %s.metadata.name: Required value: a MachineSet needs a name", name, where)}
			}
			if seen[ms.Name] {
				return &FileError{fmt.Sprintf("%s: %s.metadata.name: Duplicate value: %q", name, where, ms.Name)}
			}
			seen[ms.Name], e.ms = true, &ms
		}
		f.entries = append(f.entries, e)
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
		if head.Kind == "List" || head.Kind == "MachineSetList" {
			for j, it := range listItems(root) {
				if err := add(fmt.Sprintf("%s, items[%d]", where, j), it); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(where, root); err != nil {
			return nil, err
		}
	}
	if len(seen) == 0 {
		return nil, &FileError{fmt.Sprintf("%s: no MachineSet (apiVersion %s, kind MachineSet) in it", name, machinev1beta1.GroupVersion)}
	}
	return f, nil
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
