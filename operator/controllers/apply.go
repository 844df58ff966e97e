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
// object is missing or differs from what is required; put (write.go) then does the
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
		if ex, err := o.lister.serviceAccounts.ServiceAccounts(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *corev1.Service:
		req = withAppliedHash(req, req.Spec)
		if ex, err := o.lister.services.Services(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *corev1.ConfigMap:
		// The trusted CA ConfigMap: its data belongs to the cluster network operator, which
		// injects the bundle; only create it and keep its labels.
		ex, err := o.lister.configMaps.ConfigMaps(req.Namespace).Get(req.Name)
		if err == nil {
			if metaContains(ex, req) {
				return nil
			}
			upd := ex.DeepCopy()
			changed := false
			resourcemerge.EnsureObjectMeta(&changed, &upd.ObjectMeta, req.ObjectMeta)
			_, err = c.configMaps(req.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
			return err
		}
		_, err = c.configMaps(req.Namespace).Create(ctx, req, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// There, but without the operator's label, so not in its cache: label it once.
			ex, err := c.configMaps(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			resourcemerge.EnsureObjectMeta(&changed, &ex.ObjectMeta, req.ObjectMeta)
			if changed {
				_, err = c.configMaps(req.Namespace).Update(ctx, ex, metav1.UpdateOptions{})
			}
			return err
		}
		return err
	case *rbacv1.ClusterRole:
		if ex, err := o.lister.clusterRoles.Get(req.Name); err == nil && metaContains(ex, req) && equality.Semantic.DeepEqual(ex.Rules, req.Rules) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *rbacv1.ClusterRoleBinding:
		if ex, err := o.lister.clusterRoleBindings.Get(req.Name); err == nil && metaContains(ex, req) &&
			equality.Semantic.DeepEqual(ex.Subjects, req.Subjects) && ex.RoleRef == req.RoleRef {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *rbacv1.Role:
		if ex, err := o.lister.roles.Roles(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) && equality.Semantic.DeepEqual(ex.Rules, req.Rules) {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *rbacv1.RoleBinding:
		if ex, err := o.lister.roleBindings.RoleBindings(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) &&
			equality.Semantic.DeepEqual(ex.Subjects, req.Subjects) && ex.RoleRef == req.RoleRef {
			return nil
		}
		_, err := putTyped(ctx, o, req)
		return err
	case *policyv1.PodDisruptionBudget:
		if ex, err := o.lister.pdbs.PodDisruptionBudgets(req.Namespace).Get(req.Name); err == nil && metaContains(ex, req) &&
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
		if ex, err := o.lister.csiDrivers.Get(req.Name); err == nil && metaContains(ex, probe) {
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
	switch v := obj.(type) {
	case *corev1.ServiceAccount:
		obj = withAppliedHash(v.DeepCopy(), v.ObjectMeta)
	case *corev1.Service:
		obj = withAppliedHash(v.DeepCopy(), v.Spec)
	case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding, *policyv1.PodDisruptionBudget:
	default:
		return false, nil
	}
	if o.inCache(obj) {
		return false, nil
	}
	err = o.kube.create(ctx, obj, o.cfg.Namespace)
	if apierrors.IsAlreadyExists(err) {
		return false, nil // the cache was behind: compare and update as usual
	}
	if err == nil {
		kind := reflect.TypeOf(obj).Elem().Name()
		o.recorder.Eventf(kind+"Created", "Created %s %s", kind, obj.(metav1.Object).GetName())
	}
	return true, err
}

// inCache reports whether the informer cache holds an object of obj's kind and name (in the
// operator namespace for namespaced kinds).
func (o *Operator) inCache(obj runtime.Object) bool {
	name := obj.(metav1.Object).GetName()
	ns := o.cfg.Namespace
	var err error
	switch obj.(type) {
	case *corev1.ServiceAccount:
		_, err = o.lister.serviceAccounts.ServiceAccounts(ns).Get(name)
	case *corev1.Service:
		_, err = o.lister.services.Services(ns).Get(name)
	case *corev1.ConfigMap:
		_, err = o.lister.configMaps.ConfigMaps(ns).Get(name)
	case *corev1.Secret:
		_, err = o.lister.secrets.Secrets(ns).Get(name)
	case *rbacv1.ClusterRole:
		_, err = o.lister.clusterRoles.Get(name)
	case *rbacv1.ClusterRoleBinding:
		_, err = o.lister.clusterRoleBindings.Get(name)
	case *rbacv1.Role:
		_, err = o.lister.roles.Roles(ns).Get(name)
	case *rbacv1.RoleBinding:
		_, err = o.lister.roleBindings.RoleBindings(ns).Get(name)
	case *policyv1.PodDisruptionBudget:
		_, err = o.lister.pdbs.PodDisruptionBudgets(ns).Get(name)
	case *storagev1.CSIDriver:
		_, err = o.lister.csiDrivers.Get(name)
	case *storagev1.StorageClass:
		_, err = o.lister.storageClasses.Get(name)
	case *appsv1.Deployment:
		_, err = o.lister.deployments.Deployments(ns).Get(name)
	case *appsv1.DaemonSet:
		_, err = o.lister.daemonSets.DaemonSets(ns).Get(name)
	default:
		return false
	}
	return err == nil
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
	ex, err := o.lister.deployments.Deployments(req.Namespace).Get(req.Name)
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
	ex, err := o.lister.daemonSets.DaemonSets(req.Namespace).Get(req.Name)
	if err == nil && ex.DeletionTimestamp == nil && ex.Generation == lastGeneration && metaContains(ex, probe) {
		return ex, nil
	}
	return putTyped(ctx, o, probe)
}

// deleteIfPresent deletes an object the cache still shows, for managementState Removed.
func (o *Operator) deleteIfPresent(ctx context.Context, obj runtime.Object) error {
	if !o.inCache(obj) {
		return nil
	}
	if err := o.kube.delete(ctx, obj, o.cfg.Namespace); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// patchStorageClassAnnotations sets or (nil) removes annotations of a StorageClass.
func (o *Operator) patchStorageClassAnnotations(ctx context.Context, name string, annotations map[string]*string) error {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	return o.kube.storage.Patch(types.MergePatchType).Resource("storageclasses").Name(name).Body(b).Do(ctx).Error()
}
