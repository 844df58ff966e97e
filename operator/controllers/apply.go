package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/openshift/library-go/pkg/operator/resource/resourcemerge"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The apply functions below look at the informer cache first and call the API only when the
// object is missing or differs from what is required; library-go's resourceapply then does the
// merge (keeping what others own: extra labels and annotations, a user's default-class
// annotation, fields the apiserver defaults). In steady state: no GETs, no writes.

const (
	specHashAnnotation    = "operator.openshift.io/spec-hash"
	appliedHashAnnotation = "manila.csi.openstack.org/applied-hash"
	trustedCAHashAnnot    = "manila.csi.openstack.org/trusted-ca-hash"
)

func hashOf(v any) string {
	b, _ := json.Marshal(v)
	return fmt.Sprintf("%x", sha256.Sum256(b))
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

// applyObject applies one typed static object, using the cache to skip what is up to date and
// creating directly what the cache does not have (one request instead of a GET and a POST).
func (o *Operator) applyObject(ctx context.Context, obj runtime.Object) error {
	if done, err := o.createIfMissing(ctx, obj); done || err != nil {
		return err
	}
	c := o.kube
	switch req := obj.(type) {
	case *corev1.ServiceAccount:
		req = withAppliedHash(req, req.ObjectMeta)
		if ex, err := o.nsInformers.Core().V1().ServiceAccounts().Lister().ServiceAccounts(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *corev1.Service:
		req = withAppliedHash(req, req.Spec)
		if ex, err := o.nsInformers.Core().V1().Services().Lister().Services(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *corev1.ConfigMap:
		// The trusted CA ConfigMap: its data belongs to the cluster network operator, which
		// injects the bundle; only create it and keep its labels.
		ex, err := o.nsInformers.Core().V1().ConfigMaps().Lister().ConfigMaps(req.Namespace).Get(req.Name)
		if err == nil {
			if metaContains(ex, req) {
				return nil
			}
			upd := ex.DeepCopy()
			changed := false
			resourcemerge.EnsureObjectMeta(&changed, &upd.ObjectMeta, req.ObjectMeta)
			_, err = c.CoreV1().ConfigMaps(req.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
			return err
		}
		_, err = c.CoreV1().ConfigMaps(req.Namespace).Create(ctx, req, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// There, but without the operator's label, so not in its cache: label it once.
			ex, err := c.CoreV1().ConfigMaps(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			resourcemerge.EnsureObjectMeta(&changed, &ex.ObjectMeta, req.ObjectMeta)
			if changed {
				_, err = c.CoreV1().ConfigMaps(req.Namespace).Update(ctx, ex, metav1.UpdateOptions{})
			}
			return err
		}
		return err
	case *rbacv1.ClusterRole:
		if ex, err := o.clusterInformers.Rbac().V1().ClusterRoles().Lister().Get(req.Name); err == nil && metaContains(ex, req) && equality.Semantic.DeepEqual(ex.Rules, req.Rules) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *rbacv1.ClusterRoleBinding:
		if ex, err := o.clusterInformers.Rbac().V1().ClusterRoleBindings().Lister().Get(req.Name); err == nil && metaContains(ex, req) &&
			equality.Semantic.DeepEqual(ex.Subjects, req.Subjects) && ex.RoleRef == req.RoleRef {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *rbacv1.Role:
		if ex, err := o.nsInformers.Rbac().V1().Roles().Lister().Roles(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) && equality.Semantic.DeepEqual(ex.Rules, req.Rules) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *rbacv1.RoleBinding:
		if ex, err := o.nsInformers.Rbac().V1().RoleBindings().Lister().RoleBindings(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) &&
			equality.Semantic.DeepEqual(ex.Subjects, req.Subjects) && ex.RoleRef == req.RoleRef {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *policyv1.PodDisruptionBudget:
		if ex, err := o.nsInformers.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) &&
			equality.Semantic.DeepEqual(ex.Spec.MaxUnavailable, req.Spec.MaxUnavailable) && equality.Semantic.DeepEqual(ex.Spec.Selector, req.Spec.Selector) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *storagev1.CSIDriver:
		probe := req.DeepCopy()
		if err := setSpecHash(&probe.ObjectMeta, probe.Spec); err != nil {
			return err
		}
		if ex, err := o.clusterInformers.Storage().V1().CSIDrivers().Lister().Get(req.Name); err == nil && metaContains(ex, probe) {
			return nil
		}
		_, err := putTyped(ctx, o, probe)
		return err
	}
	return fmt.Errorf("applyObject: unsupported type %T", obj)
}

// createIfMissing creates obj when the cache has no object of that name. done is false when the
// object exists (or turned out to exist): the caller then compares and updates.
func (o *Operator) createIfMissing(ctx context.Context, obj runtime.Object) (done bool, err error) {
	c, ns := o.kube, o.cfg.Namespace
	var lerr error
	switch v := obj.(type) {
	case *corev1.ServiceAccount:
		if _, lerr = o.nsInformers.Core().V1().ServiceAccounts().Lister().ServiceAccounts(ns).Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, withAppliedHash(v.DeepCopy(), v.ObjectMeta), metav1.CreateOptions{})
		}
	case *corev1.Service:
		if _, lerr = o.nsInformers.Core().V1().Services().Lister().Services(ns).Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.CoreV1().Services(ns).Create(ctx, withAppliedHash(v.DeepCopy(), v.Spec), metav1.CreateOptions{})
		}
	case *rbacv1.ClusterRole:
		if _, lerr = o.clusterInformers.Rbac().V1().ClusterRoles().Lister().Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.RbacV1().ClusterRoles().Create(ctx, v, metav1.CreateOptions{})
		}
	case *rbacv1.ClusterRoleBinding:
		if _, lerr = o.clusterInformers.Rbac().V1().ClusterRoleBindings().Lister().Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, v, metav1.CreateOptions{})
		}
	case *rbacv1.Role:
		if _, lerr = o.nsInformers.Rbac().V1().Roles().Lister().Roles(ns).Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.RbacV1().Roles(ns).Create(ctx, v, metav1.CreateOptions{})
		}
	case *rbacv1.RoleBinding:
		if _, lerr = o.nsInformers.Rbac().V1().RoleBindings().Lister().RoleBindings(ns).Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.RbacV1().RoleBindings(ns).Create(ctx, v, metav1.CreateOptions{})
		}
	case *policyv1.PodDisruptionBudget:
		if _, lerr = o.nsInformers.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(ns).Get(v.Name); apierrors.IsNotFound(lerr) {
			_, err = c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, v, metav1.CreateOptions{})
		}
	default:
		return false, nil
	}
	if !apierrors.IsNotFound(lerr) {
		return false, nil
	}
	if apierrors.IsAlreadyExists(err) {
		return false, nil // the cache was behind: compare and update as usual
	}
	if err == nil {
		kind := reflect.TypeOf(obj).Elem().Name()
		o.recorder.Eventf(kind+"Created", "Created %s %s", kind, obj.(metav1.Object).GetName())
	}
	return true, err
}

// applyUnstructured applies a ServiceMonitor or VolumeSnapshotClass, skipping it when the
// cached copy carries the same applied hash.
func (o *Operator) applyUnstructured(ctx context.Context, gvr schema.GroupVersionResource, req *unstructured.Unstructured) (ready bool, err error) {
	content := req.DeepCopy().Object
	delete(content, "metadata")
	req = withAppliedHash(req, content)
	lister, synced := o.dynamicLister(gvr)
	if !synced {
		return false, nil
	}
	if ex, err := lister.Get(req.GetName()); err == nil {
		if m, ok := ex.(metav1.Object); ok && metaContains(m, req) {
			return true, nil
		}
	}
	_, err = o.put(ctx, gvr, req)
	return true, err
}

// applyDeployment applies the controller Deployment. lastGeneration is the generation the
// operator last wrote (status.generations): a different generation in the cache means
// someone else changed the spec, and the operator's version is restored.
func (o *Operator) applyDeployment(ctx context.Context, req *appsv1.Deployment, lastGeneration int64) (*appsv1.Deployment, error) {
	probe := req.DeepCopy()
	if err := setSpecHash(&probe.ObjectMeta, probe.Spec); err != nil {
		return nil, err
	}
	ex, err := o.nsInformers.Apps().V1().Deployments().Lister().Deployments(req.Namespace).Get(req.Name)
	if err == nil && ex.DeletionTimestamp == nil && ex.Generation == lastGeneration && metaContains(ex, probe) {
		return ex, nil
	}
	return putTyped(ctx, o, probe)
}

// applyDaemonSet is applyDeployment for DaemonSets.
func (o *Operator) applyDaemonSet(ctx context.Context, req *appsv1.DaemonSet, lastGeneration int64) (*appsv1.DaemonSet, error) {
	probe := req.DeepCopy()
	if err := setSpecHash(&probe.ObjectMeta, probe.Spec); err != nil {
		return nil, err
	}
	ex, err := o.nsInformers.Apps().V1().DaemonSets().Lister().DaemonSets(req.Namespace).Get(req.Name)
	if err == nil && ex.DeletionTimestamp == nil && ex.Generation == lastGeneration && metaContains(ex, probe) {
		return ex, nil
	}
	return putTyped(ctx, o, probe)
}

// deleteIfPresent deletes an object the cache still shows, for managementState Removed.
func (o *Operator) deleteIfPresent(ctx context.Context, obj runtime.Object) error {
	var err error
	ns := o.cfg.Namespace
	c := o.kube
	opts := metav1.DeleteOptions{}
	switch v := obj.(type) {
	case *corev1.ServiceAccount:
		if _, e := o.nsInformers.Core().V1().ServiceAccounts().Lister().ServiceAccounts(ns).Get(v.Name); e == nil {
			err = c.CoreV1().ServiceAccounts(ns).Delete(ctx, v.Name, opts)
		}
	case *corev1.Service:
		if _, e := o.nsInformers.Core().V1().Services().Lister().Services(ns).Get(v.Name); e == nil {
			err = c.CoreV1().Services(ns).Delete(ctx, v.Name, opts)
		}
	case *corev1.ConfigMap:
		if _, e := o.nsInformers.Core().V1().ConfigMaps().Lister().ConfigMaps(ns).Get(v.Name); e == nil {
			err = c.CoreV1().ConfigMaps(ns).Delete(ctx, v.Name, opts)
		}
	case *corev1.Secret:
		if _, e := o.nsInformers.Core().V1().Secrets().Lister().Secrets(ns).Get(v.Name); e == nil {
			err = c.CoreV1().Secrets(ns).Delete(ctx, v.Name, opts)
		}
	case *rbacv1.ClusterRole:
		if _, e := o.clusterInformers.Rbac().V1().ClusterRoles().Lister().Get(v.Name); e == nil {
			err = c.RbacV1().ClusterRoles().Delete(ctx, v.Name, opts)
		}
	case *rbacv1.ClusterRoleBinding:
		if _, e := o.clusterInformers.Rbac().V1().ClusterRoleBindings().Lister().Get(v.Name); e == nil {
			err = c.RbacV1().ClusterRoleBindings().Delete(ctx, v.Name, opts)
		}
	case *rbacv1.Role:
		if _, e := o.nsInformers.Rbac().V1().Roles().Lister().Roles(ns).Get(v.Name); e == nil {
			err = c.RbacV1().Roles(ns).Delete(ctx, v.Name, opts)
		}
	case *rbacv1.RoleBinding:
		if _, e := o.nsInformers.Rbac().V1().RoleBindings().Lister().RoleBindings(ns).Get(v.Name); e == nil {
			err = c.RbacV1().RoleBindings(ns).Delete(ctx, v.Name, opts)
		}
	case *policyv1.PodDisruptionBudget:
		if _, e := o.nsInformers.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(ns).Get(v.Name); e == nil {
			err = c.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, v.Name, opts)
		}
	case *storagev1.CSIDriver:
		if _, e := o.clusterInformers.Storage().V1().CSIDrivers().Lister().Get(v.Name); e == nil {
			err = c.StorageV1().CSIDrivers().Delete(ctx, v.Name, opts)
		}
	case *storagev1.StorageClass:
		err = c.StorageV1().StorageClasses().Delete(ctx, v.Name, opts)
	case *appsv1.Deployment:
		if _, e := o.nsInformers.Apps().V1().Deployments().Lister().Deployments(ns).Get(v.Name); e == nil {
			err = c.AppsV1().Deployments(ns).Delete(ctx, v.Name, opts)
		}
	case *appsv1.DaemonSet:
		if _, e := o.nsInformers.Apps().V1().DaemonSets().Lister().DaemonSets(ns).Get(v.Name); e == nil {
			err = c.AppsV1().DaemonSets(ns).Delete(ctx, v.Name, opts)
		}
	default:
		return fmt.Errorf("deleteIfPresent: unsupported type %T", obj)
	}
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// mergePatch applies a JSON merge patch to a cluster-scoped StorageClass.
func (o *Operator) patchStorageClassAnnotations(ctx context.Context, name string, annotations map[string]*string) error {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = o.kube.StorageV1().StorageClasses().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	return err
}
