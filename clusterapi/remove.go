package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/attach"
)

// PlanRemove plans the removal of what o's record says manila-setup attached (attach.Remover):
// a new template without those ports and security groups, o pointed at it, the record
// rewritten or removed. Templates are not edited in place (Cluster API would not roll them).
func (t *Target) PlanRemove(ctx context.Context, o object, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	tmpl, err := t.template(ctx, o)
	if err != nil {
		return attach.Plan{}, err
	}
	pl, err := planRemoveFor(t.Ref(o), o, tmpl, r, by, now)
	if err != nil {
		return attach.Plan{}, err
	}
	return attach.Plan{Result: pl.result, Change: pl, Diff: pl.diff}, nil
}

// PlanRemoveFile is PlanRemove against the template of the file.
func (t *fileTarget) PlanRemoveFile(o object, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	return t.planFile(o, func(tmpl *unstructured.Unstructured) (*plan, error) {
		return planRemoveFor(t.Ref(o), o, tmpl, r, by, now)
	})
}

// planRemoveFor decides the removal from o, made from tmpl: the record of o says what is
// manila-setup's; the template's ports on those networks (by ID) and those security groups
// (by ID) go, every other port and group stays.
func planRemoveFor(ref attach.Ref, o object, tmpl *unstructured.Unstructured, r attach.Removal, by string, now time.Time) (*plan, error) {
	p, t := startPlan(o, tmpl)
	if t == nil {
		return p, nil
	}
	spec := t.Spec.Template.Spec
	d, err := r.Decide(ref, attach.RecordIn(o.u.GetAnnotations()),
		func(id string) bool { return hasPortOn(spec.Ports, id) },
		func(id string) bool { return hasGroup(spec.SecurityGroups, id) }, now, by)
	if err != nil {
		return nil, err
	}
	p.result = attach.RemovedResult(p.result, d)
	if !d.Changed() {
		return p, nil
	}
	const specPath = "/spec/template/spec"
	var ops []jsonPatchOp
	ops = append(ops, removeIndices(specPath+"/ports", len(spec.Ports), func(i int) bool {
		n := spec.Ports[i].Network
		return n != nil && n.ID != nil && attach.ContainsID(d.Networks, *n.ID)
	})...)
	ops = append(ops, removeIndices(specPath+"/securityGroups", len(spec.SecurityGroups), func(i int) bool {
		g := spec.SecurityGroups[i]
		return g.ID != nil && attach.ContainsID(d.SecurityGroups, *g.ID)
	})...)
	r0 := &p.result
	if len(ops) > 0 {
		// The template's record follows the set's: what is left of it, or none.
		if err := p.newTemplateRecording(tmpl, ops, func(annotations map[string]string) error {
			return leftRecord(annotations, d)
		}); err != nil {
			return nil, fmt.Errorf("%s: %w", o, err)
		}
		r0.OldTemplate, r0.Template = tmpl.GetName(), p.template.GetName()
		r0.Rolls = rolls(o.kind, o.u.GetNamespace())
	}
	var setOps []jsonPatchOp
	if rv := o.u.GetResourceVersion(); rv != "" {
		setOps = append(setOps, jsonPatchOp{Op: "add", Path: "/metadata/resourceVersion", Value: rv})
	}
	if p.template != nil {
		setOps = append(setOps, jsonPatchOp{Op: "add", Path: "/spec/template/spec/infrastructureRef/name", Value: p.template.GetName()})
	}
	for _, op := range d.RecordOps(o.u.GetAnnotations()) {
		setOps = append(setOps, jsonPatchOp(op))
	}
	p.patch, err = json.Marshal(setOps)
	return p, err
}

// removeIndices removes the items of the list at path (of n items) that drop picks, the last
// first; the whole list when none is left.
func removeIndices(path string, n int, drop func(int) bool) []jsonPatchOp {
	var picked []int
	for i := range n {
		if drop(i) {
			picked = append(picked, i)
		}
	}
	switch {
	case len(picked) == 0:
		return nil
	case len(picked) == n:
		return []jsonPatchOp{{Op: "remove", Path: path}}
	}
	var ops []jsonPatchOp
	for i := len(picked) - 1; i >= 0; i-- {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: path + "/" + strconv.Itoa(picked[i])})
	}
	return ops
}

// leftRecord writes what is left of the record into annotations, or removes it.
func leftRecord(annotations map[string]string, d attach.Detach) error {
	if d.Record == nil {
		delete(annotations, attach.Annotation)
		return nil
	}
	b, err := json.Marshal(d.Record)
	annotations[attach.Annotation] = string(b)
	return err
}

// RemovalNodes names the Nodes of the Machines of the sets and deployments a removal changes
// (the results of its dry run): those it replaces, by itself (a MachineDeployment) or through
// `clusterapi rollout` (a MachineSet). In another namespace than OpenShiftNamespace the Nodes
// are a workload cluster's, not read here: elsewhere says so, and names nothing.
func RemovalNodes(ctx context.Context, dyn dynamic.Interface, namespace string, results []attach.Result) (nodes []string, elsewhere string, err error) {
	var changed []attach.Result
	for _, r := range results {
		if r.Writes() && len(r.Removed()) > 0 {
			changed = append(changed, r)
		}
	}
	if len(changed) == 0 {
		return nil, "", nil
	}
	if namespace != OpenShiftNamespace {
		return nil, fmt.Sprintf("the Nodes of Cluster API Machines in namespace %s are a workload cluster's, which manila-setup does not read", namespace), nil
	}
	machines, err := dyn.Resource(MachineGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", listError("Machines", MachineGVR.GroupResource().String(), namespace, err)
	}
	for _, m := range machines.Items {
		node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		if node == "" || m.GetDeletionTimestamp() != nil || slices.Contains(nodes, node) {
			continue
		}
		labels := m.GetLabels()
		if slices.ContainsFunc(changed, func(r attach.Result) bool {
			return r.Kind == KindMachineSet && labels[clusterv1.MachineSetNameLabel] == r.Name ||
				r.Kind == KindMachineDeployment && labels[clusterv1.MachineDeploymentNameLabel] == r.Name
		}) {
			nodes = append(nodes, node)
		}
	}
	slices.Sort(nodes)
	return nodes, "", nil
}
