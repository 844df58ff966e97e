package machinesets

import (
	"context"
	"encoding/json"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// ControlPlaneFile is the ControlPlaneMachineSet of a file as an attach.FileTarget (and
// attach.FileRemover), for clusters managed from Git, where the masters' set often sits beside
// the worker MachineSets: only the set is changed, the same way as on a cluster, every other
// byte of the file kept. A file has no status, so only what the set's spec says is checked (an
// Inactive set, a Recreate strategy: refused); whether the masters are at rest is the cluster's
// to say when the file is applied.
type ControlPlaneFile struct{}

// PatchControlPlaneFile does what `controlplane patch` does, to the ControlPlaneMachineSet of a
// file (attach.PatchFile); name is the file's name, for messages.
func PatchControlPlaneFile(ctx context.Context, name string, data []byte, opts attach.Options) (*attach.FileResult, error) {
	return attach.PatchFile(ctx, ControlPlaneFile{}, name, data, opts)
}

// FromFile decodes the ControlPlaneMachineSet of the file: one, named cluster, as the platform
// reads only that one.
func (ControlPlaneFile) FromFile(name string, objects []filepatch.Object) ([]attach.FileSelected[*machinev1.ControlPlaneMachineSet], int, error) {
	var picked []attach.FileSelected[*machinev1.ControlPlaneMachineSet]
	for i, o := range objects {
		if !o.Is(machinev1.GroupVersion.String(), ControlPlaneKind) {
			continue
		}
		var cpms machinev1.ControlPlaneMachineSet
		if err := json.Unmarshal(o.JSON, &cpms); err != nil {
			return nil, 0, filepatch.Errorf("%s: %s: not a %s: %v", name, o.Where, ControlPlaneKind, err)
		}
		if cpms.Name != ControlPlaneName {
			return nil, 0, filepatch.Errorf("%s: %s.metadata.name: Invalid value: %q: the platform reads only the %s named %s", name, o.Where, cpms.Name, ControlPlaneKind, ControlPlaneName)
		}
		if len(picked) > 0 {
			return nil, 0, filepatch.Errorf("%s: %s.metadata.name: Duplicate value: %q", name, o.Where, cpms.Name)
		}
		picked = append(picked, attach.FileSelected[*machinev1.ControlPlaneMachineSet]{Selected: attach.Selected[*machinev1.ControlPlaneMachineSet]{Object: &cpms}, Index: i})
	}
	if len(picked) == 0 {
		return nil, 0, filepatch.Errorf("%s: no %s (apiVersion %s, kind %s) in it", name, ControlPlaneKind, machinev1.GroupVersion, ControlPlaneKind)
	}
	return picked, len(picked), nil
}

// Ref names the set in messages.
func (ControlPlaneFile) Ref(cpms *machinev1.ControlPlaneMachineSet) attach.Ref {
	return ControlPlaneTarget{}.Ref(cpms)
}

// PlanFile is Plan from the file alone.
func (ControlPlaneFile) PlanFile(cpms *machinev1.ControlPlaneMachineSet, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	return planControlPlane(cpms, a, now, by, func() error { return controlPlaneSpecSafety(cpms) })
}

// PlanRemoveFile is PlanRemove from the file alone.
func (ControlPlaneFile) PlanRemoveFile(cpms *machinev1.ControlPlaneMachineSet, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	return planControlPlaneRemove(cpms, r, now, by, func() error { return controlPlaneSpecSafety(cpms) })
}

// Output: the set goes to the structured output.
func (ControlPlaneFile) Output(o filepatch.Object) bool {
	return o.Is(machinev1.GroupVersion.String(), ControlPlaneKind)
}
