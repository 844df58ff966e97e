package clusterapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/machinesets"
)

// MachineGVR is the resource of Cluster API's Machines.
var MachineGVR = clusterv1.GroupVersion.WithResource("machines")

// RolloutOptions are the inputs of Rollout; the rollout's own settings mean what they mean in
// machinesets.RolloutOptions.
type RolloutOptions struct {
	// Namespace is where the MachineSets and their Machines are (required).
	Namespace string
	// Names picks MachineSets by name ("NAME" or "machineset/NAME"); none: every standalone
	// MachineSet of the namespace.
	Names                    []string
	MaxSurge, MaxUnavailable int32
	Timeout, PollInterval    time.Duration
	Progress                 func(machinesets.SetProgress)
	Now                      func() time.Time
}

// Rollout replaces, set after set, the Machines of the standalone Cluster API MachineSets that
// were not made from their set's current template (their OpenStackMachine's cloned-from-name
// annotation names another), as `machinesets rollout` does for the Machine API: surge, wait
// for a new Machine to be Running with a Node, mark an old one with cluster.x-k8s.io/delete-machine
// (Cluster API deletes marked Machines first) and scale down, repeat, then restore the replica
// count. A MachineDeployment, and the MachineSets it owns, are left to the deployment's own
// rolling update. Killed at any point, it continues when called again.
func Rollout(ctx context.Context, dyn dynamic.Interface, opts RolloutOptions) ([]machinesets.SetProgress, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("the namespace of the Cluster API MachineSets is required")
	}
	mopts := machinesets.RolloutOptions{
		MaxSurge: opts.MaxSurge, MaxUnavailable: opts.MaxUnavailable,
		Timeout: opts.Timeout, PollInterval: opts.PollInterval, Progress: opts.Progress, Now: opts.Now,
	}
	if err := mopts.Complete(); err != nil {
		return nil, err
	}
	// A MachineDeployment is listed only to say, when it is named, that it rolls by itself.
	kinds := []string{KindMachineSet}
	if len(opts.Names) > 0 {
		kinds = nil
	}
	objects, err := listObjects(ctx, dyn, opts.Namespace, kinds)
	if err != nil {
		return nil, err
	}
	picked, err := pick(objects, opts.Names, opts.Namespace)
	if err != nil {
		return nil, err
	}
	progress := make([]machinesets.SetProgress, len(picked))
	for i, o := range picked {
		progress[i] = rolloutLine(o, mopts.Now())
	}
	target := &capiTarget{dyn: dyn, namespace: opts.Namespace}
	return machinesets.RollSets(ctx, target, progress, mopts)
}

// rolloutLine is the first progress line of o: pending, or skipped with the reason.
func rolloutLine(o object, now time.Time) machinesets.SetProgress {
	p := machinesets.SetProgress{Name: o.u.GetName(), State: machinesets.RolloutPending, Phase: "waiting for its turn", Since: now}
	replicas, _, _ := unstructured.NestedInt64(o.u.Object, "spec", "replicas")
	p.Total = int(replicas)
	if original, _, err := machinesets.OriginalReplicas(o.u.GetAnnotations(), int32(replicas)); err == nil {
		p.Total = int(original)
	}
	ref := refOf(o.u)
	switch {
	case paused(o) != "":
		p.State, p.Phase = machinesets.RolloutSkipped, paused(o)
	case o.kind == KindMachineDeployment:
		p.Name = "machinedeployment/" + o.u.GetName()
		p.State, p.Phase = machinesets.RolloutSkipped, "a MachineDeployment replaces its Machines itself (its rolling update)"
	case madeByDeployment(o) != "":
		p.State, p.Phase = machinesets.RolloutSkipped, fmt.Sprintf("made by MachineDeployment %s, which replaces its Machines itself", madeByDeployment(o))
	case !ref.isOpenStackTemplate():
		p.State, p.Phase = machinesets.RolloutSkipped, fmt.Sprintf("its machines are made from a %s (%s), not an OpenStackMachineTemplate", orNone(ref.Kind), orNone(ref.APIVersion))
	}
	return p
}

// capiTarget is the machinesets.RolloutTarget of the Cluster API MachineSets of a namespace.
type capiTarget struct {
	dyn       dynamic.Interface
	namespace string
}

func (c *capiTarget) API() machinesets.RolloutAPI {
	return machinesets.RolloutAPI{Namespace: c.namespace, SetKind: "Cluster API MachineSet", MachineResource: "machines.cluster.x-k8s.io", Command: rolloutCommand(c.namespace)}
}

// rolloutCommand is the command that rolls the Cluster API MachineSets of namespace.
func rolloutCommand(namespace string) string {
	if namespace == machinesets.ClusterAPINamespace {
		return "manila-setup clusterapi rollout"
	}
	return "manila-setup clusterapi rollout -n " + namespace
}

// Observe reads a set, the Machines in the namespace and their OpenStackMachines (three
// requests): a Machine is the set's by the set-name label or a controller reference, and up to
// date when its OpenStackMachine was cloned from the template the set names now.
func (c *capiTarget) Observe(ctx context.Context, name string) (machinesets.SetView, error) {
	ms, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return machinesets.SetView{}, fmt.Errorf("reading Cluster API MachineSet %s/%s: %w", c.namespace, name, err)
	}
	replicas, _, _ := unstructured.NestedInt64(ms.Object, "spec", "replicas")
	v := machinesets.SetView{Name: name, ResourceVersion: ms.GetResourceVersion(), Replicas: int32(replicas), HasAnnotations: len(ms.GetAnnotations()) > 0}
	if v.Original, v.HasOriginal, err = machinesets.OriginalReplicas(ms.GetAnnotations(), v.Replicas); err != nil {
		return machinesets.SetView{}, fmt.Errorf("Cluster API MachineSet %s/%s: %v", c.namespace, name, err)
	}
	template := refOf(ms).Name
	machines, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return machinesets.SetView{}, listError("Machines", MachineGVR.GroupResource().String(), c.namespace, err)
	}
	infra, err := c.dyn.Resource(OpenStackMachineGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return machinesets.SetView{}, listError("OpenStackMachines", OpenStackMachineGVR.GroupResource().String(), c.namespace, err)
	}
	clonedFrom := map[string]string{}
	for _, m := range infra.Items {
		clonedFrom[m.GetName()] = m.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
	}
	for i := range machines.Items {
		u := &machines.Items[i]
		if !ofSet(u, name) {
			continue
		}
		var m clusterv1.Machine
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
			return machinesets.SetView{}, fmt.Errorf("Machine %s/%s does not read as Cluster API's v1beta1: %v", c.namespace, u.GetName(), err)
		}
		v.Machines = append(v.Machines, machineView(&m, template, clonedFrom))
	}
	return v, nil
}

// ofSet reports whether Machine u belongs to MachineSet set.
func ofSet(u *unstructured.Unstructured, set string) bool {
	if u.GetLabels()[clusterv1.MachineSetNameLabel] == set {
		return true
	}
	owner := metav1.GetControllerOfNoCopy(u)
	return owner != nil && owner.Kind == KindMachineSet && owner.Name == set && strings.HasPrefix(owner.APIVersion, clusterv1.GroupVersion.Group+"/")
}

// machineView is what the rollout needs of m. A Machine whose OpenStackMachine is missing
// counts as outdated: nothing says which template it came from (Cluster API creates the
// OpenStackMachine before the Machine, so a new Machine always has one).
func machineView(m *clusterv1.Machine, template string, clonedFrom map[string]string) machinesets.MachineView {
	_, marked := m.Annotations[clusterv1.DeleteMachineAnnotation]
	mv := machinesets.MachineView{
		Name:     m.Name,
		Created:  m.CreationTimestamp.Time,
		Deleting: m.DeletionTimestamp != nil,
		Marked:   marked,
		Phase:    m.Status.Phase,
	}
	from, known := clonedFrom[m.Spec.InfrastructureRef.Name]
	mv.Updated = known && from == template
	var reasons []string
	if m.Status.FailureReason != nil {
		reasons = append(reasons, string(*m.Status.FailureReason))
	}
	if m.Status.FailureMessage != nil {
		reasons = append(reasons, *m.Status.FailureMessage)
	}
	mv.Message = strings.Join(reasons, ": ")
	mv.Failed = m.Status.Phase == string(clusterv1.MachinePhaseFailed) || len(reasons) > 0
	mv.Ready = !mv.Deleting && !mv.Failed && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef != nil && m.Status.NodeRef.Name != ""
	return mv
}

// Scale marks the victims with cluster.x-k8s.io/delete-machine (Cluster API deletes such
// Machines first when it scales down) and scales the set (machinesets.ScalePatch).
func (c *capiTarget) Scale(ctx context.Context, v machinesets.SetView, replicas int32, victims []string) error {
	for _, name := range victims {
		mark := []byte(`{"metadata":{"annotations":{"` + clusterv1.DeleteMachineAnnotation + `":""}}}`)
		if _, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).Patch(ctx, name, types.MergePatchType, mark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Machine %s/%s for deletion: %w", c.namespace, name, err)
		}
	}
	_, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Patch(ctx, v.Name, types.JSONPatchType, machinesets.ScalePatch(v, replicas), metav1.PatchOptions{FieldManager: "manila-setup"})
	return machinesets.ScaleError(err)
}

// Finish removes the delete mark of the Machines that stay and the original-replicas
// annotation of the set.
func (c *capiTarget) Finish(ctx context.Context, v machinesets.SetView) error {
	for _, m := range v.Machines {
		if m.Marked && !m.Deleting {
			unmark := []byte(`{"metadata":{"annotations":{"` + clusterv1.DeleteMachineAnnotation + `":null}}}`)
			if _, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).Patch(ctx, m.Name, types.MergePatchType, unmark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the delete mark of Machine %s/%s: %w", c.namespace, m.Name, err)
			}
		}
	}
	if !v.HasOriginal {
		return nil
	}
	patch := []byte(`{"metadata":{"annotations":{"` + machinesets.OriginalReplicasAnnotation + `":null}}}`)
	if _, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Patch(ctx, v.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil {
		return fmt.Errorf("removing annotation %s from Cluster API MachineSet %s/%s: %w", machinesets.OriginalReplicasAnnotation, c.namespace, v.Name, err)
	}
	return nil
}
