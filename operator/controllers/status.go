package controllers

import (
	"context"
	"encoding/json"
	"time"

	"github.com/manila-setup/manila-setup/operator"
	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// operatorStatus is one controller's part of the ClusterCSIDriver status. Each controller
// writes its part by server-side apply under a field manager of its own, so controllers
// never conflict, and a condition a controller stops reporting goes away with it.
type operatorStatus struct {
	ObservedGeneration int64                          `json:"observedGeneration,omitempty"`
	Version            string                         `json:"version,omitempty"`
	Conditions         []operatorv1.OperatorCondition `json:"conditions,omitempty"`
	Generations        []operatorv1.GenerationStatus  `json:"generations,omitempty"`
}

func newStatus() *operatorStatus { return &operatorStatus{} }

func (s *operatorStatus) WithObservedGeneration(g int64) *operatorStatus {
	s.ObservedGeneration = g
	return s
}

func (s *operatorStatus) WithVersion(v string) *operatorStatus {
	s.Version = v
	return s
}

func (s *operatorStatus) WithConditions(c ...operatorv1.OperatorCondition) *operatorStatus {
	s.Conditions = append(s.Conditions, c...)
	return s
}

func (s *operatorStatus) WithGenerations(g ...operatorv1.GenerationStatus) *operatorStatus {
	s.Generations = append(s.Generations, g...)
	return s
}

func condition(t string, s operatorv1.ConditionStatus, reason, msg string) operatorv1.OperatorCondition {
	return operatorv1.OperatorCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

func findCondition(conds []operatorv1.OperatorCondition, t string) *operatorv1.OperatorCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// applyStatus writes this controller's part of the status, unless the cached status already
// says it and it is what this controller last wrote: no write in steady state. A condition
// keeps its lastTransitionTime while its status stays the same.
func (o *Operator) applyStatus(ctx context.Context, manager string, st *operatorStatus) error {
	d := o.clusterCSIDriver()
	if d == nil {
		return nil
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if ex := findCondition(d.Status.Conditions, c.Type); ex != nil && ex.Status == c.Status && !ex.LastTransitionTime.IsZero() {
			c.LastTransitionTime = ex.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
	}
	// The mode is read once: the body and where it goes must agree even if it changes meanwhile.
	companion := o.companion()
	apiVersion, kind, name := operatorv1.GroupVersion.String(), "ClusterCSIDriver", operator.DriverName
	if companion {
		apiVersion, kind, name = companionGVR.GroupVersion().String(), operator.CompanionKind, operator.CompanionName
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}, "status": st,
	})
	if err != nil {
		return err
	}
	o.statusMu.Lock()
	last := o.lastStatus[manager]
	o.statusMu.Unlock()
	if last == string(body) && statusHas(&d.Status.OperatorStatus, st) {
		return nil
	}
	if err := writeAllowed(ctx); err != nil {
		return err
	}
	if companion {
		_, err = o.kube.dynamic.Resource(companionGVR).Patch(ctx, name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: manager, Force: ptrTrue()}, "status")
	} else {
		err = o.kube.operator.Patch(types.ApplyPatchType).Resource("clustercsidrivers").Name(operator.DriverName).SubResource("status").
			Param("fieldManager", manager).Param("force", "true").Body(body).Do(ctx).Error()
	}
	if err == nil {
		o.statusMu.Lock()
		o.lastStatus[manager] = string(body)
		o.statusMu.Unlock()
	}
	return err
}

// statusHas reports whether the status already says everything st says.
func statusHas(have *operatorv1.OperatorStatus, st *operatorStatus) bool {
	if st.ObservedGeneration != 0 && have.ObservedGeneration != st.ObservedGeneration {
		return false
	}
	if st.Version != "" && have.Version != st.Version {
		return false
	}
	for _, c := range st.Conditions {
		ex := findCondition(have.Conditions, c.Type)
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

// generationFor finds the generation the operator last wrote for a workload.
func generationFor(gens []operatorv1.GenerationStatus, group, resource, namespace, name string) *operatorv1.GenerationStatus {
	for i := range gens {
		g := &gens[i]
		if g.Group == group && g.Resource == resource && g.Namespace == namespace && g.Name == name {
			return g
		}
	}
	return nil
}
