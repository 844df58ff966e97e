package machinesets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/internal/textdiff"
)

// The masters of an installer-provisioned cluster are changed through its
// ControlPlaneMachineSet (machine.openshift.io/v1, "cluster" in openshift-machine-api): the
// control-plane-machine-set operator compares each master's providerSpec with the template's
// and replaces the masters that differ, as its strategy says. The rules below are those of its
// public source (openshift/cluster-control-plane-machine-set-operator): RollingUpdate (the
// default) replaces one master at a time with a surge of one; OnDelete replaces a master only
// once its Machine is deleted; Recreate is declared but not implemented (the operator only
// reports Degraded); an Inactive set is rebuilt from the newest master by the operator's
// generator, so that an edit that does not activate it is undone; and a Degraded operator does
// nothing.
const (
	// ControlPlaneName is the name of the one ControlPlaneMachineSet of a cluster.
	ControlPlaneName = "cluster"
	// ControlPlaneKind names it in results and messages.
	ControlPlaneKind = "ControlPlaneMachineSet"
	// controlPlaneSpecPointer and controlPlaneSpecField are where its template's providerSpec
	// is, as a JSON pointer and as a field path for messages.
	controlPlaneSpecPointer = "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value"
	controlPlaneSpecField   = "spec.template.machines_v1beta1_machine_openshift_io.spec.providerSpec.value"
)

// ControlPlaneRefusedError says why the ControlPlaneMachineSet is not changed, before anything
// is written. Forceable tells whether --force overrules it (never for an Inactive set).
type ControlPlaneRefusedError struct {
	Reason    string
	Forceable bool
}

func (e *ControlPlaneRefusedError) Error() string {
	s := "not changed: " + e.Reason
	if e.Forceable {
		s += "; --force changes it anyway"
	}
	return s
}

// ControlPlaneSafety says whether the ControlPlaneMachineSet may be changed now, and returns a
// *ControlPlaneRefusedError when not. force overrules the checks of a set that is busy or
// degraded, never those of a set whose change would be undone or never rolled.
func ControlPlaneSafety(cpms *machinev1.ControlPlaneMachineSet, force bool) error {
	if err := controlPlaneSpecSafety(cpms); err != nil {
		return err
	}
	if busy := controlPlaneBusy(cpms); busy != "" {
		if force {
			return nil
		}
		return &ControlPlaneRefusedError{Reason: busy, Forceable: true}
	}
	return nil
}

// controlPlaneSpecSafety is what ControlPlaneSafety reads of the set's spec alone (all a file
// has): a change to an Inactive set is undone, one to a set of another machine type or of the
// Recreate strategy is never rolled out. None of it is forceable.
func controlPlaneSpecSafety(cpms *machinev1.ControlPlaneMachineSet) error {
	if cpms.Spec.State != machinev1.ControlPlaneMachineSetStateActive {
		return &ControlPlaneRefusedError{Reason: fmt.Sprintf("its state is %s: the control-plane-machine-set operator rebuilds the template of an inactive set from the newest master, which would undo the change. "+
			"Activating it (spec.state: Active) is a decision of its own: the operator then replaces every master whose providerSpec differs from the template", orInactive(cpms.Spec.State))}
	}
	if cpms.Spec.Template.MachineType != machinev1.OpenShiftMachineV1Beta1MachineType || cpms.Spec.Template.OpenShiftMachineV1Beta1Machine == nil {
		return &ControlPlaneRefusedError{Reason: fmt.Sprintf("spec.template.machineType is %q, not %s: its masters are not Machine API Machines", cpms.Spec.Template.MachineType, machinev1.OpenShiftMachineV1Beta1MachineType)}
	}
	switch s := ControlPlaneStrategy(cpms); s {
	case machinev1.RollingUpdate, machinev1.OnDelete:
	case machinev1.Recreate:
		return &ControlPlaneRefusedError{Reason: "spec.strategy.type is Recreate, which the control-plane-machine-set operator declares but does not implement (it reports Degraded and replaces nothing); set RollingUpdate or OnDelete first"}
	default:
		return &ControlPlaneRefusedError{Reason: fmt.Sprintf("spec.strategy.type: Unsupported value: %q: supported values: RollingUpdate, OnDelete", s)}
	}
	return nil
}

func orInactive(s machinev1.ControlPlaneMachineSetState) string {
	if s == "" {
		return string(machinev1.ControlPlaneMachineSetStateInactive)
	}
	return string(s)
}

// ControlPlaneStrategy is the set's strategy, RollingUpdate when none is given (the API's default).
func ControlPlaneStrategy(cpms *machinev1.ControlPlaneMachineSet) machinev1.ControlPlaneMachineSetStrategyType {
	if cpms.Spec.Strategy.Type == "" {
		return machinev1.RollingUpdate
	}
	return cpms.Spec.Strategy.Type
}

// controlPlaneBusy says why the masters are not at rest ("" when they are): the operator has not
// seen the current spec, a master is not up to date or not ready, or the operator is degraded or
// progressing. A change on top of that would be rolled out with a master already missing.
func controlPlaneBusy(cpms *machinev1.ControlPlaneMachineSet) string {
	want := int32(3)
	if cpms.Spec.Replicas != nil {
		want = *cpms.Spec.Replicas
	}
	st := cpms.Status
	var why []string
	if st.ObservedGeneration != cpms.Generation {
		why = append(why, fmt.Sprintf("the operator has not seen its current spec yet (generation %d, observed %d)", cpms.Generation, st.ObservedGeneration))
	}
	if st.Replicas != want || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.UnavailableReplicas != 0 {
		why = append(why, fmt.Sprintf("its masters are not at rest (replicas %d of %d, updated %d, ready %d, unavailable %d): an update is under way or a master is missing",
			st.Replicas, want, st.UpdatedReplicas, st.ReadyReplicas, st.UnavailableReplicas))
	}
	for _, c := range []string{"Degraded", "Progressing"} {
		if cond := meta.FindStatusCondition(st.Conditions, c); cond != nil && cond.Status == metav1.ConditionTrue {
			why = append(why, fmt.Sprintf("condition %s is True (%s: %s)", c, cond.Reason, cond.Message))
		}
	}
	return strings.Join(why, "; ")
}

// ControlPlaneTarget is the cluster's ControlPlaneMachineSet as an attach.Target (and
// attach.Remover): one object, checked by ControlPlaneSafety before a change is planned (a set
// that already has what is asked is reported unchanged, whatever its state).
type ControlPlaneTarget struct {
	Client machineclient.Interface
	// Operators reads the ClusterOperators the masters' change leans on
	// (ControlPlaneOperators); nil: not checked.
	Operators dynamic.Interface
	// Force overrules what ControlPlaneSafety lets it overrule, and the quotas.
	Force bool
	// Room checks that the project has room for one more server of the flavor with that many
	// ports (openstack.Client.RoomForServer); nil: not checked (no cloud given).
	Room func(ctx context.Context, n openstack.ServerNeeds) ([]openstack.QuotaUse, error)
}

// roomForOneMore refuses an attachment when the project's quotas cannot hold the one more
// master a replacement makes: RollingUpdate creates the new master before it deletes the old,
// and under OnDelete the etcd operator's hook keeps the deleted one until its replacement has
// joined etcd. The new master has a port per networks and ports entry of the template, the
// storage network's among them. A root volume's Cinder quota is not read.
func (t ControlPlaneTarget) roomForOneMore(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, added int) error {
	if t.Room == nil || t.Force {
		return nil
	}
	spec, skip := controlPlaneSpec(cpms, controlPlaneResult(cpms))
	if skip != nil {
		return nil
	}
	_, err := t.Room(ctx, openstack.ServerNeeds{Flavor: spec.Spec.Flavor, Ports: len(spec.Spec.Networks) + len(spec.Spec.Ports) + added})
	var short *openstack.QuotaShortfall
	switch {
	case errors.As(err, &short):
		return &ControlPlaneRefusedError{Forceable: true, Reason: fmt.Sprintf("replacing a master makes one more first (flavor %s, %d ports), and %s: raise them (openstack quota set), or free room",
			spec.Spec.Flavor, len(spec.Spec.Networks)+len(spec.Spec.Ports)+added, short.Error())}
	case err != nil:
		return fmt.Errorf("reading the quotas for one more master (--force skips it): %w", err)
	}
	return nil
}

// safety is ControlPlaneSafety and then, unless forced, the health of ControlPlaneOperators.
func (t ControlPlaneTarget) safety(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet) error {
	if err := ControlPlaneSafety(cpms, t.Force); err != nil || t.Force {
		return err
	}
	busy, err := controlPlaneOperatorsBusy(ctx, t.Operators)
	if err != nil {
		return err
	}
	if busy != "" {
		return &ControlPlaneRefusedError{Reason: busy, Forceable: true}
	}
	return nil
}

// GetControlPlane reads the ControlPlaneMachineSet; a cluster without one gets an
// attach.SelectionError that says what that means.
func GetControlPlane(ctx context.Context, client machineclient.Interface) (*machinev1.ControlPlaneMachineSet, error) {
	cpms, err := client.MachineV1().ControlPlaneMachineSets(Namespace).Get(ctx, ControlPlaneName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, attach.NewSelectionError(fmt.Sprintf("no %s %s in namespace %s: the masters are not managed by one (a cluster installed without it, or on a platform without it), so they cannot be changed on Day 2 this way",
			ControlPlaneKind, ControlPlaneName, Namespace))
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading %s %s/%s was refused: %s", ControlPlaneKind, Namespace, ControlPlaneName, attach.APIMessage(err))
	case err != nil:
		return nil, fmt.Errorf("reading %s %s/%s: %w", ControlPlaneKind, Namespace, ControlPlaneName, err)
	}
	return cpms, nil
}

// Select reads the set.
func (t ControlPlaneTarget) Select(ctx context.Context) ([]attach.Selected[*machinev1.ControlPlaneMachineSet], error) {
	cpms, err := GetControlPlane(ctx, t.Client)
	if err != nil {
		return nil, err
	}
	return []attach.Selected[*machinev1.ControlPlaneMachineSet]{{Object: cpms}}, nil
}

// Ref names the set in messages.
func (ControlPlaneTarget) Ref(*machinev1.ControlPlaneMachineSet) attach.Ref {
	return attach.Ref{Kind: ControlPlaneKind, Namespace: Namespace, Name: ControlPlaneName, Resource: "controlplanemachinesets.machine.openshift.io"}
}

// Replicas is the number of masters (attach.Counter).
func (ControlPlaneTarget) Replicas(cpms *machinev1.ControlPlaneMachineSet) int {
	if cpms.Spec.Replicas == nil {
		return 3
	}
	return int(*cpms.Spec.Replicas)
}

// controlPlaneResult is the result of the set before a plan says what is done to it.
func controlPlaneResult(cpms *machinev1.ControlPlaneMachineSet) attach.Result {
	return attach.Result{Kind: ControlPlaneKind, Namespace: Namespace, Name: cpms.Name, Role: "master"}
}

// controlPlaneSpec decodes the template's providerSpec; a result says why the set is left
// alone when it is not an OpenstackProviderSpec (skipped) or does not decode (invalid).
func controlPlaneSpec(cpms *machinev1.ControlPlaneMachineSet, res attach.Result) (*ProviderSpec, *attach.Result) {
	var raw []byte
	if m := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine; m != nil && m.Spec.ProviderSpec.Value != nil {
		raw = m.Spec.ProviderSpec.Value.Raw
	}
	if len(strings.TrimSpace(string(raw))) == 0 || strings.TrimSpace(string(raw)) == "null" {
		res.Action, res.Reason = attach.ActionSkipped, "it has no "+controlPlaneSpecField
		return nil, &res
	}
	spec, err := decodeProviderSpecAt(raw, controlPlaneSpecField)
	if err != nil {
		var notOpenStack *NotOpenStackError
		res.Action, res.Reason = attach.ActionInvalid, err.Error()
		if errors.As(err, &notOpenStack) {
			res.Action = attach.ActionSkipped
		}
		return nil, &res
	}
	return spec, nil
}

// Plan says what attaching a to the set does: the networks and groups it lacks, appended as
// the installer's controlPlane.platform.openstack.additionalNetworkIDs and
// additionalSecurityGroupIDs would have written them (after the machine network's entry and
// the master group), and the record.
func (t ControlPlaneTarget) Plan(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	plan, err := planControlPlane(cpms, a, now, by, func() error { return t.safety(ctx, cpms) })
	if err != nil || plan.Result.Action != attach.ActionPatched {
		return plan, err
	}
	if err := t.roomForOneMore(ctx, cpms, len(plan.Result.AddedNetworks)); err != nil {
		return attach.Plan{}, err
	}
	return plan, nil
}

// planControlPlane is Plan, with safety deciding whether a change may be made.
func planControlPlane(cpms *machinev1.ControlPlaneMachineSet, a attach.Attachment, now time.Time, by string, safety func() error) (attach.Plan, error) {
	res := controlPlaneResult(cpms)
	spec, skip := controlPlaneSpec(cpms, res)
	if skip != nil {
		return attach.Plan{Result: *skip}, nil
	}
	res.AddedNetworks, res.AddedSecurityGroups = spec.lacks(a)
	warnings := portSecurityWarnings(spec, controlPlaneSpecField, a, res.AddedNetworks)
	if len(res.AddedNetworks) == 0 && len(res.AddedSecurityGroups) == 0 {
		res.Action, res.Reason, res.Warning = attach.ActionUnchanged, "already attached", strings.Join(warnings, "; ")
		return attach.Plan{Result: res}, nil
	}
	if err := safety(); err != nil {
		return attach.Plan{}, err
	}
	res.Action = attach.ActionPatched
	res.Warning = strings.Join(append(warnings, ControlPlaneNext(cpms)), "; ")
	patch := attachPatch(spec, controlPlaneSpecPointer, cpms.ObjectMeta, a, res.AddedNetworks, res.AddedSecurityGroups, now, by)
	return attach.Plan{Result: res, Change: attach.FileChange{Patch: patch}, Diff: controlPlaneDiff(cpms, patch)}, nil
}

// PlanRemove is what `controlplane patch --remove` does: as for a MachineSet (PlanRemoveFile),
// the entries manila-setup wrote on what its record says it added, and nothing else.
func (t ControlPlaneTarget) PlanRemove(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	return planControlPlaneRemove(cpms, r, now, by, func() error { return t.safety(ctx, cpms) })
}

// planControlPlaneRemove is PlanRemove, with safety deciding whether a change may be made.
func planControlPlaneRemove(cpms *machinev1.ControlPlaneMachineSet, r attach.Removal, now time.Time, by string, safety func() error) (attach.Plan, error) {
	res := controlPlaneResult(cpms)
	spec, skip := controlPlaneSpec(cpms, res)
	if skip != nil {
		return attach.Plan{Result: *skip}, nil
	}
	d, err := r.Decide(ControlPlaneTarget{}.Ref(cpms), attach.RecordIn(cpms.Annotations), spec.hasNetworkByUUID, spec.hasGroupByUUID, now, by)
	if err != nil {
		return attach.Plan{}, err
	}
	res = attach.RemovedResult(res, d)
	if !d.Changed() {
		return attach.Plan{Result: res}, nil
	}
	if err := safety(); err != nil {
		return attach.Plan{}, err
	}
	patch, err := removePatchAt(controlPlaneSpecPointer, cpms.ObjectMeta, spec, d)
	if err != nil {
		return attach.Plan{}, fmt.Errorf("%s %s/%s: %w", ControlPlaneKind, Namespace, cpms.Name, err)
	}
	if len(d.Networks) > 0 || len(d.SecurityGroups) > 0 {
		res.Warning = ControlPlaneNext(cpms)
	}
	return attach.Plan{Result: res, Change: attach.FileChange{Patch: patch}, Diff: controlPlaneDiff(cpms, patch)}, nil
}

// ControlPlaneNext says what happens to the masters once the template changed.
func ControlPlaneNext(cpms *machinev1.ControlPlaneMachineSet) string {
	n := ControlPlaneTarget{}.Replicas(cpms)
	if ControlPlaneStrategy(cpms) == machinev1.OnDelete {
		return fmt.Sprintf("strategy OnDelete: no master changes until its Machine is deleted; delete the %d master Machines one at a time, each after the previous one's replacement is Ready and etcd has its %d members again", n, n)
	}
	return fmt.Sprintf("strategy RollingUpdate: the control-plane-machine-set operator now replaces the %d masters one at a time (a new master first, then the old one goes)", n)
}

// controlPlaneDiff is the diff of the template's providerSpec, computed on demand.
func controlPlaneDiff(cpms *machinev1.ControlPlaneMachineSet, patch []byte) func() string {
	return func() string {
		var before []byte
		if m := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine; m != nil && m.Spec.ProviderSpec.Value != nil {
			before = m.Spec.ProviderSpec.Value.Raw
		}
		after, err := applyAt(cpms, patch, controlPlaneSpecPointer)
		if err != nil {
			return fmt.Sprintf("(no preview: the patch does not apply locally: %v)\n", err)
		}
		name := ControlPlaneKind + " " + cpms.Name + " " + controlPlaneSpecField
		d := textdiff.Unified(name, name+" (patched)", []byte(attach.ToYAML(before)), []byte(attach.ToYAML(after)))
		if d == "" { // only the record changes
			d = recordDiff(cpms.Name, cpms.Annotations, patch)
		}
		return d
	}
}

// Write sends the plan's JSON patch, after a server-side dry run of it: the API's own checks
// of the set (its CEL rules) refuse a bad change before anything is stored.
func (t ControlPlaneTarget) Write(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, p attach.Plan) error {
	change := p.Change.(attach.FileChange)
	sets := t.Client.MachineV1().ControlPlaneMachineSets(Namespace)
	if _, err := sets.Patch(ctx, cpms.Name, types.JSONPatchType, change.Patch, metav1.PatchOptions{FieldManager: "manila-setup", DryRun: []string{metav1.DryRunAll}}); err != nil {
		return err
	}
	_, err := sets.Patch(ctx, cpms.Name, types.JSONPatchType, change.Patch, metav1.PatchOptions{FieldManager: "manila-setup"})
	return err
}

// Get reads the set again.
func (t ControlPlaneTarget) Get(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet) (*machinev1.ControlPlaneMachineSet, error) {
	return t.Client.MachineV1().ControlPlaneMachineSets(Namespace).Get(ctx, cpms.Name, metav1.GetOptions{})
}
