package machinesets

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
)

// Rolling the masters out after their template changed. The control-plane-machine-set
// operator replaces them itself with RollingUpdate; with OnDelete it replaces a master only once
// its Machine is deleted, and deleting several at once replaces several at once. So
// ControlPlaneRollout follows the operator under RollingUpdate and, under OnDelete, deletes one
// outdated master at a time: only when every master is Running with a Ready Node, none is being
// deleted, the set counts every replica ready, and etcd and the other ClusterOperators the
// change leans on are at rest (etcd's quorum is back). The first replacement is checked as a
// worker's is (the canary: its node IP still on the machine network, an address on the storage
// network) before the next master goes.

// ControlPlaneRolloutOptions are how ControlPlaneRollout goes.
type ControlPlaneRolloutOptions struct {
	PollInterval, Timeout time.Duration
	// Canary checks the first replacement; nil: none is checked.
	Canary rollout.Checker
	// Resume checks again a new master whose check failed (its rollout.CanaryAnnotation), after
	// the cause was fixed; without it such a master keeps the rollout stopped.
	Resume bool
	// Operators reads the ClusterOperators (ControlPlaneOperators); nil: not read.
	Operators dynamic.Interface
	// Progress is told every change of what the rollout is doing.
	Progress func(ControlPlaneProgress)
}

// ControlPlaneProgress is where the masters' rollout is.
type ControlPlaneProgress struct {
	Strategy string `json:"strategy"`
	// Masters counts the live master Machines, OnTemplate those whose providerSpec has the
	// template's networks and security groups, Replicas how many the set wants.
	Masters    int `json:"masters"`
	OnTemplate int `json:"onTemplate"`
	Replicas   int `json:"replicas"`
	// Phase says what the rollout waits for or does now.
	Phase string `json:"phase"`
	// Canary is the replacement checked, and CanaryVerdict its verdict ("" before).
	Canary        string `json:"canary,omitempty"`
	CanaryVerdict string `json:"canaryVerdict,omitempty"`
	Done          bool   `json:"done"`
}

// ControlPlaneRolloutError stops the rollout with the masters as they are.
type ControlPlaneRolloutError struct{ Reason string }

func (e *ControlPlaneRolloutError) Error() string { return "masters' rollout stopped: " + e.Reason }

// master is one master Machine as the rollout sees it.
type master struct {
	name       string
	index      int // the number that ends its name; -1 when none
	onTemplate bool
	deleting   bool
	ready      bool // Running, with a Ready Node
	created    time.Time
	canary     string // its rollout.CanaryAnnotation
	phase      string
	failed     bool   // phase Failed: the Machine API gave up on it
	message    string // its status.errorMessage
	// warning is the newest Warning event about a new master not ready yet ("Reason: message":
	// a port Neutron refused, a server Nova could not make), warnings how many of that reason.
	warning  string
	warnings int
}

// ControlPlaneRollout replaces the masters that lack the template's networks and security groups
// (see above) and returns once every master is on the template and ready, or with a
// *ControlPlaneRolloutError that says why it stopped.
func ControlPlaneRollout(ctx context.Context, mc machineclient.Interface, kc kubernetes.Interface, opts ControlPlaneRolloutOptions) (ControlPlaneProgress, error) {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 10 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 90 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var last ControlPlaneProgress
	tell := func(p ControlPlaneProgress) {
		if p != last && opts.Progress != nil {
			opts.Progress(p)
		}
		last = p
	}
	before := map[string]bool{} // the masters on the template when the rollout began
	first := true
	for {
		cpms, err := GetControlPlane(ctx, mc)
		if err != nil {
			return last, err
		}
		if err := controlPlaneSpecSafety(cpms); err != nil {
			return last, &ControlPlaneRolloutError{Reason: strings.TrimPrefix(err.Error(), "not changed: ")}
		}
		spec, skip := controlPlaneSpec(cpms, attach.Result{})
		if skip != nil {
			return last, &ControlPlaneRolloutError{Reason: skip.Reason}
		}
		masters, err := observeMasters(ctx, mc, kc, cpms, spec)
		if err != nil {
			return last, err
		}
		p := ControlPlaneProgress{Strategy: string(ControlPlaneStrategy(cpms)), Replicas: ControlPlaneTarget{}.Replicas(cpms),
			Canary: last.Canary, CanaryVerdict: last.CanaryVerdict}
		if first {
			// A check made by an earlier run counts: passed, the canary is done; failed, the
			// rollout stays stopped unless resumed (then the master is checked again).
			for _, m := range masters {
				switch {
				case m.canary == rollout.CanaryPassed:
					p.Canary, p.CanaryVerdict = m.name, "passed (checked earlier)"
				case strings.HasPrefix(m.canary, rollout.CanaryFailedPrefix) && !m.deleting && !opts.Resume:
					return p, &ControlPlaneRolloutError{Reason: fmt.Sprintf("new master %s failed its check earlier: %s. Fix the cause, then run again with --resume to check it again, or delete Machine %s so that a new master replaces it",
						m.name, strings.TrimPrefix(m.canary, rollout.CanaryFailedPrefix), m.name)}
				case m.onTemplate && !strings.HasPrefix(m.canary, rollout.CanaryFailedPrefix):
					before[m.name] = true
				}
			}
			first = false
		}
		var outdated []master
		for _, m := range masters {
			if m.deleting {
				continue
			}
			p.Masters++
			if m.onTemplate {
				p.OnTemplate++
			} else {
				outdated = append(outdated, m)
			}
		}
		// The canary: the first replacement that runs, before another master goes.
		if opts.Canary != nil && p.Canary == "" {
			if fresh := firstReplacement(masters, before); fresh != nil {
				verdict, err := checkMaster(ctx, mc, kc, cpms, fresh.name, opts.Canary)
				if err != nil {
					return p, err
				}
				p.Canary = fresh.name
				if len(verdict.Problems) > 0 {
					p.CanaryVerdict = "failed: " + strings.Join(verdict.Problems, "; ")
					p.Phase = "stopped: the first new master failed its check"
					tell(p)
					hold := ""
					if ControlPlaneStrategy(cpms) == machinev1.RollingUpdate {
						hold = " The operator goes on replacing the masters under RollingUpdate: set spec.strategy.type to OnDelete on the ControlPlaneMachineSet to hold it while you fix this."
					}
					return p, &ControlPlaneRolloutError{Reason: fmt.Sprintf("new master %s failed its check: %s.%s", fresh.name, strings.Join(verdict.Problems, "; "), hold)}
				}
				p.CanaryVerdict = "passed (" + strings.Join(verdict.Checked, ", ") + ")"
			}
		}
		if why := refusedMaster(masters, ControlPlaneStrategy(cpms)); why != "" {
			p.Phase = "stopped: a new master could not be made"
			tell(p)
			return p, &ControlPlaneRolloutError{Reason: why}
		}
		atRest, why := mastersAtRest(cpms, masters, p.Replicas)
		if atRest && len(outdated) == 0 {
			p.Phase, p.Done = fmt.Sprintf("every master (%d) is on the template and ready", p.Masters), true
			tell(p)
			return p, nil
		}
		switch {
		case ControlPlaneStrategy(cpms) == machinev1.RollingUpdate:
			p.Phase = "the control-plane-machine-set operator replaces the masters (RollingUpdate): " + orWaiting(why, outdated)
		case !atRest:
			p.Phase = "waiting before the next master: " + why
		case opts.Canary != nil && p.Canary == "" && p.OnTemplate > len(before):
			p.Phase = "waiting for the new master's check"
		default:
			busy, err := controlPlaneOperatorsBusy(ctx, opts.Operators)
			if err != nil {
				return p, err
			}
			if busy != "" {
				p.Phase = "waiting before the next master: " + busy
				break
			}
			victim := outdated[0]
			if err := mc.MachineV1beta1().Machines(Namespace).Delete(ctx, victim.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return p, fmt.Errorf("deleting master Machine %s/%s: %w", Namespace, victim.name, err)
			}
			p.Phase = fmt.Sprintf("deleted master %s (index %d): the operator makes its replacement, etcd's hook holds it until the new member is in", victim.name, victim.index)
		}
		tell(p)
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return p, &ControlPlaneRolloutError{Reason: fmt.Sprintf("not done after %s: %s (%d of %d masters on the template)", opts.Timeout, p.Phase, p.OnTemplate, p.Replicas)}
			}
			return p, ctx.Err()
		case <-time.After(opts.PollInterval):
		}
	}
}

// observeMasters reads the set's masters, lowest index first (then oldest), with whether each
// has the template's networks and groups and is Running with a Ready Node.
func observeMasters(ctx context.Context, mc machineclient.Interface, kc kubernetes.Interface, cpms *machinev1.ControlPlaneMachineSet, template *ProviderSpec) ([]master, error) {
	list, err := controlPlaneMachines(ctx, mc, cpms)
	if err != nil {
		return nil, err
	}
	var out []master
	for i := range list.Items {
		m := &list.Items[i]
		o := master{name: m.Name, index: masterIndex(m.Name), deleting: m.DeletionTimestamp != nil, created: m.CreationTimestamp.Time,
			canary: m.Annotations[rollout.CanaryAnnotation]}
		if spec, err := DecodeProviderSpec(machineProviderSpec(m)); err == nil {
			o.onTemplate = UpToDate(template, spec)
		}
		if ready, err := machineReady(ctx, kc, m); err != nil {
			return nil, err
		} else {
			o.ready = ready
		}
		if m.Status.Phase != nil {
			o.phase = *m.Status.Phase
			o.failed = o.phase == machinev1beta1.PhaseFailed
		}
		if m.Status.ErrorMessage != nil {
			o.message = *m.Status.ErrorMessage
		}
		if o.onTemplate && !o.ready && !o.deleting && !o.failed {
			events, err := (&roller{kc: kc}).warnings(ctx, m.Name)
			if err != nil {
				return nil, err
			}
			o.warning, o.warnings = rollout.NewestWarning(events)
		}
		out = append(out, o)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].index != out[j].index {
			return out[i].index < out[j].index
		}
		return out[i].created.Before(out[j].created)
	})
	return out, nil
}

// controlPlaneMachines are the Machines the set selects: its masters.
func controlPlaneMachines(ctx context.Context, mc machineclient.Interface, cpms *machinev1.ControlPlaneMachineSet) (*machinev1beta1.MachineList, error) {
	selector, err := metav1.LabelSelectorAsSelector(&cpms.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("%s %s: spec.selector: %w", ControlPlaneKind, cpms.Name, err)
	}
	list, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, listError("Machines", err)
	}
	return list, nil
}

// machineReady: the Machine is Running and its Node is Ready.
func machineReady(ctx context.Context, kc kubernetes.Interface, m *machinev1beta1.Machine) (bool, error) {
	if m.Status.Phase == nil || *m.Status.Phase != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil {
		return false, nil
	}
	n, err := kc.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Node %s of master %s: %w", m.Status.NodeRef.Name, m.Name, err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// masterIndex is the number that ends a master's name (<infraID>-master-0, or a replacement's
// <prefix>-<random>-0), as the control-plane-machine-set operator groups them; -1 when none.
func masterIndex(name string) int {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// mastersAtRest says whether a master may go: every index has one master, Running with a Ready
// Node, none is being deleted, and the set counts every replica ready; else why not.
func mastersAtRest(cpms *machinev1.ControlPlaneMachineSet, masters []master, replicas int) (bool, string) {
	var why []string
	live, indexes := 0, map[int]int{}
	for _, m := range masters {
		switch {
		case m.deleting:
			why = append(why, "master "+m.name+" is being deleted")
		case !m.ready:
			why = append(why, "master "+m.name+" is not Running with a Ready Node yet")
		}
		if !m.deleting {
			live++
			indexes[m.index]++
		}
	}
	if live != replicas {
		why = append(why, fmt.Sprintf("%d masters, the set wants %d", live, replicas))
	}
	for i, n := range indexes {
		if n > 1 {
			why = append(why, fmt.Sprintf("index %d has %d masters (a replacement under way)", i, n))
		}
	}
	if st := cpms.Status; int(st.ReadyReplicas) != replicas {
		why = append(why, fmt.Sprintf("the set counts %d of %d masters ready", st.ReadyReplicas, replicas))
	}
	slices.Sort(why)
	return len(why) == 0, strings.Join(slices.Compact(why), "; ")
}

// refusedMaster says why the rollout must stop when a new master cannot be made: its Machine
// Failed, or the machine controller was refused the same way rollout.RepeatedWarnings times (a
// storage subnet without a free address, a port quota, a group the network refuses). The cause
// would stop every other master too, and waiting would only end at the timeout. Under OnDelete
// the old master stays until the new one's etcd member is in (etcd's hook), under RollingUpdate
// until the new one is Ready: no master is lost while it is fixed. "" when none is refused.
func refusedMaster(masters []master, strategy machinev1.ControlPlaneMachineSetStrategyType) string {
	for _, m := range masters {
		var what string
		switch {
		case !m.onTemplate || m.deleting || m.ready:
			continue
		case m.failed:
			what = fmt.Sprintf("new master %s failed: %s", m.name, cmp.Or(m.message, "phase Failed, no error message"))
		case m.warnings >= rollout.RepeatedWarnings:
			what = fmt.Sprintf("new master %s could not be made: the machine controller tried %d times and was refused each time (phase %s): %s",
				m.name, m.warnings, cmp.Or(m.phase, "unset"), m.warning)
		default:
			continue
		}
		next := "The old master it replaces stays until the new one is Ready and its etcd member is in. Fix the cause (free addresses in the storage subnet, raise the quota), then run manila-setup controlplane rollout again. "
		if strategy == machinev1.RollingUpdate {
			next += "The control-plane-machine-set operator keeps trying meanwhile. To take the change back instead: manila-setup controlplane patch --remove --force (the set is busy with this replacement); the operator then deletes " + m.name + " and keeps the old master."
		} else {
			next += "To take the change back instead: manila-setup controlplane patch --remove --force (the set is busy with this replacement), then delete Machine " + m.name + ": its replacement is made without the storage network, and the old master goes once it is in."
		}
		return what + ". " + next
	}
	return ""
}

// firstReplacement is the oldest master on the template that was not when the rollout began
// and is ready: the first new master, the canary.
func firstReplacement(masters []master, before map[string]bool) *master {
	var first *master
	for i := range masters {
		m := &masters[i]
		if m.onTemplate && !before[m.name] && !m.deleting && m.ready && (first == nil || m.created.Before(first.created)) {
			first = m
		}
	}
	return first
}

// checkMaster runs the canary on a new master, with the storage networks the set's record names.
func checkMaster(ctx context.Context, mc machineclient.Interface, kc kubernetes.Interface, cpms *machinev1.ControlPlaneMachineSet, name string, canary rollout.Checker) (rollout.Verdict, error) {
	r := &roller{mc: mc, kc: kc}
	v := rollout.SetView{Name: ControlPlaneKind + " " + cpms.Name}
	if rec := attach.RecordIn(cpms.Annotations); rec != nil {
		v.StorageNetworks = rec.Networks
	}
	f, err := r.Facts(ctx, v, name)
	if err != nil {
		return rollout.Verdict{}, err
	}
	verdict, err := canary.Check(ctx, f)
	if err != nil {
		return verdict, fmt.Errorf("checking the new master %s: %w", name, err)
	}
	value := rollout.CanaryPassed
	if len(verdict.Problems) > 0 {
		value = rollout.CanaryFailedPrefix + strings.Join(verdict.Problems, "; ")
	}
	if err := r.MarkCanary(ctx, name, value); err != nil {
		return verdict, fmt.Errorf("recording the check on master %s: %w", name, err)
	}
	return verdict, nil
}

func orWaiting(why string, outdated []master) string {
	if why != "" {
		return why
	}
	var names []string
	for _, m := range outdated {
		names = append(names, m.name)
	}
	return "to replace: " + strings.Join(names, ", ")
}
