package deploy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/manila-setup/manila-setup/operator"
)

// installFieldManager is the field manager of `operator install`.
const installFieldManager = "manila-setup"

// ourManagers are the field managers of this product: the installer and the operator in either
// mode. ourLabels are the values of app.kubernetes.io/managed-by on what it writes.
var (
	ourManagers = map[string]bool{installFieldManager: true, operator.OperatorName: true, operator.CompanionOperatorName: true}
	ourLabels   = map[string]bool{"manila-setup": true, operator.ManagedByValue: true}
)

// OwnershipError says why Install wrote nothing: objects it would write exist and are another
// manager's, or it would take fields another manager set.
type OwnershipError struct {
	// Problems, one per object: kind/namespace/name, and whose it is or the conflicting fields.
	Problems []string
}

func (e *OwnershipError) Error() string {
	return fmt.Sprintf("nothing installed: %d object(s) that install would write are not manila-setup's alone:\n  - %s\n"+
		"Another component owns them, or a user changed them: remove or hand them over, or give --force-conflicts to "+
		"take them over (their manager may write them back)", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// installer writes rendered objects with server-side apply.
type installer struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	force  bool
	// retake are the objects whose only conflicts are with the operator's own fields: install
	// takes those back with force (an install again resets what it owns).
	retake map[string]bool
}

// resource is the client of u's kind, or an error when the cluster does not serve the kind.
func (in *installer) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		in.mapper.Reset()
		if m, err = in.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return nil, err
		}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return in.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return in.dyn.Resource(m.Resource), nil
}

// apply writes u (or tries it, with dryRun), forcing only when the user asked.
func (in *installer) apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) error {
	ri, err := in.resource(u)
	if err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	opts := metav1.ApplyOptions{FieldManager: installFieldManager, Force: in.force || in.retake[objectKey(u)]}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Apply(ctx, u.GetName(), u, opts); err != nil {
		if apierrors.IsConflict(err) {
			return &conflictError{OwnershipError: OwnershipError{Problems: []string{objectKey(u) + ": " + conflictFields(err)}}, managers: conflictManagers(err)}
		}
		if u.GetKind() == "Secret" {
			// The apiserver's message may quote what was sent: only its reason.
			return fmt.Errorf("Secret %s/%s: %s", u.GetNamespace(), u.GetName(), apiReason(err))
		}
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// checkAll reads every object before anything is written. An object is written only when it is
// absent, or ours (our label or one of our field managers) with no other controller and no
// field of another manager in the way (a dry-run apply without force says which). A Namespace
// is shared: only its fields are checked. A CustomResourceDefinition that is not ours is the
// platform's or the user's: it is used as it is, and returned in skip.
func (in *installer) checkAll(ctx context.Context, objs []*unstructured.Unstructured) (skip map[string]bool, err error) {
	skip, in.retake = map[string]bool{}, map[string]bool{}
	if in.force {
		return skip, nil
	}
	var problems []string
	for _, u := range objs {
		ri, err := in.resource(u)
		if err != nil {
			// Its kind is not served yet (its CRD comes with this install): it cannot exist.
			continue
		}
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", objectKey(u), err)
		}
		mine := isOurs(cur)
		switch {
		case u.GetKind() == "CustomResourceDefinition" && !mine:
			skip[objectKey(u)] = true
			continue
		case foreignController(cur) != "":
			problems = append(problems, objectKey(u)+": controlled by "+foreignController(cur))
			continue
		case !mine && u.GetKind() != "Namespace":
			problems = append(problems, fmt.Sprintf("%s: exists and is not manila-setup's (written by %s)", objectKey(u), managersOf(cur)))
			continue
		}
		if err := in.apply(ctx, u, true); err != nil {
			var conflict *conflictError
			if !errors.As(err, &conflict) {
				return nil, err
			}
			if conflict.onlyOurs() {
				in.retake[objectKey(u)] = true
				continue
			}
			problems = append(problems, conflict.Problems...)
		}
	}
	if len(problems) > 0 {
		return nil, &OwnershipError{Problems: problems}
	}
	return skip, nil
}

// isOurs: our managed-by label, or one of our field managers among those who wrote it.
func isOurs(u *unstructured.Unstructured) bool {
	if ourLabels[u.GetLabels()[operator.LabelManagedBy]] {
		return true
	}
	for _, f := range u.GetManagedFields() {
		if ourManagers[f.Manager] {
			return true
		}
	}
	return false
}

// foreignController names the controller owner reference of u when there is one (nothing of
// ours is owned by another object).
func foreignController(u *unstructured.Unstructured) string {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return o.Kind + " " + o.Name
		}
	}
	return ""
}

// managersOf lists who wrote u's fields (not its status), or "no field manager".
func managersOf(u *unstructured.Unstructured) string {
	seen := map[string]bool{}
	var out []string
	for _, f := range u.GetManagedFields() {
		if f.Subresource != "" || seen[f.Manager] {
			continue
		}
		seen[f.Manager] = true
		out = append(out, fmt.Sprintf("%q", f.Manager))
	}
	if len(out) == 0 {
		return "no field manager"
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// conflictError is a dry-run apply's conflict: the fields, and the managers that own them.
type conflictError struct {
	OwnershipError
	managers []string
}

func (e *conflictError) onlyOurs() bool {
	for _, m := range e.managers {
		if !ourManagers[m] {
			return false
		}
	}
	return len(e.managers) > 0
}

// conflictManagers reads the managers out of the apiserver's conflict causes, whose messages
// read `conflict with "MANAGER"` (and, for an update, `using VERSION`).
func conflictManagers(err error) []string {
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		_, rest, found := strings.Cut(c.Message, `conflict with "`)
		name, _, closed := strings.Cut(rest, `"`)
		if !found || !closed {
			return nil // a message of another shape: not known to be ours
		}
		out = append(out, name)
	}
	return out
}

// conflictFields is the apiserver's list of conflicts: each field and the manager that owns it.
func conflictFields(err error) string {
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 {
		return err.Error()
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, fmt.Sprintf("%s (%s)", c.Field, c.Message))
	}
	return "fields owned by another manager: " + strings.Join(out, "; ")
}

// objectKey names an object as kind/namespace/name (kind/name when cluster-scoped).
func objectKey(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return strings.ToLower(u.GetKind()) + "/" + u.GetName()
	}
	return strings.ToLower(u.GetKind()) + "/" + u.GetNamespace() + "/" + u.GetName()
}
