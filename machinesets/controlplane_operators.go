package machinesets

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ControlPlaneOperators are the ClusterOperators a change of the masters leans on: etcd keeps
// quorum while a master is replaced, every master runs a kube-apiserver, machine-api makes the
// new master's server and control-plane-machine-set rolls them. Replacing masters while one of
// them is unavailable, progressing or degraded starts the rollout with the cluster already short.
var ControlPlaneOperators = []string{"etcd", "kube-apiserver", "machine-api", "control-plane-machine-set"}

var clusterOperatorGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}

// controlPlaneOperatorsBusy says which of ControlPlaneOperators are not Available, or are
// Progressing or Degraded ("" when all are well), each with its condition's message. A cluster
// that reports none of them (no OpenShift cluster version operator) is not judged; one that
// reports some and lacks others names those as missing.
func controlPlaneOperatorsBusy(ctx context.Context, dyn dynamic.Interface) (string, error) {
	if dyn == nil {
		return "", nil
	}
	list, err := dyn.Resource(clusterOperatorGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the ClusterOperators (%s) before changing the masters: %w", strings.Join(ControlPlaneOperators, ", "), err)
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		byName[list.Items[i].GetName()] = &list.Items[i]
	}
	var why, missing []string
	for _, name := range ControlPlaneOperators {
		co, ok := byName[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		if bad := operatorConditions(co); bad != "" {
			why = append(why, "ClusterOperator "+name+" "+bad)
		}
	}
	if len(missing) == len(ControlPlaneOperators) {
		return "", nil
	}
	if len(missing) > 0 {
		why = append(why, "ClusterOperators "+strings.Join(missing, ", ")+" are not reported")
	}
	return strings.Join(why, "; "), nil
}

// operatorConditions says what is wrong with a ClusterOperator's conditions: not Available,
// Progressing or Degraded ("" when none).
func operatorConditions(co *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(co.Object, "status", "conditions")
	state := map[string][2]string{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		if msg == "" {
			msg, _ = m["reason"].(string)
		}
		state[t] = [2]string{s, msg}
	}
	var bad []string
	if a := state["Available"]; a[0] != "True" {
		bad = append(bad, "is not Available"+withMessage(a[1]))
	}
	for _, t := range []string{"Progressing", "Degraded"} {
		if c := state[t]; c[0] == "True" {
			bad = append(bad, "is "+t+withMessage(c[1]))
		}
	}
	return strings.Join(bad, " and ")
}

func withMessage(m string) string {
	if m == "" {
		return ""
	}
	return " (" + m + ")"
}
