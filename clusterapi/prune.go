package clusterapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
)

// prune deletes the templates that templates of manila-setup replaced (ReplacesAnnotation),
// once no MachineSet or MachineDeployment points at them (a MachineDeployment's older
// MachineSets, kept for a rollback, count) and no OpenStackMachine was made from them (CAPI
// marks those with the cloned-from-name annotation). It reads everything afresh, after the
// patches: two LISTs of the sets, one of the templates, one of the OpenStackMachines, and a
// DELETE with the template's UID and resourceVersion as preconditions per unused one.
func prune(ctx context.Context, dyn dynamic.Interface, namespace string) ([]TemplateResult, error) {
	templates, err := listTemplates(ctx, dyn, namespace)
	if err != nil {
		return nil, err
	}
	var candidates []string
	for _, t := range templates {
		if old := t.GetAnnotations()[ReplacesAnnotation]; old != "" && templates[old] != nil && !slices.Contains(candidates, old) {
			candidates = append(candidates, old)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	slices.Sort(candidates)
	objects, err := listObjects(ctx, dyn, namespace, nil)
	if err != nil {
		return nil, err
	}
	usedBy := map[string][]string{}
	for _, o := range objects {
		if ref := refOf(o.u); ref.isOpenStackTemplate() && templateNamespace(o, ref) == namespace {
			usedBy[ref.Name] = append(usedBy[ref.Name], fmt.Sprintf("%s %s", o.kind, o.u.GetName()))
		}
	}
	machines, err := dyn.Resource(OpenStackMachineGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		// Without the Machines, no template can be known unused: keep them all.
		var out []TemplateResult
		for _, name := range candidates {
			out = append(out, TemplateResult{Name: name, Reason: fmt.Sprintf("kept: the OpenStackMachines that may use it could not be listed (%v)", err)})
		}
		return out, nil
	}
	madeFrom := map[string]int{}
	for _, m := range machines.Items {
		madeFrom[m.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]]++
	}
	var out []TemplateResult
	for _, name := range candidates {
		t := templates[name]
		res := TemplateResult{Name: name}
		var users []string
		if n := madeFrom[name]; n > 0 {
			users = append(users, fmt.Sprintf("%d Machine(s)", n))
		}
		users = append(users, usedBy[name]...)
		if len(users) > 0 {
			res.Reason = "kept: used by " + strings.Join(users, ", ")
			out = append(out, res)
			continue
		}
		uid, rv := t.GetUID(), t.GetResourceVersion()
		err := dyn.Resource(TemplateGVR).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			res.Deleted = true
		case apierrors.IsConflict(err):
			res.Reason = "kept: it changed while it was being deleted; a later run looks again"
		default:
			return append(out, res), fmt.Errorf("deleting OpenStackMachineTemplate %s/%s, which nothing uses any more: %w", namespace, name, err)
		}
		out = append(out, res)
	}
	return out, nil
}
