package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// FileTarget is a kind's side for files, for clusters managed from Git: the same plans as on a
// cluster, made against the file's objects, spliced into the text (internal/filepatch).
type FileTarget[O any] interface {
	// FromFile decodes, of the objects of file name, those of the kind, and picks those the
	// command selected (a *SelectionError when it names one that is not there). found counts
	// the objects of the kind, picked or not; none is an error of FromFile's.
	FromFile(name string, objects []filepatch.Object) (picked []FileSelected[O], found int, err error)
	// Ref names o in messages.
	Ref(o O) Ref
	// PlanFile plans as Target.Plan does, from the file alone; the Plan's Change is a
	// FileChange.
	PlanFile(o O, a Attachment, now time.Time, by string) (Plan, error)
	// Output reports whether an object of the patched file belongs in the structured output.
	Output(o filepatch.Object) bool
}

// FileSelected is an object of a file a command looks at, with its place among the file's
// objects.
type FileSelected[O any] struct {
	Selected[O]
	Index int
}

// FileChange is what patching an object of a file writes: a JSON patch of the object and,
// maybe, new documents appended to the file (each once, by metadata.name).
type FileChange struct {
	Patch  []byte
	Append []map[string]any
}

// FileResult is what PatchFile made of a file.
type FileResult struct {
	// Output is the file with the objects patched: every other byte is the input's unless
	// Reformatted (a flow-style list, a value replaced: same content, other formatting), and
	// the new documents appended.
	Output      []byte
	Reformatted bool
	// Results says, per object of the kind picked, what was done (ActionPatched: changed in
	// Output).
	Results []Result
	// Appended names the documents appended, in order.
	Appended []string
	// Objects are the objects of Output that belong in the structured output, as JSON, in file
	// order, then the appended ones.
	Objects []json.RawMessage
	// Others counts the documents and List items that are not of the kind, kept as they were.
	Others int
}

// PatchFile does what Patch does, to the objects of a file instead of a cluster's: the same
// plans, so the same change, spliced into the text so that only the added lines differ, checked
// against the plan. name is the file's name, for messages.
func PatchFile[O any](ctx context.Context, target FileTarget[O], name string, data []byte, opts Options) (*FileResult, error) {
	opts, err := opts.Check(ctx)
	if err != nil {
		return nil, err
	}
	f, err := filepatch.Parse(name, data)
	if err != nil {
		return nil, err
	}
	picked, found, err := target.FromFile(name, f.Objects())
	if err != nil {
		return nil, err
	}
	res := &FileResult{Others: len(f.Objects()) - found}
	patches := map[int][]byte{}
	var added []map[string]any
	for _, s := range picked {
		ref := target.Ref(s.Object)
		if s.Skip != "" {
			res.Results = append(res.Results, skipped(ref, s.Selected))
			continue
		}
		p, err := planFileOf(target, s.Object, opts)
		if err != nil {
			return nil, filepatch.Errorf("%s: %v", name, err)
		}
		if p.Result.Action == ActionPatched {
			change, _ := p.Change.(FileChange)
			patches[s.Index] = change.Patch
			for _, doc := range change.Append {
				if !hasDocument(added, doc) {
					added = append(added, doc)
				}
			}
		}
		res.Results = append(res.Results, p.Result)
	}
	var objects []filepatch.Object
	if res.Output, res.Reformatted, objects, err = f.Apply(patches, "/metadata/resourceVersion"); err != nil {
		return nil, err
	}
	for _, o := range objects {
		if target.Output(o) {
			res.Objects = append(res.Objects, o.JSON)
		}
	}
	if len(added) == 0 {
		return res, nil
	}
	if res.Output, err = appendDocuments(name, res.Output, added); err != nil {
		return nil, err
	}
	for _, doc := range added {
		res.Appended = append(res.Appended, nameOf(doc))
		b, _ := json.Marshal(doc)
		res.Objects = append(res.Objects, b)
	}
	return res, nil
}

func nameOf(doc map[string]any) string {
	meta, _ := doc["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

func hasDocument(docs []map[string]any, doc map[string]any) bool {
	for _, d := range docs {
		if nameOf(d) == nameOf(doc) {
			return true
		}
	}
	return false
}

// appendDocuments appends each object as a YAML document, with the file's line ends, and checks
// that the result reads back as the file's objects followed by these.
func appendDocuments(name string, data []byte, docs []map[string]any) ([]byte, error) {
	nl := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		nl = "\r\n"
	}
	var b bytes.Buffer
	b.Write(data)
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		b.WriteString(nl)
	}
	for _, doc := range docs {
		// yaml.v3 does not fold long lines (an annotation's JSON stays on one).
		var y bytes.Buffer
		enc := yaml.NewEncoder(&y)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
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
		return nil, fmt.Errorf("%s: the new documents do not read back, nothing was written: %w", name, err)
	}
	n := len(before.Objects())
	if len(after.Objects()) != n+len(docs) {
		return nil, fmt.Errorf("%s: the new documents do not read back (%d objects, want %d), nothing was written", name, len(after.Objects()), n+len(docs))
	}
	for i, doc := range docs {
		want, _ := json.Marshal(doc)
		if !filepatch.SameJSON(after.Objects()[n+i].JSON, want) {
			return nil, fmt.Errorf("%s: the new document %s does not read back as planned, nothing was written", name, nameOf(doc))
		}
	}
	return b.Bytes(), nil
}
