// Package filepatch applies JSON patches to Kubernetes objects in a YAML file, for clusters
// managed from Git: the objects are the file's documents and the items of its Lists; each
// patch's "add" operations are spliced into the text (internal/yamlpatch) so that only the added
// lines differ, and the result is checked before it is returned: every patched object must read
// back as its JSON with the patch applied (what the apiserver would store), every other object
// unchanged. Where the splice does not give that, the file is written out again as a whole.
package filepatch

import (
	"encoding/json"
	"fmt"
	"reflect"

	yaml "go.yaml.in/yaml/v3"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/internal/yamlpatch"
)

// Error is a file that cannot be read as Kubernetes objects (not YAML, an object that does not
// decode), or whose objects are not what the caller needs.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Errorf is an Error.
func Errorf(format string, a ...any) *Error { return &Error{fmt.Sprintf(format, a...)} }

// Object is one object of a file.
type Object struct {
	// Where says where it is, for messages: "document 2" or "document 1, items[3]".
	Where string
	// APIVersion, Kind and Name are read from it.
	APIVersion, Kind, Name string
	// JSON is the object as kubectl and the apiserver read the YAML.
	JSON []byte
	node *yaml.Node
}

// Is reports whether the object is of that apiVersion and kind.
func (o Object) Is(apiVersion, kind string) bool { return o.APIVersion == apiVersion && o.Kind == kind }

// File is a parsed file.
type File struct {
	name    string
	data    []byte
	stream  *yamlpatch.Stream
	objects []Object
	applied bool
}

// Parse reads a file of documents and Lists (kind List, or any kind ending in List with items).
func Parse(name string, data []byte) (*File, error) {
	stream, err := yamlpatch.Parse(data)
	if err != nil {
		return nil, Errorf("%s: not YAML: %v", name, err)
	}
	f := &File{name: name, data: data, stream: stream}
	add := func(where string, n *yaml.Node) error {
		raw, err := nodeJSON(n)
		if err != nil {
			return Errorf("%s: %s: %v", name, where, err)
		}
		o := Object{Where: where, JSON: raw, node: n}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(raw, &meta)
		o.APIVersion, o.Kind, o.Name = meta.APIVersion, meta.Kind, meta.Metadata.Name
		f.objects = append(f.objects, o)
		return nil
	}
	for i, root := range stream.Roots() {
		if root == nil {
			continue
		}
		where := fmt.Sprintf("document %d", i+1)
		if items := listItems(root); items != nil {
			for j, it := range items {
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
	return f, nil
}

// Objects are the file's objects, in order.
func (f *File) Objects() []Object { return f.objects }

// Apply applies patches (RFC 6902, "add" and "remove" operations only; keyed by the index of the object in
// Objects) to the file, once, and returns the output, whether it had to be written out as a
// whole, and the objects of the output. skip names operation paths to leave out (such as the
// resourceVersion precondition, the apiserver's business). Nothing is returned that does not
// check out.
func (f *File) Apply(patches map[int][]byte, skip ...string) (out []byte, reformatted bool, objects []Object, err error) {
	if f.applied {
		return nil, false, nil, fmt.Errorf("%s: patches were applied already", f.name)
	}
	f.applied = true
	want := map[int][]byte{}
	for i, p := range patches {
		decoded, err := jsonpatch.DecodePatch(p)
		if err != nil {
			return nil, false, nil, err
		}
		if want[i], err = decoded.Apply(f.objects[i].JSON); err != nil {
			return nil, false, nil, fmt.Errorf("%s: %s: %w", f.name, f.objects[i].Where, err)
		}
	}
	in := f
	for _, whole := range []bool{false, true} {
		if whole {
			// The splice did not give what was planned: write the whole file out instead,
			// from a fresh parse (the first one's nodes were edited).
			if in, err = Parse(f.name, f.data); err != nil {
				return nil, false, nil, err
			}
			in.stream.Reformat()
		}
		if out, reformatted, err = in.apply(patches, skip); err == nil {
			if objects, err = check(f.name, in, out, want); err == nil {
				return out, reformatted, objects, nil
			}
		}
		if reformatted {
			break
		}
	}
	return nil, false, nil, fmt.Errorf("%s: the patched file is not what was planned, nothing was written: %w", f.name, err)
}

func (f *File) apply(patches map[int][]byte, skip []string) ([]byte, bool, error) {
	for i, p := range patches {
		// The values as raw JSON: their keys stay in the patch's order.
		var ops []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(p, &ops); err != nil {
			return nil, false, err
		}
		for _, op := range ops {
			if slicesContains(skip, op.Path) {
				continue
			}
			var err error
			switch op.Op {
			case "add":
				err = f.stream.Add(f.objects[i].node, op.Path, op.Value)
			case "remove":
				err = f.stream.Remove(f.objects[i].node, op.Path)
			default:
				return nil, false, fmt.Errorf("%s: only add and remove operations are supported, not %q", f.objects[i].Where, op.Op)
			}
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", f.objects[i].Where, err)
			}
		}
	}
	return f.stream.Bytes()
}

// check parses out and checks that it holds in's objects, in order, the patched ones as want
// has them and every other one unchanged.
func check(name string, in *File, out []byte, want map[int][]byte) ([]Object, error) {
	got, err := Parse(name, out)
	if err != nil {
		return nil, fmt.Errorf("the output does not parse: %w", err)
	}
	if len(got.objects) != len(in.objects) {
		return nil, fmt.Errorf("%d objects became %d", len(in.objects), len(got.objects))
	}
	for i, o := range got.objects {
		expected, patched := want[i]
		if !patched {
			expected = in.objects[i].JSON
		}
		if !SameJSON(expected, o.JSON) {
			return nil, fmt.Errorf("%s (%s %s) is not what was planned", in.objects[i].Where, in.objects[i].Kind, in.objects[i].Name)
		}
	}
	return got.objects, nil
}

// SameJSON reports whether two JSON documents hold the same values.
func SameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// listItems are the items of a List document (kind List or <Kind>List with an items sequence),
// nil for any other document.
func listItems(root *yaml.Node) []*yaml.Node {
	if root.Kind != yaml.MappingNode {
		return nil
	}
	var kind string
	var items *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "kind":
			kind = root.Content[i+1].Value
		case "items":
			items = root.Content[i+1]
		}
	}
	if items == nil || items.Kind != yaml.SequenceNode || len(kind) < 4 || kind[len(kind)-4:] != "List" {
		return nil
	}
	return items.Content
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
