package machinesets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/textdiff"
	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

// PlanRemove is what `patch --remove` does to a MachineSet (attach.Remover): of the entries of
// its providerSpec, those manila-setup writes (networks[] and securityGroups[] by uuid) on the
// networks and security groups its record says it added are removed; every other entry stays:
// a network the user added by hand, and one the user names another way (by filter.id, or as a
// ports[] entry) even when the record names its network. The record is rewritten without them,
// or removed when nothing recorded is left.
func (t Target) PlanRemove(_ context.Context, ms *machinev1beta1.MachineSet, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	return t.PlanRemoveFile(ms, r, now, by)
}

// PlanRemoveFile is PlanRemove as attach.PatchFile takes it.
func (t Target) PlanRemoveFile(ms *machinev1beta1.MachineSet, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	res := attach.Result{Kind: "MachineSet", Namespace: Namespace, Name: ms.Name, Role: Role(ms), ClusterAPI: ClusterAPIAuthoritative(ms)}
	if why := removeSkip(ms); why != "" {
		res.Action, res.Reason = attach.ActionSkipped, why
		return attach.Plan{Result: res}, nil
	}
	spec, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		var notOpenStack *NotOpenStackError
		res.Action, res.Reason = attach.ActionSkipped, err.Error()
		if !errors.As(err, &notOpenStack) && !errors.Is(err, errNoProviderSpec) {
			res.Action = attach.ActionInvalid
		}
		return attach.Plan{Result: res}, nil
	}
	d, err := r.Decide(t.Ref(ms), attach.RecordIn(ms.Annotations), spec.hasNetworkByUUID, spec.hasGroupByUUID, now, by)
	if err != nil {
		return attach.Plan{}, err
	}
	res = attach.RemovedResult(res, d)
	if !d.Changed() {
		return attach.Plan{Result: res}, nil
	}
	patch, err := removePatch(ms, spec, d)
	if err != nil {
		return attach.Plan{}, fmt.Errorf("MachineSet %s/%s: %w", Namespace, ms.Name, err)
	}
	p := &Plan{Name: ms.Name, ms: ms, Patch: patch}
	diff := func() string {
		before, after, err := p.Preview()
		if err != nil {
			return fmt.Sprintf("(no preview: the patch does not apply locally: %v)\n", err)
		}
		d := textdiff.Unified("MachineSet "+ms.Name+" "+providerSpecField, "MachineSet "+ms.Name+" "+providerSpecField+" (patched)", []byte(before), []byte(after))
		if d == "" { // only the record changes
			d = recordDiff(ms.Name, ms.Annotations, patch)
		}
		return d
	}
	return attach.Plan{Result: res, Change: attach.FileChange{Patch: patch}, Diff: diff}, nil
}

// removeSkip says why a MachineSet is left alone by a removal: as by an attachment, the
// control plane and the sets another API is authoritative for.
func removeSkip(ms *machinev1beta1.MachineSet) string {
	if IsControlPlane(Role(ms)) {
		return fmt.Sprintf("control-plane MachineSet (role %s): control-plane machines are never touched", Role(ms))
	}
	return NotMachineAPIAuthoritative(ms)
}

// removePatch is the JSON patch that removes d's entries from the providerSpec and writes what
// is left of the record, with the resourceVersion as precondition.
func removePatch(ms *machinev1beta1.MachineSet, spec *ProviderSpec, d attach.Detach) ([]byte, error) {
	return removePatchAt(providerSpecPointer, ms.ObjectMeta, spec, d)
}

// removePatchAt is removePatch for the providerSpec at pointer of an object with meta.
func removePatchAt(pointer string, meta metav1.ObjectMeta, spec *ProviderSpec, d attach.Detach) ([]byte, error) {
	var ops []jsonPatchOp
	if meta.ResourceVersion != "" {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/resourceVersion", Value: meta.ResourceVersion})
	}
	for _, key := range []string{"networks", "ports", "securityGroups"} {
		more, err := removeEntries(pointer, spec.Fields, key, func(raw json.RawMessage) bool { return onRemoved(key, raw, d) })
		if err != nil {
			return nil, err
		}
		ops = append(ops, more...)
	}
	for _, op := range d.RecordOps(meta.Annotations) {
		ops = append(ops, jsonPatchOp(op))
	}
	return json.Marshal(ops)
}

// onRemoved reports whether an entry of the providerSpec's list key (networks, securityGroups)
// names by uuid a network or security group d removes.
func onRemoved(key string, raw json.RawMessage, d attach.Detach) bool {
	var e struct {
		UUID       string `json:"uuid"`
		NetworkID  string `json:"networkID"`
		NameSuffix string `json:"nameSuffix"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return false
	}
	ids, id := d.Networks, e.UUID
	switch key {
	case "securityGroups":
		ids = d.SecurityGroups
	case "ports":
		// Only the ports[] entries manila-setup wrote: a port the user wrote on the same
		// network stays.
		if e.NameSuffix != storagePortSuffix(e.NetworkID) {
			return false
		}
		id = e.NetworkID
	}
	return slices.ContainsFunc(ids, func(x string) bool { return attachment.SameID(id, x) })
}

// hasNetworkByUUID reports whether the providerSpec has an entry for network id in a form
// manila-setup writes, the only ones it removes: networks[] by uuid, or (primary NIC a ports[]
// entry) a ports[] entry with its nameSuffix.
func (p *ProviderSpec) hasNetworkByUUID(id string) bool {
	return slices.ContainsFunc(p.Spec.Networks, func(n machinev1alpha1.NetworkParam) bool { return attachment.SameID(n.UUID, id) }) ||
		slices.ContainsFunc(p.Spec.Ports, func(port machinev1alpha1.PortOpts) bool {
			return attachment.SameID(port.NetworkID, id) && port.NameSuffix == storagePortSuffix(port.NetworkID)
		})
}

// hasGroupByUUID reports whether securityGroups[] has an entry with uuid id.
func (p *ProviderSpec) hasGroupByUUID(id string) bool {
	return slices.ContainsFunc(p.Spec.SecurityGroups, func(g machinev1alpha1.SecurityGroupParam) bool { return attachment.SameID(g.UUID, id) })
}

// removeEntries is the remove operations of the entries of the list key that drop picks, the
// last first so that the indices hold; the key itself when no entry is left.
func removeEntries(pointer string, fields map[string]json.RawMessage, key string, drop func(json.RawMessage) bool) ([]jsonPatchOp, error) {
	raw, ok := fields[key]
	if !ok {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, nil //nolint:nilerr // not a list: nothing of ours in it
	}
	var picked []int
	for i, it := range items {
		if drop(it) {
			picked = append(picked, i)
		}
	}
	path := pointer + "/" + key
	switch {
	case len(picked) == 0:
		return nil, nil
	case len(picked) == len(items):
		return []jsonPatchOp{{Op: "remove", Path: path}}, nil
	}
	ops := make([]jsonPatchOp, 0, len(picked))
	for i := len(picked) - 1; i >= 0; i-- {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: path + "/" + strconv.Itoa(picked[i])})
	}
	return ops, nil
}

// recordDiff shows the change of the record annotation, when only it changes.
func recordDiff(name string, annotations map[string]string, patch []byte) string {
	var ops []jsonPatchOp
	_ = json.Unmarshal(patch, &ops)
	after := map[string]any{}
	for _, op := range ops {
		if op.Op == "add" && op.Path == "/metadata/annotations/"+escapePointer(attach.Annotation) {
			after[attach.Annotation] = op.Value
		}
	}
	before := map[string]any{attach.Annotation: annotations[attach.Annotation]}
	return attach.YAMLDiff("MachineSet "+name+" metadata.annotations", before, after)
}
