package machinery

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

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
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
)

// Kind is everything the operator knows about one kind of object it writes: its API resource,
// the REST client of its group, the informer that caches it, and how the cached object is
// compared with the required one. write.go does the rest the same way for every kind, so a new
// kind is one row of the table.
type Kind struct {
	GVK        schema.GroupVersionKind
	Resource   string
	Namespaced bool
	// client is the REST client of the kind's group; nil for kinds outside the operator's
	// scheme (CRDs that may appear at run time), which go through the dynamic client and a
	// dynamic informer created on first use.
	Client func(*Clients) rest.Interface
	// informer caches the kind (nil: dynamic, as client).
	Informer func(*Informers) cache.SharedIndexInformer
	// newObject returns an empty object of the kind (nil for dynamic kinds).
	NewObject func() runtime.Object
	// stamp adds to the required object the hash annotation that upToDate compares, where
	// comparing the fields themselves would trip over what the apiserver defaults.
	Stamp func(required runtime.Object) error
	// upToDate tells from the cache that the object already is as required: no write.
	UpToDate func(cached, required runtime.Object) bool
	// drifted tells that others added to what the operator owns (a pod template annotation,
	// a key of its Secret). A server-side apply leaves others' fields alone, so the operator
	// then first takes the fields over (see write.go) and its apply removes them.
	Drifted func(cached, required runtime.Object) bool
	// detail is added to the Event about a write (never a secret value).
	Detail func(required runtime.Object) string
	// Workloads only: their pod template and their conditions.
	PodTemplate func(runtime.Object) *corev1.PodTemplateSpec
	Status      func(prefix string, obj runtime.Object) *Status
}

// GVR is the kind's resource.
func (k *Kind) GVR() schema.GroupVersionResource {
	return k.GVK.GroupVersion().WithResource(k.Resource)
}

// row builds a kind of the operator's scheme with functions on its own Go type.
func row[T runtime.Object](k Kind, upToDate func(cached, required T) bool) *Kind {
	k.UpToDate = func(c, r runtime.Object) bool { return upToDate(c.(T), r.(T)) }
	return &k
}

func sameRules(c, r []rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(c, r) }

func sameBinding(cs, rs []rbacv1.Subject, cr, rr rbacv1.RoleRef) bool {
	return equality.Semantic.DeepEqual(cs, rs) && cr == rr
}

func coreClient(k *Clients) rest.Interface       { return k.Core }
func appsClient(k *Clients) rest.Interface       { return k.Apps }
func rbacClient(k *Clients) rest.Interface       { return k.RBAC }
func storageClient(k *Clients) rest.Interface    { return k.Storage }
func policyClient(k *Clients) rest.Interface     { return k.Policy }
func networkingClient(k *Clients) rest.Interface { return k.Networking }

// Kinds lists every kind the operator writes.
var Kinds = []*Kind{
	row(Kind{GVK: corev1.SchemeGroupVersion.WithKind("ServiceAccount"), Resource: "serviceaccounts", Namespaced: true, Client: coreClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.ServiceAccounts },
		Stamp: func(r runtime.Object) error {
			sa := r.(*corev1.ServiceAccount)
			withAppliedHash(sa, sa.ObjectMeta)
			return nil
		}},
		func(c, r *corev1.ServiceAccount) bool { return metaContains(c, r) }),
	row(Kind{GVK: corev1.SchemeGroupVersion.WithKind("Service"), Resource: "services", Namespaced: true, Client: coreClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.Services },
		Stamp:    func(r runtime.Object) error { svc := r.(*corev1.Service); withAppliedHash(svc, svc.Spec); return nil }},
		func(c, r *corev1.Service) bool { return metaContains(c, r) }),
	// The trusted CA ConfigMap: its data belongs to the cluster network operator, which injects
	// the bundle; the operator applies its metadata only, so it never owns the data.
	row(Kind{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Resource: "configmaps", Namespaced: true, Client: coreClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.ConfigMaps }},
		// Data counts only where the operator sets it (not in the CA bundle, which the cluster
		// network operator fills).
		func(c, r *corev1.ConfigMap) bool {
			return metaContains(c, r) && (r.Data == nil || equality.Semantic.DeepEqual(c.Data, r.Data))
		}),
	func() *Kind {
		k := row(Kind{GVK: corev1.SchemeGroupVersion.WithKind("Secret"), Resource: "secrets", Namespaced: true, Client: coreClient,
			Informer: func(s *Informers) cache.SharedIndexInformer { return s.Secrets },
			Detail:   func(r runtime.Object) string { return "keys: " + keyList(r.(*corev1.Secret).Data) }},
			func(c, r *corev1.Secret) bool { return metaContains(c, r) && sameData(c.Data, r.Data) })
		// A key the operator does not set (left from other credentials, or by someone else) must go.
		k.Drifted = func(c, r runtime.Object) bool {
			for key := range c.(*corev1.Secret).Data {
				if _, ok := r.(*corev1.Secret).Data[key]; !ok {
					return true
				}
			}
			return false
		}
		return k
	}(),
	row(Kind{GVK: rbacv1.SchemeGroupVersion.WithKind("ClusterRole"), Resource: "clusterroles", Client: rbacClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.ClusterRoles }},
		func(c, r *rbacv1.ClusterRole) bool { return metaContains(c, r) && sameRules(c.Rules, r.Rules) }),
	row(Kind{GVK: rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), Resource: "clusterrolebindings", Client: rbacClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.ClusterRoleBindings }},
		func(c, r *rbacv1.ClusterRoleBinding) bool {
			return metaContains(c, r) && sameBinding(c.Subjects, r.Subjects, c.RoleRef, r.RoleRef)
		}),
	row(Kind{GVK: rbacv1.SchemeGroupVersion.WithKind("Role"), Resource: "roles", Namespaced: true, Client: rbacClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.Roles }},
		func(c, r *rbacv1.Role) bool { return metaContains(c, r) && sameRules(c.Rules, r.Rules) }),
	row(Kind{GVK: rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), Resource: "rolebindings", Namespaced: true, Client: rbacClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.RoleBindings }},
		func(c, r *rbacv1.RoleBinding) bool {
			return metaContains(c, r) && sameBinding(c.Subjects, r.Subjects, c.RoleRef, r.RoleRef)
		}),
	row(Kind{GVK: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), Resource: "poddisruptionbudgets", Namespaced: true, Client: policyClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.PDBs }},
		func(c, r *policyv1.PodDisruptionBudget) bool {
			return metaContains(c, r) && equality.Semantic.DeepEqual(c.Spec.MaxUnavailable, r.Spec.MaxUnavailable) &&
				equality.Semantic.DeepEqual(c.Spec.Selector, r.Spec.Selector) &&
				equality.Semantic.DeepEqual(c.Spec.UnhealthyPodEvictionPolicy, r.Spec.UnhealthyPodEvictionPolicy)
		}),
	row(Kind{GVK: networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"), Resource: "networkpolicies", Namespaced: true, Client: networkingClient,
		Informer:  func(s *Informers) cache.SharedIndexInformer { return s.NetworkPolicies },
		NewObject: func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		Stamp: func(r runtime.Object) error {
			p := r.(*networkingv1.NetworkPolicy)
			return setSpecHash(&p.ObjectMeta, p.Spec)
		}},
		func(c, r *networkingv1.NetworkPolicy) bool { return metaContains(c, r) }),
	row(Kind{GVK: storagev1.SchemeGroupVersion.WithKind("CSIDriver"), Resource: "csidrivers", Client: storageClient,
		Informer:  func(s *Informers) cache.SharedIndexInformer { return s.CSIDrivers },
		NewObject: func() runtime.Object { return &storagev1.CSIDriver{} },
		Stamp:     func(r runtime.Object) error { d := r.(*storagev1.CSIDriver); return setSpecHash(&d.ObjectMeta, d.Spec) }},
		func(c, r *storagev1.CSIDriver) bool { return metaContains(c, r) }),
	row(Kind{GVK: storagev1.SchemeGroupVersion.WithKind("StorageClass"), Resource: "storageclasses", Client: storageClient,
		Informer: func(s *Informers) cache.SharedIndexInformer { return s.StorageClasses },
		Detail: func(r runtime.Object) string {
			return fmt.Sprintf("for Manila share type %q", r.(*storagev1.StorageClass).Annotations[operator.AnnotationShareType])
		}},
		storageClassUpToDate),
	// Workloads: the operator stamps the required object's Generation with the generation it
	// last wrote (status.generations; never sent). Another generation in the cache means
	// someone else changed the spec, and the operator's version is restored.
	func() *Kind {
		k := row(Kind{GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"), Resource: "deployments", Namespaced: true, Client: appsClient,
			Informer:    func(s *Informers) cache.SharedIndexInformer { return s.Deployments },
			NewObject:   func() runtime.Object { return &appsv1.Deployment{} },
			Stamp:       func(r runtime.Object) error { d := r.(*appsv1.Deployment); return setSpecHash(&d.ObjectMeta, d.Spec) },
			PodTemplate: func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template },
			Status: func(prefix string, o runtime.Object) *Status {
				return DeploymentStatus(prefix, o.(*appsv1.Deployment))
			}},
			func(c, r *appsv1.Deployment) bool { return workloadUpToDate(c, r) })
		k.Drifted = generationDrifted
		return k
	}(),
	func() *Kind {
		k := row(Kind{GVK: appsv1.SchemeGroupVersion.WithKind("DaemonSet"), Resource: "daemonsets", Namespaced: true, Client: appsClient,
			Informer:    func(s *Informers) cache.SharedIndexInformer { return s.DaemonSets },
			NewObject:   func() runtime.Object { return &appsv1.DaemonSet{} },
			Stamp:       func(r runtime.Object) error { d := r.(*appsv1.DaemonSet); return setSpecHash(&d.ObjectMeta, d.Spec) },
			PodTemplate: func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.DaemonSet).Spec.Template },
			Status: func(prefix string, o runtime.Object) *Status {
				return DaemonSetStatus(prefix, o.(*appsv1.DaemonSet))
			}},
			func(c, r *appsv1.DaemonSet) bool { return workloadUpToDate(c, r) })
		k.Drifted = generationDrifted
		return k
	}(),
	// CRDs that may appear at run time: compared by the hash of what the operator sets.
	{GVK: ServiceMonitorGVR.GroupVersion().WithKind("ServiceMonitor"), Resource: ServiceMonitorGVR.Resource, Namespaced: true,
		Stamp: stampUnstructured, UpToDate: unstructuredUpToDate},
	{GVK: PrometheusRuleGVR.GroupVersion().WithKind("PrometheusRule"), Resource: PrometheusRuleGVR.Resource, Namespaced: true,
		Stamp: stampUnstructured, UpToDate: unstructuredUpToDate},
	{GVK: SnapshotClassGVR.GroupVersion().WithKind("VolumeSnapshotClass"), Resource: SnapshotClassGVR.Resource,
		Stamp: stampUnstructured, UpToDate: unstructuredUpToDate},
}

var kindsByGVK = func() map[schema.GroupVersionKind]*Kind {
	m := map[schema.GroupVersionKind]*Kind{}
	for _, k := range Kinds {
		m[k.GVK] = k
	}
	return m
}()

// KindFor is the row of a kind the operator writes, nil for others.
func KindFor(gvk schema.GroupVersionKind) *Kind { return kindsByGVK[gvk] }

// KindOf finds the row of an object: by its Go type in the operator's scheme, or by the
// apiVersion and kind of an unstructured object.
func KindOf(obj runtime.Object) (*Kind, error) {
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

// storageClassUpToDate compares what the operator sets; other annotations (a user's
// is-default-class) are not the operator's business, and the share-type-gone annotation is
// patched on its own.
func storageClassUpToDate(ex, req *storagev1.StorageClass) bool {
	return ex.Provisioner == req.Provisioner &&
		equality.Semantic.DeepEqual(ex.Parameters, req.Parameters) &&
		ptr.Deref(ex.ReclaimPolicy, "") == ptr.Deref(req.ReclaimPolicy, "") &&
		ptr.Deref(ex.AllowVolumeExpansion, false) == ptr.Deref(req.AllowVolumeExpansion, false) &&
		ptr.Deref(ex.VolumeBindingMode, "") == ptr.Deref(req.VolumeBindingMode, "") &&
		metaContains(ex, req)
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// keyList names the keys of a Secret's data (never its values).
func keyList(d map[string][]byte) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}
