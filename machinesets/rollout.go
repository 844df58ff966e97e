package machinesets

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// OriginalReplicasAnnotation on a MachineSet holds its replica count from before a rollout
// surged it. Its presence means a rollout is under way; it is removed when the rollout ends.
const OriginalReplicasAnnotation = "manila-setup.io/rollout-original-replicas"

// Defaults of RolloutOptions.
const (
	DefaultMaxSurge     = 1
	DefaultTimeout      = 30 * time.Minute
	DefaultPollInterval = 2 * time.Second
)

// RolloutOptions are the inputs of Rollout.
type RolloutOptions struct {
	Selection
	// MaxSurge is how many Machines a set may have above its replica count; MaxUnavailable how
	// many of its replicas may be missing (not Ready). Not both zero.
	MaxSurge, MaxUnavailable int32
	// Timeout is how long a new Machine may take to become a Ready Node, counted from its
	// creation (so it holds across a resumed rollout), and how long the rollout may wait on
	// anything else without progress. Zero: DefaultTimeout.
	Timeout time.Duration
	// PollInterval is how often the state is read. Zero: DefaultPollInterval.
	PollInterval time.Duration
	// Progress, when set, receives the state of a set whenever it changes, and every poll.
	Progress func(SetProgress)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Rollout states of a set.
const (
	RolloutPending  = "pending"
	RolloutRunning  = "rolling"
	RolloutDone     = "done"
	RolloutUpToDate = "up-to-date"
	RolloutSkipped  = "skipped"
	RolloutFailed   = "failed"
)

// SetProgress is the state of one set's rollout: one progress line.
type SetProgress struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Replaced int    `json:"replaced"`
	Total    int    `json:"total"`
	Phase    string `json:"phase"`
	// ClusterAPI says the set was skipped because Cluster API is authoritative for it: its
	// machines follow the Cluster API MachineSet of the same name in ClusterAPINamespace, which
	// package clusterapi rolls.
	ClusterAPI bool `json:"clusterAPI,omitempty"`
	// Since is when Phase began, for the elapsed time on a terminal.
	Since time.Time `json:"-"`
}

// RolloutError says why a rollout stopped at a set, and what was left as it was.
type RolloutError struct {
	MachineSet string
	Machine    string // the Machine at fault, if one
	Reason     string
	Replaced   int
	Total      int
	// API names where the set is and how to continue; zero: the Machine API's (MachineAPI).
	API RolloutAPI
}

func (e *RolloutError) Error() string {
	api := e.API
	if api == (RolloutAPI{}) {
		api = MachineAPI
	}
	msg := fmt.Sprintf("rollout of %s %s/%s stopped: %s. %d of %d Machines were replaced; the old Machines left were not touched, and no other MachineSet was changed.",
		api.SetKind, api.Namespace, e.MachineSet, e.Reason, e.Replaced, e.Total)
	if e.Machine != "" {
		msg += fmt.Sprintf(" Find the cause with `oc describe %s -n %s %s`, fix it, delete that Machine (`oc delete %s -n %s %s`) and run `%s` again: it continues where it stopped.",
			api.MachineResource, api.Namespace, e.Machine, api.MachineResource, api.Namespace, e.Machine, api.Command)
	} else {
		msg += fmt.Sprintf(" Run `%s` again to continue where it stopped.", api.Command)
	}
	return msg
}

// MachineAPI names the Machine API's MachineSets in rollout messages.
var MachineAPI = RolloutAPI{Namespace: Namespace, SetKind: "MachineSet", MachineResource: "machine", Command: "manila-setup machinesets rollout"}

// Complete checks the options and fills in the defaults.
func (opts *RolloutOptions) Complete() error {
	if opts.MaxSurge < 0 || opts.MaxUnavailable < 0 {
		return fmt.Errorf("--max-surge and --max-unavailable cannot be negative (got %d and %d)", opts.MaxSurge, opts.MaxUnavailable)
	}
	if opts.MaxSurge == 0 && opts.MaxUnavailable == 0 {
		return errors.New("--max-surge and --max-unavailable cannot both be 0: no Machine could ever be replaced")
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return nil
}

// Rollout replaces, set after set, the Machines whose providerSpec lacks a network or security
// group of their MachineSet's template. It returns the final state of every set it looked at.
// Killed at any point, it continues when called again.
func Rollout(ctx context.Context, mc machineclient.Interface, kc kubernetes.Interface, opts RolloutOptions) ([]SetProgress, error) {
	if err := opts.Complete(); err != nil {
		return nil, err
	}
	sets, err := selectMachineSets(ctx, mc, opts.Selection)
	if err != nil {
		return nil, err
	}
	progress := make([]SetProgress, len(sets))
	for i, s := range sets {
		p := SetProgress{Name: s.ms.Name, State: RolloutPending, Phase: "waiting for its turn", Since: opts.Now()}
		if s.ms.Spec.Replicas != nil {
			p.Total = int(*s.ms.Spec.Replicas)
		}
		if v, err := strconv.Atoi(s.ms.Annotations[OriginalReplicasAnnotation]); err == nil {
			p.Total = v
		}
		switch {
		case s.skip != "":
			p.State, p.Phase = RolloutSkipped, s.skip
		case IsControlPlane(Role(s.ms)):
			p.State, p.Phase = RolloutSkipped, fmt.Sprintf("control-plane MachineSet (role %s): control-plane machines are never touched", Role(s.ms))
		case NotMachineAPIAuthoritative(s.ms) != "":
			p.State, p.Phase = RolloutSkipped, NotMachineAPIAuthoritative(s.ms)
			p.ClusterAPI = ClusterAPIAuthoritative(s.ms)
		default:
			if _, err := DecodeProviderSpec(templateProviderSpec(s.ms)); err != nil {
				p.State, p.Phase = RolloutSkipped, err.Error()
			}
		}
		progress[i] = p
	}
	return RollSets(ctx, &roller{mc: mc, kc: kc}, progress, opts)
}

// roller is the RolloutTarget of the Machine API's MachineSets in Namespace.
type roller struct {
	mc machineclient.Interface
	kc kubernetes.Interface
}

func (r *roller) API() RolloutAPI { return MachineAPI }

// Observe reads a set, its Machines and their Nodes.
func (r *roller) Observe(ctx context.Context, name string) (SetView, error) {
	ms, err := r.mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return SetView{}, fmt.Errorf("reading MachineSet %s/%s: %w", Namespace, name, err)
	}
	template, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		return SetView{}, fmt.Errorf("MachineSet %s/%s: %v", Namespace, name, err)
	}
	v := SetView{Name: name, ResourceVersion: ms.ResourceVersion, HasAnnotations: len(ms.Annotations) > 0}
	if ms.Spec.Replicas != nil {
		v.Replicas = *ms.Spec.Replicas
	}
	if v.Original, v.HasOriginal, err = OriginalReplicas(ms.Annotations, v.Replicas); err != nil {
		return SetView{}, fmt.Errorf("MachineSet %s/%s: %v", Namespace, name, err)
	}
	selector := machineSelector(ms)
	list, err := r.mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return SetView{}, listError("Machines", err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if !selector.Matches(labels.Set(m.Labels)) {
			continue
		}
		mv := MachineView{
			Name:     m.Name,
			Created:  m.CreationTimestamp.Time,
			Deleting: m.DeletionTimestamp != nil,
			Marked:   m.Annotations[DeleteMachineAnnotation] != "",
		}
		if m.Status.Phase != nil {
			mv.Phase = *m.Status.Phase
			mv.Failed = mv.Phase == machinev1beta1.PhaseFailed
		}
		if m.Status.ErrorMessage != nil {
			mv.Message = *m.Status.ErrorMessage
		}
		if spec, err := DecodeProviderSpec(machineProviderSpec(m)); err == nil {
			mv.Updated = len(MissingFrom(template, spec)) == 0
		}
		if ref := m.Status.NodeRef; ref != nil && ref.Name != "" && !mv.Deleting {
			node, err := r.kc.CoreV1().Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
			switch {
			case err == nil:
				mv.Ready = nodeReady(node)
			case !apierrors.IsNotFound(err):
				return SetView{}, fmt.Errorf("reading Node %s of Machine %s: %w", ref.Name, m.Name, err)
			}
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

// Scale marks the victims and sets the replica count, recording the original count first.
func (r *roller) Scale(ctx context.Context, v SetView, replicas int32, victims []string) error {
	machines := r.mc.MachineV1beta1().Machines(Namespace)
	for _, name := range victims {
		mark := []byte(`{"metadata":{"annotations":{"` + DeleteMachineAnnotation + `":"true"}}}`)
		if _, err := machines.Patch(ctx, name, types.MergePatchType, mark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Machine %s for deletion: %w", name, err)
		}
	}
	_, err := r.mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, v.Name, types.JSONPatchType, ScalePatch(v, replicas), metav1.PatchOptions{FieldManager: "manila-setup"})
	return ScaleError(err)
}

// Finish removes what the rollout left on the set: the original-replicas annotation, and any
// delete mark on a Machine that stays.
func (r *roller) Finish(ctx context.Context, v SetView) error {
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
	patch := []byte(`{"metadata":{"annotations":{"` + OriginalReplicasAnnotation + `":null}}}`)
	if _, err := r.mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, v.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil {
		return fmt.Errorf("removing annotation %s from MachineSet %s/%s: %w", OriginalReplicasAnnotation, Namespace, v.Name, err)
	}
	return nil
}
