package nodepools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/attach"
)

// PlanRemove is what `nodepools patch --remove` does to a NodePool (attach.Remover): the
// additionalPorts on the networks its record says manila-setup added are removed, every other
// port (one the user added by hand included) stays, and the record is rewritten or removed.
// HyperShift replaces the NodePool's nodes itself when it changes.
func (t Target) PlanRemove(_ context.Context, u *unstructured.Unstructured, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	return t.PlanRemoveFile(u, r, now, by)
}

// PlanRemoveFile is PlanRemove for a NodePool of a file.
func (t Target) PlanRemoveFile(u *unstructured.Unstructured, r attach.Removal, now time.Time, by string) (attach.Plan, error) {
	var np hyperv1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
		return attach.Plan{}, fmt.Errorf("reading NodePool %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	res := attach.Result{Kind: "NodePool", Namespace: np.Namespace, Name: np.Name, HostedCluster: np.Spec.ClusterName}
	if np.Spec.Platform.Type != hyperv1.OpenStackPlatform || np.Spec.Platform.OpenStack == nil {
		res.Action, res.Reason = attach.ActionSkipped, fmt.Sprintf("platform %s, not OpenStack", orNone(string(np.Spec.Platform.Type)))
		return attach.Plan{Result: res}, nil
	}
	ports := np.Spec.Platform.OpenStack.AdditionalPorts
	never := func(string) bool { return false } // a NodePool has no security groups of its own
	d, err := r.Decide(t.Ref(u), attach.RecordIn(np.Annotations), func(id string) bool { return hasNetwork(ports, id) }, never, now, by)
	if err != nil {
		return attach.Plan{}, err
	}
	res = attach.RemovedResult(res, d)
	if !d.Changed() {
		return attach.Plan{Result: res}, nil
	}
	var ops []jsonPatchOp
	if np.ResourceVersion != "" {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/resourceVersion", Value: np.ResourceVersion})
	}
	var kept []hyperv1.PortSpec
	var drop []int
	for i, ps := range ports {
		if ps.Network != nil && ps.Network.ID != nil && attach.ContainsID(d.Networks, *ps.Network.ID) {
			drop = append(drop, i)
		} else {
			kept = append(kept, ps)
		}
	}
	const portsPath = "/spec/platform/openstack/additionalPorts"
	if len(drop) > 0 && len(kept) == 0 {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: portsPath})
	} else {
		for _, i := range slices.Backward(drop) {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: portsPath + "/" + strconv.Itoa(i)})
		}
	}
	for _, op := range d.RecordOps(np.Annotations) {
		ops = append(ops, jsonPatchOp(op))
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return attach.Plan{}, err
	}
	before := np.Spec.Platform.OpenStack
	diff := func() string {
		after := *before
		after.AdditionalPorts = kept
		return attach.YAMLDiff(fmt.Sprintf("NodePool %s/%s spec.platform.openstack", np.Namespace, np.Name), before, &after)
	}
	return attach.Plan{Result: res, Change: attach.FileChange{Patch: patch}, Diff: diff}, nil
}
