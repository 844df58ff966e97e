package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/manila-setup/manila-setup/operator"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// The operator writes its operands by server-side apply under one field manager, through the
// REST client of each kind's group (kinds.go). The apiserver does the merge: labels,
// annotations and fields others set stay theirs (a user's default-class annotation on a
// StorageClass, what the apiserver defaults), and what the operator stops setting goes away.
// It applies only after the informer cache showed a difference, so in steady state it makes
// no request at all; an object missing from the cache is created by the same single request.

// fieldManager owns the operands' fields. Each controller's status has a manager of its own
// (status.go).
const fieldManager = operator.OperatorName

// companionFieldManager owns what the companion writes (its StorageClasses).
const companionFieldManager = operator.CompanionOperatorName

const (
	specHashAnnotation    = "operator.openshift.io/spec-hash"
	appliedHashAnnotation = "manila.csi.openstack.org/applied-hash"
	trustedCAHashAnnot    = "manila.csi.openstack.org/trusted-ca-hash"
)

// errNotCached is returned for a kind whose informer (created on first use, for a CRD that
// appeared at run time) has not listed yet: try again shortly.
var errNotCached = errors.New("not cached yet")

// apply makes the object in the cluster what required says, unless the cache shows it already
// is. It returns the object as the apiserver answered, or the cached one when nothing was
// written. A field that cannot change (a StorageClass's parameters, a binding's roleRef) makes
// it delete and re-create the object, keeping the labels and annotations others put on it.
func (o *Operator) apply(ctx context.Context, required runtime.Object) (runtime.Object, error) {
	k, err := kindOf(required)
	if err != nil {
		return nil, err
	}
	required = required.DeepCopyObject()
	meta := required.(metav1.Object)
	if k.namespaced && meta.GetNamespace() == "" {
		meta.SetNamespace(o.cfg.Namespace)
	}
	if k.stamp != nil {
		if err := k.stamp(required); err != nil {
			return nil, err
		}
	}
	cached, err := o.cached(k, meta.GetNamespace(), meta.GetName())
	if err != nil {
		return nil, err
	}
	if cached != nil && k.upToDate(cached, required) {
		return cached, nil
	}
	what := k.gvk.Kind + " " + qualifiedName(meta)
	body, err := applyBody(required, k)
	if err != nil {
		return nil, err
	}
	if cached != nil && k.drifted != nil && k.drifted(cached, required) {
		// Someone else changed it. An apply sets the operator's fields again but never
		// removes fields others own (an annotation an admin added to the pod template, a
		// Secret key): replace the content as a whole first. The apply below then changes
		// nothing but the field ownership.
		klog.Infof("%s was changed by someone else; restoring it", what)
		if err := o.replaceContent(ctx, k, body); err != nil {
			return nil, err
		}
	}
	out, err := o.serverSideApply(ctx, k, body)
	if apierrors.IsInvalid(err) && cached != nil {
		return o.recreate(ctx, k, cached, required, apiReason(err))
	}
	if err != nil {
		return nil, err
	}
	reason, verb := "Updated", "Updated"
	if cached == nil {
		reason, verb = "Created", "Created"
	}
	o.recordWrite(k, required, reason, verb+" "+what)
	return out, nil
}

func (o *Operator) recordWrite(k *kind, required runtime.Object, reason, msg string) {
	if k.detail != nil {
		msg += " (" + k.detail(required) + ")"
	}
	o.recorder.Eventf(k.gvk.Kind+reason, "%s", msg)
}

// recreate deletes the cached object and creates the required one, with the labels and
// annotations others had put on the old one. It creates by POST, not apply, so that those stay
// outside the operator's manager, as they were.
func (o *Operator) recreate(ctx context.Context, k *kind, cached, required runtime.Object, why string) (runtime.Object, error) {
	cm, rm := cached.(metav1.Object), required.(metav1.Object)
	what := k.gvk.Kind + " " + qualifiedName(rm)
	klog.Infof("%s: %s; re-creating it", what, why)
	uid := cm.GetUID()
	if err := o.remove(ctx, k, rm.GetNamespace(), rm.GetName(), &uid); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	fresh, err := applyBody(required, k)
	if err != nil {
		return nil, err
	}
	fresh.SetLabels(union(cm.GetLabels(), rm.GetLabels()))
	fresh.SetAnnotations(union(cm.GetAnnotations(), rm.GetAnnotations()))
	out, err := o.create(ctx, k, fresh)
	if err == nil {
		o.recordWrite(k, required, "Recreated", "Re-created "+what+": a field that cannot change had to")
	}
	return out, err
}

// cached returns the object of that namespace and name from the kind's informer, nil when the
// cache has none.
func (o *Operator) cached(k *kind, namespace, name string) (runtime.Object, error) {
	var indexer interface {
		GetByKey(string) (any, bool, error)
	}
	if k.informer != nil {
		indexer = k.informer(&o.inf).GetIndexer()
	} else {
		inf := o.dynamicInformer(k.gvr())
		if !inf.HasSynced() {
			return nil, errNotCached
		}
		indexer = inf.GetIndexer()
	}
	key := name
	if k.namespaced {
		key = namespace + "/" + name
	}
	obj, ok, err := indexer.GetByKey(key)
	if err != nil || !ok {
		return nil, err
	}
	return obj.(runtime.Object), nil
}

// inCache reports whether the cache holds an object of obj's kind and name.
func (o *Operator) inCache(obj runtime.Object) bool {
	k, err := kindOf(obj)
	if err != nil {
		return false
	}
	m := obj.(metav1.Object)
	ns := m.GetNamespace()
	if k.namespaced && ns == "" {
		ns = o.cfg.Namespace
	}
	cached, err := o.cached(k, ns, m.GetName())
	return err == nil && cached != nil
}

// deleteIfPresent deletes an object the cache still shows, for managementState Removed.
func (o *Operator) deleteIfPresent(ctx context.Context, obj runtime.Object) error {
	if !o.inCache(obj) {
		return nil
	}
	k, _ := kindOf(obj)
	m := obj.(metav1.Object)
	ns := m.GetNamespace()
	if k.namespaced && ns == "" {
		ns = o.cfg.Namespace
	}
	if err := o.remove(ctx, k, ns, m.GetName(), nil); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// serverSideApply sends an apply patch under the operator's field manager, forcing ownership
// of the fields it sets: they are the operator's to keep.
func (o *Operator) serverSideApply(ctx context.Context, k *kind, body *unstructured.Unstructured) (runtime.Object, error) {
	if err := writeAllowed(ctx); err != nil {
		return nil, err
	}
	b, err := json.Marshal(body.Object)
	if err != nil {
		return nil, err
	}
	if k.client == nil {
		ri := o.kube.dynamic.Resource(k.gvr())
		if k.namespaced {
			return ri.Namespace(body.GetNamespace()).Patch(ctx, body.GetName(), types.ApplyPatchType, b,
				metav1.PatchOptions{FieldManager: o.fieldManager(), Force: ptrTrue()})
		}
		return ri.Patch(ctx, body.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: o.fieldManager(), Force: ptrTrue()})
	}
	r := k.client(o.kube).Patch(types.ApplyPatchType).Resource(k.resource).Name(body.GetName()).
		Param("fieldManager", o.fieldManager()).Param("force", "true").Body(b)
	if k.namespaced {
		r = r.Namespace(body.GetNamespace())
	}
	return r.Do(ctx).Get()
}

func (o *Operator) create(ctx context.Context, k *kind, body *unstructured.Unstructured) (runtime.Object, error) {
	if err := writeAllowed(ctx); err != nil {
		return nil, err
	}
	if k.client == nil {
		ri := o.kube.dynamic.Resource(k.gvr())
		if k.namespaced {
			return ri.Namespace(body.GetNamespace()).Create(ctx, body, metav1.CreateOptions{FieldManager: o.fieldManager()})
		}
		return ri.Create(ctx, body, metav1.CreateOptions{FieldManager: o.fieldManager()})
	}
	b, err := json.Marshal(body.Object)
	if err != nil {
		return nil, err
	}
	r := k.client(o.kube).Post().Resource(k.resource).Param("fieldManager", o.fieldManager()).Body(b)
	if k.namespaced {
		r = r.Namespace(body.GetNamespace())
	}
	return r.Do(ctx).Get()
}

// remove deletes an object of the kind; with uid, only that very object.
func (o *Operator) remove(ctx context.Context, k *kind, namespace, name string, uid *types.UID) error {
	if err := writeAllowed(ctx); err != nil {
		return err
	}
	opts := metav1.DeleteOptions{}
	if uid != nil {
		opts.Preconditions = &metav1.Preconditions{UID: uid}
	}
	if k.client == nil {
		ri := o.kube.dynamic.Resource(k.gvr())
		if k.namespaced {
			return ri.Namespace(namespace).Delete(ctx, name, opts)
		}
		return ri.Delete(ctx, name, opts)
	}
	r := k.client(o.kube).Delete().Resource(k.resource).Name(name).Body(&opts)
	if k.namespaced {
		r = r.Namespace(namespace)
	}
	return r.Do(ctx).Error()
}

// applyBody is what the operator applies: the required object without its status and without
// the metadata the apiserver keeps (generation, resourceVersion, ...), and no nulls, which an
// apply would read as fields to own.
func applyBody(required runtime.Object, k *kind) (*unstructured.Unstructured, error) {
	u, err := contentOf(required, k)
	if err != nil {
		return nil, err
	}
	m := required.(metav1.Object)
	u.SetLabels(m.GetLabels())
	u.SetAnnotations(m.GetAnnotations())
	return u, nil
}

// contentOf is the object as JSON without status and with no metadata but its name and
// namespace, for an apply or a replacement.
func contentOf(obj runtime.Object, k *kind) (*unstructured.Unstructured, error) {
	var content map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		content = u.DeepCopy().Object
	} else {
		var err error
		if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
	}
	m := obj.(metav1.Object)
	u := &unstructured.Unstructured{Object: dropNulls(content)}
	delete(u.Object, "status")
	u.Object["metadata"] = map[string]any{}
	u.SetGroupVersionKind(k.gvk)
	u.SetName(m.GetName())
	if k.namespaced {
		u.SetNamespace(m.GetNamespace())
	}
	return u, nil
}

// replaceContent reads the live object and writes it back with every field but its metadata
// and status replaced by body's, keeping the labels and annotations others put on it.
func (o *Operator) replaceContent(ctx context.Context, k *kind, body *unstructured.Unstructured) error {
	if err := writeAllowed(ctx); err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = o.kube.dynamic.Resource(k.gvr())
	if k.namespaced {
		ri = o.kube.dynamic.Resource(k.gvr()).Namespace(body.GetNamespace())
	}
	live, err := ri.Get(ctx, body.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	for key := range live.Object {
		switch key {
		case "apiVersion", "kind", "metadata", "status":
		default:
			delete(live.Object, key)
		}
	}
	for key, v := range body.Object {
		switch key {
		case "apiVersion", "kind", "metadata":
		default:
			live.Object[key] = runtime.DeepCopyJSONValue(v)
		}
	}
	live.SetLabels(union(live.GetLabels(), body.GetLabels()))
	live.SetAnnotations(union(live.GetAnnotations(), body.GetAnnotations()))
	_, err = ri.Update(ctx, live, metav1.UpdateOptions{FieldManager: o.fieldManager()})
	return err
}

// dropNulls removes null values (a zero creationTimestamp, an unset pointer) from a JSON
// object, recursively.
func dropNulls(m map[string]any) map[string]any {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
	return m
}

// setSpecHash stamps a hash of the spec the operator wrote, so that a changed spec is seen
// from the cache without comparing defaulted fields. Same annotation and hash as library-go's,
// so objects written by earlier versions are not rewritten.
func setSpecHash(meta *metav1.ObjectMeta, spec any) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[specHashAnnotation] = fmt.Sprintf("%x", sha256.Sum256(b))
	return nil
}

func hashOf(v any) string {
	b, _ := json.Marshal(v)
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// withAppliedHash stamps the hash of the required object so that changes made by a newer
// operator (different assets) are noticed even where a semantic comparison would be costly.
func withAppliedHash[T metav1.Object](obj T, content any) T {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[appliedHashAnnotation] = hashOf(content)[:16]
	obj.SetAnnotations(a)
	return obj
}

// metaContains reports whether every required label and annotation is present with its value.
func metaContains(existing, required metav1.Object) bool {
	for k, v := range required.GetLabels() {
		if existing.GetLabels()[k] != v {
			return false
		}
	}
	for k, v := range required.GetAnnotations() {
		if existing.GetAnnotations()[k] != v {
			return false
		}
	}
	return true
}

func union(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

func qualifiedName(m metav1.Object) string {
	if ns := m.GetNamespace(); ns != "" {
		return ns + "/" + m.GetName()
	}
	return m.GetName()
}

func ptrTrue() *bool { b := true; return &b }

// patchStorageClassAnnotations sets or (nil) removes annotations of a StorageClass.
func (o *Operator) patchStorageClassAnnotations(ctx context.Context, name string, annotations map[string]*string) error {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	return o.kube.storage.Patch(types.MergePatchType).Resource("storageclasses").Name(name).Body(b).Do(ctx).Error()
}

// fieldManager is the field manager of the operator's writes in its mode.
func (o *Operator) fieldManager() string {
	if o.companion() {
		return companionFieldManager
	}
	return fieldManager
}
