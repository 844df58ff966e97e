package machinesets

import (
	"context"
	"encoding/json"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/manila-setup/manila-setup/internal/filepatch"
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

// PatchFile does what Patch does, to the MachineSets of a file instead of a cluster, for
// clusters managed from Git: the same plan, so the same change (appended networks and security
// groups, the attachment annotation), spliced into the text so that only the added lines differ
// (internal/filepatch, which checks the result against the plan). The file may hold several
// documents and Lists; other objects are kept as they are. name is the file's name, for
// messages.
func PatchFile(ctx context.Context, name string, data []byte, opts PatchOptions) (*FileResult, error) {
	now, err := opts.check(ctx)
	if err != nil {
		return nil, err
	}
	f, err := filepatch.Parse(name, data)
	if err != nil {
		return nil, err
	}
	index := map[*machinev1beta1.MachineSet]int{}
	var sets []*machinev1beta1.MachineSet
	for i, o := range f.Objects() {
		if !o.Is(machinev1beta1.GroupVersion.String(), "MachineSet") {
			continue
		}
		var ms machinev1beta1.MachineSet
		if err := json.Unmarshal(o.JSON, &ms); err != nil {
			return nil, filepatch.Errorf("%s: %s: not a MachineSet: %v", name, o.Where, err)
		}
		if ms.Name == "" {
			return nil, filepatch.Errorf("%s: %s.metadata.name: Required value: a MachineSet needs a name", name, o.Where)
		}
		if slices.ContainsFunc(sets, func(s *machinev1beta1.MachineSet) bool { return s.Name == ms.Name }) {
			return nil, filepatch.Errorf("%s: %s.metadata.name: Duplicate value: %q", name, o.Where, ms.Name)
		}
		sets = append(sets, &ms)
		index[&ms] = i
	}
	if len(sets) == 0 {
		return nil, filepatch.Errorf("%s: no MachineSet (apiVersion %s, kind MachineSet) in it", name, machinev1beta1.GroupVersion)
	}
	picked, err := pickMachineSets(sets, opts.Selection, "in "+name)
	if err != nil {
		return nil, err
	}
	patches := map[int][]byte{}
	res := &FileResult{Others: len(f.Objects()) - len(sets)}
	for _, s := range picked {
		r := PatchResult{Name: s.ms.Name, Role: Role(s.ms)}
		if s.skip != "" {
			r.Action, r.Reason = ActionSkipped, s.skip
		} else if plan := PlanPatch(s.ms, opts.Attachment, now(), opts.By); plan.result(&r, false) {
			r.Action, patches[index[s.ms]] = ActionPatched, plan.Patch
		}
		res.Results = append(res.Results, r)
	}
	var objects []filepatch.Object
	res.Output, res.Reformatted, objects, err = f.Apply(patches, "/metadata/resourceVersion")
	if err != nil {
		return nil, err
	}
	res.Objects = filepatch.JSONOf(objects, machinev1beta1.GroupVersion.String(), "MachineSet")
	return res, nil
}
