package machinery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Status is one controller's part of the ClusterCSIDriver status. Each controller writes its
// part by server-side apply under a field manager of its own, so controllers never conflict,
// and a condition a controller stops reporting goes away with it.
type Status struct {
	ObservedGeneration int64                          `json:"observedGeneration,omitempty"`
	Version            string                         `json:"version,omitempty"`
	Conditions         []operatorv1.OperatorCondition `json:"conditions,omitempty"`
	Generations        []operatorv1.GenerationStatus  `json:"generations,omitempty"`
}

// NewStatus is an empty status part: applied, it removes what the controller reported before.
func NewStatus() *Status { return &Status{} }

func (s *Status) WithObservedGeneration(g int64) *Status {
	s.ObservedGeneration = g
	return s
}

func (s *Status) WithVersion(v string) *Status {
	s.Version = v
	return s
}

func (s *Status) WithConditions(c ...operatorv1.OperatorCondition) *Status {
	s.Conditions = append(s.Conditions, c...)
	return s
}

func (s *Status) WithGenerations(g ...operatorv1.GenerationStatus) *Status {
	s.Generations = append(s.Generations, g...)
	return s
}

// Condition builds an operator condition (its transition time is set when it is written).
func Condition(t string, s operatorv1.ConditionStatus, reason, msg string) operatorv1.OperatorCondition {
	return operatorv1.OperatorCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

// FindCondition returns the condition of type t, nil when there is none.
func FindCondition(conds []operatorv1.OperatorCondition, t string) *operatorv1.OperatorCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// StatusTarget is the object whose status the controllers write: the ClusterCSIDriver, or a
// custom resource of the same shape (the ManilaCompanion).
type StatusTarget struct {
	apiVersion, kind, name string
	patch                  func(ctx context.Context, manager string, body []byte) error
}

// ClusterCSIDriverStatus is the status of ClusterCSIDriver name, through the operator group's
// REST client.
func ClusterCSIDriverStatus(k *Clients, name string) StatusTarget {
	return StatusTarget{apiVersion: operatorv1.GroupVersion.String(), kind: "ClusterCSIDriver", name: name,
		patch: func(ctx context.Context, manager string, body []byte) error {
			return k.Operator.Patch(types.ApplyPatchType).Resource("clustercsidrivers").Name(name).SubResource("status").
				Param("fieldManager", manager).Param("force", "true").Body(body).Do(ctx).Error()
		}}
}

// CustomResourceStatus is the status of a custom resource, through the dynamic client.
func CustomResourceStatus(k *Clients, r CustomResource) StatusTarget {
	return StatusTarget{apiVersion: r.GVR.GroupVersion().String(), kind: r.Kind, name: r.Name,
		patch: func(ctx context.Context, manager string, body []byte) error {
			_, err := k.Dynamic.Resource(r.GVR).Patch(ctx, r.Name, types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true)}, "status")
			return err
		}}
}

// MessageRefresh is how often a controller's part of the status is written again when only the
// messages of its conditions changed. While a scale-up of hundreds of nodes runs, the counts the
// messages give ("120 of 147 pods available", "all 98 workers have an address ...") change at
// every evaluation; each write costs the operator, the apiserver and every watcher of the
// object. A change of a condition's status or reason, or of anything else, is written at once.
const MessageRefresh = 15 * time.Second

// Deferred is what StatusWriter.Apply returns when it held back a change of messages only:
// the controller syncs again After it (Controller does), and writes the messages then.
type Deferred struct{ After time.Duration }

func (d *Deferred) Error() string {
	return fmt.Sprintf("only condition messages changed since the last write: written within %s", d.After.Round(time.Second))
}

// IsDeferred reports whether err is (or wraps) a Deferred.
func IsDeferred(err error) bool {
	var d *Deferred
	return errors.As(err, &d)
}

// StatusWriter writes the controllers' parts of the status of one object.
type StatusWriter struct {
	// object reads the target from the cache, nil when it does not exist.
	object func() *operatorv1.ClusterCSIDriver
	target StatusTarget
	now    func() time.Time

	// What each controller (field manager) last wrote, the same without the messages, and when.
	mu      sync.Mutex
	last    map[string]string
	shape   map[string]string
	written map[string]time.Time
}

// NewStatusWriter writes the status of target; object reads it (in the ClusterCSIDriver type)
// from the cache.
func NewStatusWriter(object func() *operatorv1.ClusterCSIDriver, target StatusTarget) *StatusWriter {
	return &StatusWriter{object: object, target: target, now: time.Now,
		last: map[string]string{}, shape: map[string]string{}, written: map[string]time.Time{}}
}

// Apply writes this controller's part of the status, unless the cached status already says it
// and it is what this controller last wrote: no write in steady state. A condition keeps its
// lastTransitionTime while its status stays the same.
//
// A change of messages only, within MessageRefresh of this controller's last write, is held
// back: Apply returns a Deferred saying when to sync again.
func (w *StatusWriter) Apply(ctx context.Context, manager string, st *Status) error {
	d := w.object()
	if d == nil {
		return nil
	}
	clock := w.now()
	now := metav1.NewTime(clock.Truncate(time.Second))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if ex := FindCondition(d.Status.Conditions, c.Type); ex != nil && ex.Status == c.Status && !ex.LastTransitionTime.IsZero() {
			c.LastTransitionTime = ex.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": w.target.apiVersion, "kind": w.target.kind, "metadata": map[string]any{"name": w.target.name}, "status": st,
	})
	if err != nil {
		return err
	}
	shape, err := json.Marshal(withoutMessages(st))
	if err != nil {
		return err
	}
	w.mu.Lock()
	last, lastShape, written := w.last[manager], w.shape[manager], w.written[manager]
	w.mu.Unlock()
	if last == string(body) && StatusHas(&d.Status.OperatorStatus, st) {
		return nil
	}
	if since := clock.Sub(written); lastShape == string(shape) && since >= 0 && since < MessageRefresh &&
		StatusHas(&d.Status.OperatorStatus, withoutMessagesOf(st, d.Status.Conditions)) {
		return &Deferred{After: MessageRefresh - since}
	}
	if err := WriteAllowed(ctx); err != nil {
		return err
	}
	err = w.target.patch(ctx, manager, body)
	if err == nil {
		w.mu.Lock()
		w.last[manager], w.shape[manager], w.written[manager] = string(body), string(shape), clock
		w.mu.Unlock()
	}
	return err
}

// withoutMessages is st with its conditions' messages emptied: what a write changes besides them.
func withoutMessages(st *Status) *Status {
	return withoutMessagesOf(st, nil)
}

// withoutMessagesOf is st with each condition's message taken from have (the status as it
// is), empty where have has no such condition.
func withoutMessagesOf(st *Status, have []operatorv1.OperatorCondition) *Status {
	out := *st
	out.Conditions = make([]operatorv1.OperatorCondition, len(st.Conditions))
	for i, c := range st.Conditions {
		c.Message = ""
		if ex := FindCondition(have, c.Type); ex != nil {
			c.Message = ex.Message
		}
		out.Conditions[i] = c
	}
	return &out
}

// StatusHas reports whether the status already says everything st says.
func StatusHas(have *operatorv1.OperatorStatus, st *Status) bool {
	if st.ObservedGeneration != 0 && have.ObservedGeneration != st.ObservedGeneration {
		return false
	}
	if st.Version != "" && have.Version != st.Version {
		return false
	}
	for _, c := range st.Conditions {
		ex := FindCondition(have.Conditions, c.Type)
		if ex == nil || ex.Status != c.Status || ex.Reason != c.Reason || ex.Message != c.Message {
			return false
		}
	}
	for _, g := range st.Generations {
		found := false
		for _, h := range have.Generations {
			if h.Group == g.Group && h.Resource == g.Resource && h.Namespace == g.Namespace && h.Name == g.Name && h.LastGeneration == g.LastGeneration {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// GenerationFor finds the generation the operator last wrote for a workload.
func GenerationFor(gens []operatorv1.GenerationStatus, group, resource, namespace, name string) *operatorv1.GenerationStatus {
	for i := range gens {
		g := &gens[i]
		if g.Group == group && g.Resource == resource && g.Namespace == namespace && g.Name == name {
			return g
		}
	}
	return nil
}

// AvailabilityStatus is Available/Degraded for a controller that only applies objects.
func AvailabilityStatus(prefix string, err error, okMsg string) *Status {
	if err != nil {
		return NewStatus().WithConditions(
			Condition(prefix+"Available", operatorv1.ConditionFalse, "ApplyFailed", err.Error()),
			Condition(prefix+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", err.Error()),
		)
	}
	return NewStatus().WithConditions(
		Condition(prefix+"Available", operatorv1.ConditionTrue, "AsExpected", okMsg),
		Condition(prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
	)
}

// RemovedStatus reports managementState Removed.
func RemovedStatus(prefix string, err error) *Status {
	if err != nil {
		return NewStatus().WithConditions(
			Condition(prefix+"Available", operatorv1.ConditionFalse, "Removed", "managementState is Removed"),
			Condition(prefix+"Degraded", operatorv1.ConditionTrue, "RemovalFailed", err.Error()),
		)
	}
	return NewStatus().WithConditions(
		Condition(prefix+"Available", operatorv1.ConditionFalse, "Removed", "managementState is Removed: the operands are deleted"),
		Condition(prefix+"Degraded", operatorv1.ConditionFalse, "Removed", ""),
	)
}

// DeploymentStatus is Available/Progressing/Degraded of a Deployment.
func DeploymentStatus(prefix string, d *appsv1.Deployment) *Status {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	msg := fmt.Sprintf("Deployment %s: %d of %d pods available", d.Name, s.AvailableReplicas, want)
	avail := Condition(prefix+"Available", operatorv1.ConditionTrue, "AsExpected", msg)
	if s.AvailableReplicas == 0 {
		avail = Condition(prefix+"Available", operatorv1.ConditionFalse, "Deploying", msg+": no controller pod is ready yet (kubectl -n "+d.Namespace+" get pods -l component=controller)")
	}
	prog := Condition(prefix+"Progressing", operatorv1.ConditionFalse, "AsExpected", msg)
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > want {
		prog = Condition(prefix+"Progressing", operatorv1.ConditionTrue, "Deploying", msg)
	}
	return NewStatus().WithConditions(avail, prog,
		Condition(prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
}

// DaemonSetStatus is Available/Progressing/Degraded of a DaemonSet.
func DaemonSetStatus(prefix string, d *appsv1.DaemonSet) *Status {
	s := d.Status
	msg := fmt.Sprintf("DaemonSet %s: %d of %d pods available", d.Name, s.NumberAvailable, s.DesiredNumberScheduled)
	avail := Condition(prefix+"Available", operatorv1.ConditionTrue, "AsExpected", msg)
	if s.NumberAvailable == 0 && s.DesiredNumberScheduled > 0 || s.ObservedGeneration == 0 {
		avail = Condition(prefix+"Available", operatorv1.ConditionFalse, "Deploying", msg+": no node plugin pod is ready yet")
	}
	prog := Condition(prefix+"Progressing", operatorv1.ConditionFalse, "AsExpected", msg)
	if s.ObservedGeneration < d.Generation || s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled {
		prog = Condition(prefix+"Progressing", operatorv1.ConditionTrue, "Deploying", msg)
	}
	return NewStatus().WithConditions(avail, prog,
		Condition(prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
}
