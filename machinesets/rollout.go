package machinesets

import (
	"context"
	"fmt"
	"strconv"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/attach/rollout"
)

// MachineAPI names the Machine API's MachineSets in rollout messages.
var MachineAPI = rollout.API{Namespace: Namespace, SetKind: "MachineSet", MachineResource: "machine", Command: "manila-setup machinesets rollout"}

// Rollout replaces, set after set, the Machines whose providerSpec lacks a network or security
// group of their MachineSet's template, or has one the template no longer has (after patch
// --remove): UpToDate. It returns the final state of every set it looked at.
// Killed at any point, it continues when called again.
func Rollout(ctx context.Context, mc machineclient.Interface, kc kubernetes.Interface, sel Selection, opts rollout.Options) ([]rollout.SetProgress, error) {
	if err := opts.Complete(); err != nil {
		return nil, err
	}
	sets, err := selectMachineSets(ctx, mc, sel)
	if err != nil {
		return nil, err
	}
	progress := make([]rollout.SetProgress, len(sets))
	for i, s := range sets {
		p := rollout.SetProgress{Name: s.ms.Name, State: rollout.Pending, Phase: "waiting for its turn", Since: opts.Now()}
		if s.ms.Spec.Replicas != nil {
			p.Total = int(*s.ms.Spec.Replicas)
		}
		if v, err := strconv.Atoi(s.ms.Annotations[rollout.OriginalReplicasAnnotation]); err == nil {
			p.Total = v
		}
		switch {
		case s.skip != "":
			p.State, p.Phase = rollout.Skipped, s.skip
		case IsControlPlane(Role(s.ms)):
			p.State, p.Phase = rollout.Skipped, fmt.Sprintf("control-plane MachineSet (role %s): control-plane machines are never touched", Role(s.ms))
		case NotMachineAPIAuthoritative(s.ms) != "":
			p.State, p.Phase = rollout.Skipped, NotMachineAPIAuthoritative(s.ms)
			p.ClusterAPI = ClusterAPIAuthoritative(s.ms)
		default:
			if _, err := DecodeProviderSpec(templateProviderSpec(s.ms)); err != nil {
				p.State, p.Phase = rollout.Skipped, err.Error()
			}
		}
		progress[i] = p
	}
	return rollout.RollSets(ctx, &roller{mc: mc, kc: kc}, progress, opts)
}

// roller is the RolloutTarget of the Machine API's MachineSets in Namespace.
type roller struct {
	mc machineclient.Interface
	kc kubernetes.Interface
}

func (r *roller) API() rollout.API { return MachineAPI }

// Observe reads a set, its Machines and their Nodes.
func (r *roller) Observe(ctx context.Context, name string) (rollout.SetView, error) {
	ms, err := r.mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return rollout.SetView{}, fmt.Errorf("reading MachineSet %s/%s: %w", Namespace, name, err)
	}
	template, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		return rollout.SetView{}, fmt.Errorf("MachineSet %s/%s: %v", Namespace, name, err)
	}
	v := rollout.SetView{Name: name, ResourceVersion: ms.ResourceVersion, HasAnnotations: len(ms.Annotations) > 0}
	if rec := record.Parse(ms.Annotations); rec != nil {
		v.StorageNetworks = rec.Networks
	}
	if ms.Spec.Replicas != nil {
		v.Replicas = *ms.Spec.Replicas
	}
	if v.Original, v.HasOriginal, err = rollout.OriginalReplicas(ms.Annotations, v.Replicas); err != nil {
		return rollout.SetView{}, fmt.Errorf("MachineSet %s/%s: %v", Namespace, name, err)
	}
	selector := machineSelector(ms)
	list, err := r.mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return rollout.SetView{}, listError("Machines", err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if !selector.Matches(labels.Set(m.Labels)) {
			continue
		}
		mv := rollout.MachineView{
			Name:     m.Name,
			Created:  m.CreationTimestamp.Time,
			Deleting: m.DeletionTimestamp != nil,
			Marked:   m.Annotations[DeleteMachineAnnotation] != "",
			Canary:   m.Annotations[rollout.CanaryAnnotation],
		}
		if m.DeletionTimestamp != nil {
			mv.DeletingSince = m.DeletionTimestamp.Time
		}
		if m.Status.Phase != nil {
			mv.Phase = *m.Status.Phase
			mv.Failed = mv.Phase == machinev1beta1.PhaseFailed
		}
		if m.Status.ErrorMessage != nil {
			mv.Message = *m.Status.ErrorMessage
		}
		if spec, err := DecodeProviderSpec(machineProviderSpec(m)); err == nil {
			mv.Updated = UpToDate(template, spec)
			if !mv.Deleting {
				v.RemovedNetworks = addRemoved(v.RemovedNetworks, template, spec)
			}
		}
		if ref := m.Status.NodeRef; ref != nil && ref.Name != "" && !mv.Deleting {
			node, err := r.kc.CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case err == nil:
				mv.Ready = nodeReady(node)
			case !apierrors.IsNotFound(err):
				return rollout.SetView{}, fmt.Errorf("reading Node %s of Machine %s: %w", ref.Name, m.Name, err)
			}
		}
		if mv.Updated && !mv.Ready && !mv.Deleting && !mv.Failed {
			events, err := r.warnings(ctx, m.Name)
			if err != nil {
				return rollout.SetView{}, err
			}
			mv.Warning, mv.Warnings = rollout.NewestWarning(events)
		}
		v.Machines = append(v.Machines, mv)
	}
	return v, nil
}

// machineSelector is a set's selector; an empty one selects nothing (not every Machine).
func machineSelector(ms *machinev1beta1.MachineSet) labels.Selector {
	if len(ms.Spec.Selector.MatchLabels) == 0 && len(ms.Spec.Selector.MatchExpressions) == 0 {
		return labels.Nothing()
	}
	s, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return labels.Nothing()
	}
	return s
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Mark puts machine.openshift.io/delete-machine on the Machines: the MachineSet controller
// deletes them first when it scales down.
func (r *roller) Mark(ctx context.Context, names []string) error {
	machines := r.mc.MachineV1beta1().Machines(Namespace)
	for _, name := range names {
		mark := []byte(`{"metadata":{"annotations":{"` + DeleteMachineAnnotation + `":"true"}}}`)
		if _, err := machines.Patch(ctx, name, types.MergePatchType, mark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Machine %s for deletion: %w", name, err)
		}
	}
	return nil
}

// Scale sets the replica count, recording the original count first.
func (r *roller) Scale(ctx context.Context, v rollout.SetView, replicas int32) error {
	_, err := r.mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, v.Name, types.JSONPatchType, rollout.ScalePatch(v, replicas), metav1.PatchOptions{FieldManager: "manila-setup"})
	return rollout.ScaleError(err)
}

// Finish removes what the rollout left on the set: the original-replicas annotation, and any
// delete mark on a Machine that stays.
func (r *roller) Finish(ctx context.Context, v rollout.SetView) error {
	for _, m := range v.Machines {
		if m.Marked && !m.Deleting {
			unmark := []byte(`{"metadata":{"annotations":{"` + DeleteMachineAnnotation + `":null}}}`)
			if _, err := r.mc.MachineV1beta1().Machines(Namespace).Patch(ctx, m.Name, types.MergePatchType, unmark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the delete mark of Machine %s: %w", m.Name, err)
			}
		}
	}
	if !v.HasOriginal {
		return nil
	}
	patch := []byte(`{"metadata":{"annotations":{"` + rollout.OriginalReplicasAnnotation + `":null}}}`)
	if _, err := r.mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, v.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil {
		return fmt.Errorf("removing annotation %s from MachineSet %s/%s: %w", rollout.OriginalReplicasAnnotation, Namespace, v.Name, err)
	}
	return nil
}

// Facts reads a Machine of the set, its Node and the Warning events about it, for the canary.
func (r *roller) Facts(ctx context.Context, v rollout.SetView, machine string) (rollout.Facts, error) {
	m, err := r.mc.MachineV1beta1().Machines(Namespace).Get(ctx, machine, metav1.GetOptions{})
	if err != nil {
		return rollout.Facts{}, fmt.Errorf("reading Machine %s/%s: %w", Namespace, machine, err)
	}
	f := rollout.Facts{Set: v.Name, Machine: machine, StorageNetworks: v.StorageNetworks, RemovedNetworks: v.RemovedNetworks,
		MachineAddresses: rollout.InternalIPs(m.Status.Addresses)}
	if m.Spec.ProviderID != nil {
		f.ServerID = rollout.ServerID(*m.Spec.ProviderID)
	}
	if ref := m.Status.NodeRef; ref != nil && ref.Name != "" {
		node, err := r.kc.CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return rollout.Facts{}, fmt.Errorf("reading Node %s of Machine %s: %w", ref.Name, machine, err)
		}
		f.Node = node.Name
		if ips := rollout.InternalIPs(node.Status.Addresses); len(ips) > 0 {
			f.NodeIP = ips[0]
		}
	}
	events, err := r.warnings(ctx, machine)
	if err != nil {
		return rollout.Facts{}, err
	}
	for _, e := range events {
		f.Warnings = append(f.Warnings, e.Reason+": "+e.Message)
	}
	return f, nil
}

// warnings lists the Warning events about a Machine.
func (r *roller) warnings(ctx context.Context, machine string) ([]corev1.Event, error) {
	events, err := r.kc.CoreV1().Events(Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": machine, "involvedObject.kind": "Machine", "type": corev1.EventTypeWarning}.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the events of Machine %s/%s: %w", Namespace, machine, err)
	}
	return events.Items, nil
}

// MarkCanary records the canary check on a Machine.
func (r *roller) MarkCanary(ctx context.Context, machine, value string) error {
	_, err := r.mc.MachineV1beta1().Machines(Namespace).Patch(ctx, machine, types.MergePatchType, rollout.CanaryPatch(value), metav1.PatchOptions{FieldManager: "manila-setup"})
	return err
}
