package machinesets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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
}

func (e *RolloutError) Error() string {
	msg := fmt.Sprintf("rollout of MachineSet %s/%s stopped: %s. %d of %d Machines were replaced; the old Machines left were not touched, and no other MachineSet was changed.",
		Namespace, e.MachineSet, e.Reason, e.Replaced, e.Total)
	if e.Machine != "" {
		msg += fmt.Sprintf(" Find the cause with `oc describe machine -n %s %s`, fix it, delete that Machine (`oc delete machine -n %s %s`) and run `manila-setup machinesets rollout` again: it continues where it stopped.",
			Namespace, e.Machine, Namespace, e.Machine)
	} else {
		msg += " Run `manila-setup machinesets rollout` again to continue where it stopped."
	}
	return msg
}

// Rollout replaces, set after set, the Machines whose providerSpec lacks a network or security
// group of their MachineSet's template. It returns the final state of every set it looked at.
// Killed at any point, it continues when called again.
func Rollout(ctx context.Context, mc machineclient.Interface, kc kubernetes.Interface, opts RolloutOptions) ([]SetProgress, error) {
	if opts.MaxSurge < 0 || opts.MaxUnavailable < 0 {
		return nil, fmt.Errorf("--max-surge and --max-unavailable cannot be negative (got %d and %d)", opts.MaxSurge, opts.MaxUnavailable)
	}
	if opts.MaxSurge == 0 && opts.MaxUnavailable == 0 {
		return nil, errors.New("--max-surge and --max-unavailable cannot both be 0: no Machine could ever be replaced")
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
	sets, err := selectMachineSets(ctx, mc, opts.Selection)
	if err != nil {
		return nil, err
	}
	r := &roller{mc: mc, kc: kc, opts: opts}
	r.progress = make([]SetProgress, len(sets))
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
		default:
			if _, err := DecodeProviderSpec(templateProviderSpec(s.ms)); err != nil {
				p.State, p.Phase = RolloutSkipped, err.Error()
			}
		}
		r.progress[i] = p
	}
	for i := range r.progress {
		r.report(i)
	}
	for i := range r.progress {
		if r.progress[i].State != RolloutPending {
			continue
		}
		if err := r.rollSet(ctx, i); err != nil {
			return r.progress, err
		}
	}
	return r.progress, nil
}

type roller struct {
	mc       machineclient.Interface
	kc       kubernetes.Interface
	opts     RolloutOptions
	progress []SetProgress
}

func (r *roller) report(i int) {
	if r.opts.Progress != nil {
		r.opts.Progress(r.progress[i])
	}
}

// setPhase updates set i's progress line and reports it.
func (r *roller) setPhase(i int, state, phase string, replaced, total int) {
	p := &r.progress[i]
	if p.Phase != phase {
		p.Since = r.opts.Now()
	}
	p.State, p.Phase, p.Replaced, p.Total = state, phase, replaced, total
	r.report(i)
}

// rollSet drives one set to the end: observe, decide, act, until done or failed.
func (r *roller) rollSet(ctx context.Context, i int) error {
	name := r.progress[i].Name
	lastPhase, lastChange := "", r.opts.Now()
	refused := 0 // scales refused in a row because the set changed under us
	hiccups := 0 // reads failed in a row for a reason that usually passes
	for {
		v, err := r.observe(ctx, name)
		if err != nil {
			if transient(err) && hiccups < 5 && ctx.Err() == nil {
				hiccups++
				r.setPhase(i, RolloutRunning, fmt.Sprintf("reading the cluster failed (%v), trying again", err), r.progress[i].Replaced, r.progress[i].Total)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(r.opts.PollInterval):
				}
				continue
			}
			r.setPhase(i, RolloutFailed, err.Error(), r.progress[i].Replaced, r.progress[i].Total)
			return err
		}
		hiccups = 0
		now := r.opts.Now()
		st := decide(v, r.opts.MaxSurge, r.opts.MaxUnavailable, r.opts.Timeout, now)
		total := int(v.Original)

		// A phase that does not change for Timeout means something we do not see is stuck
		// (e.g. no MachineSet controller runs): stop rather than wait forever.
		if st.Phase != lastPhase {
			lastPhase, lastChange = st.Phase, now
		} else if st.Kind == stepWait && now.Sub(lastChange) > r.opts.Timeout {
			st.Kind, st.Err = stepFail, fmt.Sprintf("no progress for %s while %s", r.opts.Timeout, st.Phase)
			st.Machine = st.Waiting
		}

		switch st.Kind {
		case stepDone:
			if err := r.finish(ctx, v); err != nil {
				r.setPhase(i, RolloutFailed, err.Error(), st.Replaced, total)
				return err
			}
			state := RolloutDone
			if !v.HasOriginal {
				state = RolloutUpToDate
			}
			r.setPhase(i, state, st.Phase, st.Replaced, total)
			return nil
		case stepFail:
			err := &RolloutError{MachineSet: name, Machine: st.Machine, Reason: st.Err, Replaced: st.Replaced, Total: total}
			r.setPhase(i, RolloutFailed, st.Err, st.Replaced, total)
			return err
		case stepScale:
			r.setPhase(i, RolloutRunning, st.Phase, st.Replaced, total)
			if err := r.scale(ctx, v, st); err != nil {
				if (errors.Is(err, errReplicasChanged) || apierrors.IsConflict(err)) && refused < 5 {
					refused++
					continue // the set changed under us: look again
				}
				err = fmt.Errorf("rollout of MachineSet %s/%s: %s: %w", Namespace, name, st.Phase, err)
				r.setPhase(i, RolloutFailed, err.Error(), st.Replaced, total)
				return err
			}
			refused = 0
		case stepWait:
			refused = 0
			r.setPhase(i, RolloutRunning, st.Phase, st.Replaced, total)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.opts.PollInterval):
			}
		}
	}
}

// transient reports whether a failed read is worth trying again: the apiserver was busy,
// restarting or slow, not refusing.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	// No answer at all: the connection failed (refused, reset, timed out).
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// observe reads a set, its Machines and their Nodes.
func (r *roller) observe(ctx context.Context, name string) (setView, error) {
	ms, err := r.mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return setView{}, fmt.Errorf("reading MachineSet %s/%s: %w", Namespace, name, err)
	}
	template, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		return setView{}, fmt.Errorf("MachineSet %s/%s: %v", Namespace, name, err)
	}
	v := setView{Name: name, ResourceVersion: ms.ResourceVersion, hasAnnotations: len(ms.Annotations) > 0}
	if ms.Spec.Replicas != nil {
		v.Replicas = *ms.Spec.Replicas
	}
	v.Original = v.Replicas
	if s, ok := ms.Annotations[OriginalReplicasAnnotation]; ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return setView{}, fmt.Errorf("MachineSet %s/%s: annotation %s: Invalid value: %q: must be a replica count", Namespace, name, OriginalReplicasAnnotation, s)
		}
		v.Original, v.HasOriginal = int32(n), true
	}
	selector := machineSelector(ms)
	list, err := r.mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return setView{}, listError("Machines", err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if !selector.Matches(labels.Set(m.Labels)) {
			continue
		}
		mv := machineView{
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
				return setView{}, fmt.Errorf("reading Node %s of Machine %s: %w", ref.Name, m.Name, err)
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

// scale marks the victims and sets the replica count, recording the original count first.
func (r *roller) scale(ctx context.Context, v setView, st step) error {
	machines := r.mc.MachineV1beta1().Machines(Namespace)
	for _, name := range st.Victims {
		mark := []byte(`{"metadata":{"annotations":{"` + DeleteMachineAnnotation + `":"true"}}}`)
		if _, err := machines.Patch(ctx, name, types.MergePatchType, mark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Machine %s for deletion: %w", name, err)
		}
	}
	// The precondition is the replica count the decision was made on, not the whole object's
	// resourceVersion: the MachineSet controller rewrites the status all the time, and that
	// must not make every step start over. If someone else scaled the set meanwhile, the
	// "test" fails and the state is read again.
	ops := []jsonPatchOp{
		{Op: "test", Path: "/spec/replicas", Value: v.Replicas},
		{Op: "replace", Path: "/spec/replicas", Value: st.Replicas},
	}
	if !v.HasOriginal {
		if v.hasAnnotations {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(OriginalReplicasAnnotation), Value: strconv.Itoa(int(v.Original))})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{OriginalReplicasAnnotation: strconv.Itoa(int(v.Original))}})
		}
	}
	b, _ := json.Marshal(ops)
	_, err := r.mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, v.Name, types.JSONPatchType, b, metav1.PatchOptions{FieldManager: "manila-setup"})
	// A failed "test" comes back as a bare 422 Invalid (the apiserver drops jsonpatch's
	// message). Nothing else in this patch can be invalid; rollSet still gives up if it repeats.
	if apierrors.IsInvalid(err) {
		return fmt.Errorf("%w (%v)", errReplicasChanged, err)
	}
	return err
}

// errReplicasChanged says that spec.replicas changed between reading and scaling.
var errReplicasChanged = errors.New("spec.replicas changed since it was read")

// finish removes what the rollout left on the set: the original-replicas annotation, and any
// delete mark on a Machine that stays.
func (r *roller) finish(ctx context.Context, v setView) error {
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
