package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// The operator writes its objects itself rather than through library-go's resourceapply:
// that package links a scheme of every API group of Kubernetes and OpenShift, which cost the
// operator 7.5 MB of binary and 10 MiB of resident memory at start (3 MiB after 10 minutes)
// for thirteen functions (see docs/performance.md). Callers only write after the informer cache showed a difference, so
// the GET below is made only when something is to be changed.

// specHashAnnotation carries a hash of the spec the operator wrote, so that a changed spec is
// seen from the cache without comparing defaulted fields. Same annotation and hash as
// library-go's, so objects written by earlier versions are not rewritten.
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

// gvkOf returns the group, version, kind and resource of the typed objects the operator writes.
func gvkOf(obj runtime.Object) (schema.GroupVersionKind, string, error) {
	switch obj.(type) {
	case *corev1.ServiceAccount:
		return corev1.SchemeGroupVersion.WithKind("ServiceAccount"), "serviceaccounts", nil
	case *corev1.Service:
		return corev1.SchemeGroupVersion.WithKind("Service"), "services", nil
	case *corev1.ConfigMap:
		return corev1.SchemeGroupVersion.WithKind("ConfigMap"), "configmaps", nil
	case *corev1.Secret:
		return corev1.SchemeGroupVersion.WithKind("Secret"), "secrets", nil
	case *rbacv1.ClusterRole:
		return rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), "clusterroles", nil
	case *rbacv1.ClusterRoleBinding:
		return rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), "clusterrolebindings", nil
	case *rbacv1.Role:
		return rbacv1.SchemeGroupVersion.WithKind("Role"), "roles", nil
	case *rbacv1.RoleBinding:
		return rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), "rolebindings", nil
	case *policyv1.PodDisruptionBudget:
		return policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), "poddisruptionbudgets", nil
	case *storagev1.CSIDriver:
		return storagev1.SchemeGroupVersion.WithKind("CSIDriver"), "csidrivers", nil
	case *storagev1.StorageClass:
		return storagev1.SchemeGroupVersion.WithKind("StorageClass"), "storageclasses", nil
	case *appsv1.Deployment:
		return appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", nil
	case *appsv1.DaemonSet:
		return appsv1.SchemeGroupVersion.WithKind("DaemonSet"), "daemonsets", nil
	}
	return schema.GroupVersionKind{}, "", fmt.Errorf("no API resource known for %T", obj)
}

// putTyped writes a typed object (see put) and returns what the API answered, as the same type.
func putTyped[T runtime.Object](ctx context.Context, o *Operator, required T) (T, error) {
	var zero T
	gvk, resource, err := gvkOf(required)
	if err != nil {
		return zero, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(required)
	if err != nil {
		return zero, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	out, err := o.put(ctx, gvk.GroupVersion().WithResource(resource), u)
	if err != nil {
		return zero, err
	}
	result := reflect.New(reflect.TypeOf(required).Elem()).Interface().(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, result); err != nil {
		return zero, err
	}
	return result, nil
}

// put makes the object in the cluster what required says: it creates it when missing;
// otherwise it keeps the labels and annotations others set (a user's default-class annotation)
// and what the apiserver filled in (a Service's cluster IP, defaulted fields), replaces every
// field the operator sets (the spec one level down, so a Deployment's pod template is the
// operator's again), and writes only when that changes something. A field that cannot change
// (a StorageClass's parameters, a binding's roleRef) makes it delete and re-create the object.
func (o *Operator) put(ctx context.Context, gvr schema.GroupVersionResource, required *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = o.kube.dynamic.Resource(gvr)
	if ns := required.GetNamespace(); ns != "" {
		ri = o.kube.dynamic.Resource(gvr).Namespace(ns)
	}
	kind, name := required.GetKind(), required.GetName()
	live, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		out, err := ri.Create(ctx, required, metav1.CreateOptions{})
		if err == nil {
			o.recorder.Eventf(kind+"Created", "Created %s %s", kind, qualifiedName(required))
		}
		return out, err
	}
	if err != nil {
		return nil, err
	}
	desired := merged(live, required)
	if reflect.DeepEqual(desired.Object, live.Object) {
		return live, nil
	}
	out, err := ri.Update(ctx, desired, metav1.UpdateOptions{})
	if apierrors.IsInvalid(err) {
		// An immutable field differs: re-create, keeping what others put in the metadata.
		klog.Infof("%s %s: %s; re-creating it", kind, qualifiedName(required), apiReason(err))
		fresh := required.DeepCopy()
		fresh.SetLabels(union(live.GetLabels(), required.GetLabels()))
		fresh.SetAnnotations(union(live.GetAnnotations(), required.GetAnnotations()))
		if err := ri.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptrUID(live)}}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		out, err = ri.Create(ctx, fresh, metav1.CreateOptions{})
		if err == nil {
			o.recorder.Eventf(kind+"Recreated", "Re-created %s %s: a field that cannot change had to", kind, qualifiedName(required))
		}
		return out, err
	}
	if err == nil {
		o.recorder.Eventf(kind+"Updated", "Updated %s %s", kind, qualifiedName(required))
	}
	return out, err
}

// merged is live with required's labels and annotations added and required's fields set.
func merged(live, required *unstructured.Unstructured) *unstructured.Unstructured {
	out := live.DeepCopy()
	out.SetLabels(union(live.GetLabels(), required.GetLabels()))
	out.SetAnnotations(union(live.GetAnnotations(), required.GetAnnotations()))
	for k, v := range required.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		case "spec":
			want, ok1 := v.(map[string]any)
			have, ok2 := out.Object["spec"].(map[string]any)
			if ok1 && ok2 {
				for sk, sv := range want {
					have[sk] = runtime.DeepCopyJSONValue(sv)
				}
				continue
			}
		}
		out.Object[k] = runtime.DeepCopyJSONValue(v)
	}
	return out
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

func qualifiedName(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

func ptrUID(u *unstructured.Unstructured) *types.UID {
	uid := u.GetUID()
	return &uid
}
