package machinesets

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// PatchFile does what Patch does, to the MachineSets of a file instead of a cluster, for
// clusters managed from Git (attach.PatchFile): the same plan, so the same change, spliced into
// the text so that only the added lines differ. The file may hold several documents and Lists;
// other objects are kept as they are. name is the file's name, for messages.
func PatchFile(ctx context.Context, name string, data []byte, sel Selection, opts attach.Options) (*attach.FileResult, error) {
	return attach.PatchFile(ctx, Target{Selection: sel}, name, data, opts)
}

// FromFile decodes the MachineSets of a file and picks those of the selection, by name.
func (t Target) FromFile(name string, objects []filepatch.Object) ([]attach.FileSelected[*machinev1beta1.MachineSet], int, error) {
	index := map[*machinev1beta1.MachineSet]int{}
	var sets []*machinev1beta1.MachineSet
	for i, o := range objects {
		if !o.Is(machinev1beta1.GroupVersion.String(), "MachineSet") {
			continue
		}
		var ms machinev1beta1.MachineSet
		if err := json.Unmarshal(o.JSON, &ms); err != nil {
			return nil, 0, filepatch.Errorf("%s: %s: not a MachineSet: %v", name, o.Where, err)
		}
		if ms.Name == "" {
			return nil, 0, filepatch.Errorf("%s: %s.metadata.name: Required value: a MachineSet needs a name", name, o.Where)
		}
		if slices.ContainsFunc(sets, func(s *machinev1beta1.MachineSet) bool { return s.Name == ms.Name }) {
			return nil, 0, filepatch.Errorf("%s: %s.metadata.name: Duplicate value: %q", name, o.Where, ms.Name)
		}
		sets = append(sets, &ms)
		index[&ms] = i
	}
	if len(sets) == 0 {
		return nil, 0, filepatch.Errorf("%s: no MachineSet (apiVersion %s, kind MachineSet) in it", name, machinev1beta1.GroupVersion)
	}
	picked, err := pickMachineSets(sets, t.Selection, "in "+name)
	if err != nil {
		return nil, 0, err
	}
	out := make([]attach.FileSelected[*machinev1beta1.MachineSet], len(picked))
	for i, s := range picked {
		out[i] = attach.FileSelected[*machinev1beta1.MachineSet]{Selected: attach.Selected[*machinev1beta1.MachineSet]{Object: s.ms, Skip: s.skip, Result: &attach.Result{Kind: "MachineSet", Namespace: Namespace, Name: s.ms.Name, Role: Role(s.ms)}}, Index: index[s.ms]}
	}
	return out, len(sets), nil
}

// PlanFile is PlanPatch as attach.PatchFile takes it.
func (Target) PlanFile(ms *machinev1beta1.MachineSet, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	p := PlanPatch(ms, a, now, by)
	return attach.Plan{Result: p.Result(), Change: attach.FileChange{Patch: p.Patch}, Diff: p.Diff}, nil
}

// Output: the MachineSets of the patched file go to the structured output.
func (Target) Output(o filepatch.Object) bool {
	return o.Is(machinev1beta1.GroupVersion.String(), "MachineSet")
}
