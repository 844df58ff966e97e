package controllers

import (
	"fmt"
	"strings"

	"github.com/manila-setup/manila-setup/operator"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// kind is everything the operator knows about one kind of object it writes: its API resource,
// the REST client of its group, the informer that caches it, and how the cached object is
// compared with the required one. write.go does the rest the same way for every kind, so a new
// kind is one row of kindTable.
type kind struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
	// client is the REST client of the kind's group; nil for kinds outside the operator's
	// scheme (CRDs that may appear at run time), which go through the dynamic client and a
	// dynamic informer created on first use.
	client func(*kubeClients) rest.Interface
	// informer caches the kind (nil: dynamic, as client).
	informer func(*informerSet) cache.SharedIndexInformer
	// newObject returns an empty object of the kind (nil for dynamic kinds).
	newObject func() runtime.Object
	// stamp adds to the required object the hash annotation that upToDate compares, where
	// comparing the fields themselves would trip over what the apiserver defaults.
	stamp func(required runtime.Object) error
	// upToDate tells from the cache that the object already is as required: no write.
	upToDate func(cached, required runtime.Object) bool
	// drifted tells that others added to what the operator owns (a pod template annotation,
	// a key of its Secret). A server-side apply leaves others' fields alone, so the operator
	// then first takes the fields over (see write.go) and its apply removes them.
	drifted func(cached, required runtime.Object) bool
	// detail is added to the Event about a write (never a secret value).
	detail func(required runtime.Object) string
	// Workloads only: their pod template and their conditions.
	podTemplate func(runtime.Object) *corev1.PodTemplateSpec
	status      func(prefix string, obj runtime.Object) *operatorStatus
}

func (k *kind) gvr() schema.GroupVersionResource {
	return k.gvk.GroupVersion().WithResource(k.resource)
}

// row builds a kind of the operator's scheme with functions on its own Go type.
func row[T runtime.Object](k kind, upToDate func(cached, required T) bool) *kind {
	k.upToDate = func(c, r runtime.Object) bool { return upToDate(c.(T), r.(T)) }
	return &k
}

func sameRules(c, r []rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(c, r) }

func sameBinding(cs, rs []rbacv1.Subject, cr, rr rbacv1.RoleRef) bool {
	return equality.Semantic.DeepEqual(cs, rs) && cr == rr
}

func coreClient(k *kubeClients) rest.Interface       { return k.core }
func appsClient(k *kubeClients) rest.Interface       { return k.apps }
func rbacClient(k *kubeClients) rest.Interface       { return k.rbac }
func storageClient(k *kubeClients) rest.Interface    { return k.storage }
func policyClient(k *kubeClients) rest.Interface     { return k.policy }
func networkingClient(k *kubeClients) rest.Interface { return k.networking }

// kindTable lists every kind the operator writes.
var kindTable = []*kind{
	row(kind{gvk: corev1.SchemeGroupVersion.WithKind("ServiceAccount"), resource: "serviceaccounts", namespaced: true, client: coreClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.serviceAccounts },
		stamp: func(r runtime.Object) error {
			sa := r.(*corev1.ServiceAccount)
			withAppliedHash(sa, sa.ObjectMeta)
			return nil
		}},
		func(c, r *corev1.ServiceAccount) bool { return metaContains(c, r) }),
	row(kind{gvk: corev1.SchemeGroupVersion.WithKind("Service"), resource: "services", namespaced: true, client: coreClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.services },
		stamp:    func(r runtime.Object) error { svc := r.(*corev1.Service); withAppliedHash(svc, svc.Spec); return nil }},
		func(c, r *corev1.Service) bool { return metaContains(c, r) }),
	// The trusted CA ConfigMap: its data belongs to the cluster network operator, which injects
	// the bundle; the operator applies its metadata only, so it never owns the data.
	row(kind{gvk: corev1.SchemeGroupVersion.WithKind("ConfigMap"), resource: "configmaps", namespaced: true, client: coreClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.configMaps }},
		// Data counts only where the operator sets it (not in the CA bundle, which the cluster
		// network operator fills).
		func(c, r *corev1.ConfigMap) bool {
			return metaContains(c, r) && (r.Data == nil || equality.Semantic.DeepEqual(c.Data, r.Data))
		}),
	func() *kind {
		k := row(kind{gvk: corev1.SchemeGroupVersion.WithKind("Secret"), resource: "secrets", namespaced: true, client: coreClient,
			informer: func(s *informerSet) cache.SharedIndexInformer { return s.secrets },
			detail:   func(r runtime.Object) string { return "keys: " + keyList(r.(*corev1.Secret).Data) }},
			func(c, r *corev1.Secret) bool { return metaContains(c, r) && sameData(c.Data, r.Data) })
		// A key the operator does not set (left from other credentials, or by someone else) must go.
		k.drifted = func(c, r runtime.Object) bool {
			for key := range c.(*corev1.Secret).Data {
				if _, ok := r.(*corev1.Secret).Data[key]; !ok {
					return true
				}
			}
			return false
		}
		return k
	}(),
	row(kind{gvk: rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), resource: "clusterroles", client: rbacClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.clusterRoles }},
		func(c, r *rbacv1.ClusterRole) bool { return metaContains(c, r) && sameRules(c.Rules, r.Rules) }),
	row(kind{gvk: rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), resource: "clusterrolebindings", client: rbacClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.clusterRoleBindings }},
		func(c, r *rbacv1.ClusterRoleBinding) bool {
			return metaContains(c, r) && sameBinding(c.Subjects, r.Subjects, c.RoleRef, r.RoleRef)
		}),
	row(kind{gvk: rbacv1.SchemeGroupVersion.WithKind("Role"), resource: "roles", namespaced: true, client: rbacClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.roles }},
		func(c, r *rbacv1.Role) bool { return metaContains(c, r) && sameRules(c.Rules, r.Rules) }),
	row(kind{gvk: rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), resource: "rolebindings", namespaced: true, client: rbacClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.roleBindings }},
		func(c, r *rbacv1.RoleBinding) bool {
			return metaContains(c, r) && sameBinding(c.Subjects, r.Subjects, c.RoleRef, r.RoleRef)
		}),
	row(kind{gvk: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), resource: "poddisruptionbudgets", namespaced: true, client: policyClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.pdbs }},
		func(c, r *policyv1.PodDisruptionBudget) bool {
			return metaContains(c, r) && equality.Semantic.DeepEqual(c.Spec.MaxUnavailable, r.Spec.MaxUnavailable) &&
				equality.Semantic.DeepEqual(c.Spec.Selector, r.Spec.Selector) &&
				equality.Semantic.DeepEqual(c.Spec.UnhealthyPodEvictionPolicy, r.Spec.UnhealthyPodEvictionPolicy)
		}),
	row(kind{gvk: networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), resource: "networkpolicies", namespaced: true, client: networkingClient,
		informer:  func(s *informerSet) cache.SharedIndexInformer { return s.networkPolicies },
		newObject: func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		stamp: func(r runtime.Object) error {
			p := r.(*networkingv1.NetworkPolicy)
			return setSpecHash(&p.ObjectMeta, p.Spec)
		}},
		func(c, r *networkingv1.NetworkPolicy) bool { return metaContains(c, r) }),
	row(kind{gvk: storagev1.SchemeGroupVersion.WithKind("CSIDriver"), resource: "csidrivers", client: storageClient,
		informer:  func(s *informerSet) cache.SharedIndexInformer { return s.csiDrivers },
		newObject: func() runtime.Object { return &storagev1.CSIDriver{} },
		stamp:     func(r runtime.Object) error { d := r.(*storagev1.CSIDriver); return setSpecHash(&d.ObjectMeta, d.Spec) }},
		func(c, r *storagev1.CSIDriver) bool { return metaContains(c, r) }),
	row(kind{gvk: storagev1.SchemeGroupVersion.WithKind("StorageClass"), resource: "storageclasses", client: storageClient,
		informer: func(s *informerSet) cache.SharedIndexInformer { return s.storageClasses },
		detail: func(r runtime.Object) string {
			return fmt.Sprintf("for Manila share type %q", r.(*storagev1.StorageClass).Annotations[operator.AnnotationShareType])
		}},
		storageClassUpToDate),
	// Workloads: the operator stamps the required object's Generation with the generation it
	// last wrote (status.generations; never sent). Another generation in the cache means
	// someone else changed the spec, and the operator's version is restored.
	func() *kind {
		k := row(kind{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), resource: "deployments", namespaced: true, client: appsClient,
			informer:    func(s *informerSet) cache.SharedIndexInformer { return s.deployments },
			newObject:   func() runtime.Object { return &appsv1.Deployment{} },
			stamp:       func(r runtime.Object) error { d := r.(*appsv1.Deployment); return setSpecHash(&d.ObjectMeta, d.Spec) },
			podTemplate: func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template },
			status: func(prefix string, o runtime.Object) *operatorStatus {
				return deploymentStatus(prefix, o.(*appsv1.Deployment))
			}},
			func(c, r *appsv1.Deployment) bool { return workloadUpToDate(c, r) })
		k.drifted = generationDrifted
		return k
	}(),
	func() *kind {
		k := row(kind{gvk: appsv1.SchemeGroupVersion.WithKind("DaemonSet"), resource: "daemonsets", namespaced: true, client: appsClient,
			informer:    func(s *informerSet) cache.SharedIndexInformer { return s.daemonSets },
			newObject:   func() runtime.Object { return &appsv1.DaemonSet{} },
			stamp:       func(r runtime.Object) error { d := r.(*appsv1.DaemonSet); return setSpecHash(&d.ObjectMeta, d.Spec) },
			podTemplate: func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template },
			status: func(prefix string, o runtime.Object) *operatorStatus {
				return daemonSetStatus(prefix, o.(*appsv1.DaemonSet))
			}},
			func(c, r *appsv1.DaemonSet) bool { return workloadUpToDate(c, r) })
		k.drifted = generationDrifted
		return k
	}(),
	// CRDs that may appear at run time: compared by the hash of what the operator sets.
	{gvk: serviceMonitorGVR.GroupVersion().WithKind("ServiceMonitor"), resource: serviceMonitorGVR.Resource, namespaced: true,
		stamp: stampUnstructured, upToDate: unstructuredUpToDate},
	{gvk: snapshotClassGVR.GroupVersion().WithKind("VolumeSnapshotClass"), resource: snapshotClassGVR.Resource,
		stamp: stampUnstructured, upToDate: unstructuredUpToDate},
}

var kindsByGVK = func() map[schema.GroupVersionKind]*kind {
	m := map[schema.GroupVersionKind]*kind{}
	for _, k := range kindTable {
		m[k.gvk] = k
	}
	return m
}()

// kindOf finds the row of an object: by its Go type in the operator's scheme, or by the
// apiVersion and kind of an unstructured object.
func kindOf(obj runtime.Object) (*kind, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if _, ok := obj.(*unstructured.Unstructured); !ok {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		gvk = gvks[0]
	}
	if k, ok := kindsByGVK[gvk]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("the operator does not write %s", strings.TrimPrefix(gvk.String(), "/, Kind="))
}

// workloadUpToDate: same spec hash, not being deleted, and no one else changed it since.
func workloadUpToDate(c, r interface {
	metav1.Object
	runtime.Object
}) bool {
	return c.GetDeletionTimestamp() == nil && c.GetGeneration() == r.GetGeneration() && metaContains(c, r)
}

func generationDrifted(c, r runtime.Object) bool {
	return c.(metav1.Object).GetGeneration() != r.(metav1.Object).GetGeneration()
}

func stampUnstructured(r runtime.Object) error {
	u := r.(*unstructured.Unstructured)
	content := u.DeepCopy().Object
	delete(content, "metadata")
	withAppliedHash(u, content)
	return nil
}

func unstructuredUpToDate(c, r runtime.Object) bool {
	cm, ok := c.(metav1.Object)
	return ok && metaContains(cm, r.(metav1.Object))
}
