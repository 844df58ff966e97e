package controllers

import (
	"context"
	"github.com/manila-setup/manila-setup/operator"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configlisters "github.com/openshift/client-go/config/listers/config/v1"
	operatorlisters "github.com/openshift/client-go/operator/listers/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// informerSet holds the operator's informers, each as narrow as its use: in the operator
// namespace, which it shares with other CSI driver operators (their Secrets, 200 KB CA
// bundles), it caches only what it owns (by label) and the one Secret it reads.
type informerSet struct {
	// Operator namespace, ours only.
	serviceAccounts, services, configMaps, secrets, roles, roleBindings, pdbs, networkPolicies, deployments, daemonSets cache.SharedIndexInformer
	credentials                                                                                                         cache.SharedIndexInformer // the credentials Secret, by name
	clusterConfig                                                                                                       cache.SharedIndexInformer // kube-system/cluster-config-v1, by name
	// Cluster-scoped, ours only.
	clusterRoles, clusterRoleBindings, csiDrivers cache.SharedIndexInformer
	storageClasses                                cache.SharedIndexInformer // all: names users took matter
	infrastructures, proxies                      cache.SharedIndexInformer
	clusterCSIDriver                              cache.SharedIndexInformer // manila.csi.openstack.org, by name
	// self is the operator's own object: clusterCSIDriver in driver mode, the ManilaCompanion
	// "cluster" in companion mode.
	self        cache.SharedIndexInformer
	nodes, crds cache.SharedIndexInformer // metadata only

	all []cache.SharedIndexInformer
}

// listerSet reads the caches the controllers read directly; what the operator writes is
// compared with its cache through kindTable.
type listerSet struct {
	serviceAccounts   corelisters.ServiceAccountLister
	configMaps        corelisters.ConfigMapLister
	secrets           corelisters.SecretLister
	credentials       corelisters.SecretLister
	clusterConfig     corelisters.ConfigMapLister
	csiDrivers        storagelisters.CSIDriverLister
	storageClasses    storagelisters.StorageClassLister
	infrastructures   configlisters.InfrastructureLister
	proxies           configlisters.ProxyLister
	clusterCSIDrivers operatorlisters.ClusterCSIDriverLister
	nodes, crds       cache.GenericLister
}

func byName(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}

func (o *Operator) buildInformers() {
	k, ns, s := o.kube, o.cfg.Namespace, &o.inf
	ours := managedSelectorTweak
	s.serviceAccounts = o.newInformer(k.core, "serviceaccounts", ns, &corev1.ServiceAccount{}, ours)
	s.services = o.newInformer(k.core, "services", ns, &corev1.Service{}, ours)
	s.configMaps = o.newInformer(k.core, "configmaps", ns, &corev1.ConfigMap{}, ours)
	s.secrets = o.newInformer(k.core, "secrets", ns, &corev1.Secret{}, ours)
	s.roles = o.newInformer(k.rbac, "roles", ns, &rbacv1.Role{}, ours)
	s.roleBindings = o.newInformer(k.rbac, "rolebindings", ns, &rbacv1.RoleBinding{}, ours)
	s.pdbs = o.newInformer(k.policy, "poddisruptionbudgets", ns, &policyv1.PodDisruptionBudget{}, ours)
	s.networkPolicies = o.newInformer(k.networking, "networkpolicies", ns, &networkingv1.NetworkPolicy{}, ours)
	s.deployments = o.newInformer(k.apps, "deployments", ns, &appsv1.Deployment{}, ours)
	s.daemonSets = o.newInformer(k.apps, "daemonsets", ns, &appsv1.DaemonSet{}, ours)
	s.credentials = o.newInformer(k.core, "secrets", ns, &corev1.Secret{}, byName(operator.CredentialsSecretName))
	s.clusterConfig = o.newInformer(k.core, "configmaps", clusterConfigNS, &corev1.ConfigMap{}, byName(clusterConfigName))
	s.clusterRoles = o.newInformer(k.rbac, "clusterroles", "", &rbacv1.ClusterRole{}, ours)
	s.clusterRoleBindings = o.newInformer(k.rbac, "clusterrolebindings", "", &rbacv1.ClusterRoleBinding{}, ours)
	s.csiDrivers = o.newInformer(k.storage, "csidrivers", "", &storagev1.CSIDriver{}, ours)
	s.storageClasses = o.newInformer(k.storage, "storageclasses", "", &storagev1.StorageClass{}, nil)
	s.infrastructures = o.newInformer(k.config, "infrastructures", "", &configv1.Infrastructure{}, nil)
	s.proxies = o.newInformer(k.config, "proxies", "", &configv1.Proxy{}, nil)
	s.clusterCSIDriver = o.newInformer(k.operator, "clustercsidrivers", "", &operatorv1.ClusterCSIDriver{}, byName(operator.DriverName))
	s.self = s.clusterCSIDriver
	if o.companion() {
		s.self = o.track(o.newDynamicInformer(companionGVR, "", byName(operator.CompanionName)))
	}
	s.nodes = o.newMetadataInformer(nodeGVR)
	s.crds = o.newMetadataInformer(crdGVR)

	l := &o.lister
	l.serviceAccounts = corelisters.NewServiceAccountLister(s.serviceAccounts.GetIndexer())
	l.configMaps = corelisters.NewConfigMapLister(s.configMaps.GetIndexer())
	l.secrets = corelisters.NewSecretLister(s.secrets.GetIndexer())
	l.credentials = corelisters.NewSecretLister(s.credentials.GetIndexer())
	l.clusterConfig = corelisters.NewConfigMapLister(s.clusterConfig.GetIndexer())
	l.csiDrivers = storagelisters.NewCSIDriverLister(s.csiDrivers.GetIndexer())
	l.storageClasses = storagelisters.NewStorageClassLister(s.storageClasses.GetIndexer())
	l.infrastructures = configlisters.NewInfrastructureLister(s.infrastructures.GetIndexer())
	l.proxies = configlisters.NewProxyLister(s.proxies.GetIndexer())
	l.clusterCSIDrivers = operatorlisters.NewClusterCSIDriverLister(s.clusterCSIDriver.GetIndexer())
	l.nodes = cache.NewGenericLister(s.nodes.GetIndexer(), nodeGVR.GroupResource())
	l.crds = cache.NewGenericLister(s.crds.GetIndexer(), crdGVR.GroupResource())
}

var namespaceIndexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// newInformer watches one typed resource through its group's REST client. There is no
// periodic informer resync: the controllers have their own.
func (o *Operator) newInformer(c rest.Interface, resource, namespace string, obj runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	return o.track(cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(c, resource, namespace, tweak), obj, 0, namespaceIndexers))
}

// newMetadataInformer caches the metadata of a resource only (nodes, CRDs).
func (o *Operator) newMetadataInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	r := o.kube.metadata.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, opts) },
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, opts) },
	}
	return o.track(cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, namespaceIndexers))
}

// newDynamicInformer caches a resource the scheme does not know (ServiceMonitors,
// VolumeSnapshotClasses, MachineSets) as unstructured objects.
func (o *Operator) newDynamicInformer(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	r := o.kube.dynamic.Resource(gvr).Namespace(namespace)
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return r.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return r.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, namespaceIndexers)
	_ = inf.SetTransform(stripManagedFields)
	return inf
}

// track drops managedFields but their managers from what the informer caches (see
// stripManagedFields) and remembers the informer for Run.
func (o *Operator) track(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	_ = inf.SetTransform(stripManagedFields)
	o.inf.all = append(o.inf.all, inf)
	return inf
}

// dynamicInformer returns the informer of a resource whose CRD may appear at run time,
// creating and starting it on first use.
func (o *Operator) dynamicInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	o.dynMu.Lock()
	defer o.dynMu.Unlock()
	inf, ok := o.dynInformers[gvr]
	if !ok {
		ns, tweak := metav1.NamespaceAll, managedSelectorTweak
		switch gvr {
		case serviceMonitorGVR:
			// The operator may read ServiceMonitors in its namespace only (Role, not ClusterRole).
			ns = o.cfg.Namespace
		case machineSetGVR, machineGVR:
			ns, tweak = machineAPINamespace, nil
		case clusterVersionGVR:
			tweak = byName("version")
		case clusterOperatorGVR:
			tweak = byName("storage")
		}
		inf = o.newDynamicInformer(gvr, ns, tweak)
		for _, h := range o.dynHandlers[gvr] {
			_, _ = inf.AddEventHandler(h)
		}
		o.dynInformers[gvr] = inf
		if o.stopCh != nil {
			go inf.Run(o.stopCh)
		}
	}
	return inf
}

// onDynamic registers an event handler on the informer of gvr, now or when it is created.
func (o *Operator) onDynamic(gvr schema.GroupVersionResource, h cache.ResourceEventHandler) {
	o.dynMu.Lock()
	defer o.dynMu.Unlock()
	o.dynHandlers[gvr] = append(o.dynHandlers[gvr], h)
	if inf, ok := o.dynInformers[gvr]; ok {
		_, _ = inf.AddEventHandler(h)
	}
}

// dynamicLister returns a lister of dynamicInformer; synced is false until it has listed once.
func (o *Operator) dynamicLister(gvr schema.GroupVersionResource) (lister cache.GenericLister, synced bool) {
	inf := o.dynamicInformer(gvr)
	return cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()), inf.HasSynced()
}
