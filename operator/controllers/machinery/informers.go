package machinery

import (
	"context"
	"sync"

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/operator"
)

// Resources the operator reads or writes outside its scheme, or through the dynamic and
// metadata clients.
var (
	ClusterCSIDriverGVR = operatorv1.GroupVersion.WithResource("clustercsidrivers")
	ServiceMonitorGVR   = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	PrometheusRuleGVR   = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
	SnapshotClassGVR    = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	VolumeSnapshotGVR   = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	MachineSetGVR       = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}
	// ControlPlaneMachineSetGVR: the masters' set (one, named ControlPlaneMachineSetName).
	ControlPlaneMachineSetGVR = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1", Resource: "controlplanemachinesets"}
	MachineGVR                = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}
	CRDGVR                    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	CompanionGVR              = schema.GroupVersionResource{Group: operator.CompanionGroup, Version: operator.CompanionVersion, Resource: operator.CompanionResource}
	ClusterVersionGVR         = configv1.GroupVersion.WithResource("clusterversions")
	ClusterOperatorGVR        = configv1.GroupVersion.WithResource("clusteroperators")
	NodeGVR                   = corev1.SchemeGroupVersion.WithResource("nodes")
)

// MachineAPINamespace holds the MachineSets, the Machines and the ControlPlaneMachineSet.
const MachineAPINamespace = "openshift-machine-api"

// ControlPlaneMachineSetName is the name of the one ControlPlaneMachineSet the platform reads.
const ControlPlaneMachineSetName = "cluster"

// The cluster's install-config, where the machine networks are read from.
const (
	ClusterConfigNamespace = "kube-system"
	ClusterConfigName      = "cluster-config-v1"
)

var (
	// Everything selects every object.
	Everything = labels.Everything()
	// ManagedSelector selects the objects the operator labels as its own.
	ManagedSelector      = labels.SelectorFromSet(labels.Set{operator.LabelManagedBy: operator.ManagedByValue})
	managedSelectorTweak = func(o *metav1.ListOptions) { o.LabelSelector = ManagedSelector.String() }
)

// CustomResource names one object of a resource outside the operator's scheme (the
// ManilaCompanion "cluster").
type CustomResource struct {
	GVR  schema.GroupVersionResource
	Kind string
	Name string
}

// Informers holds the operator's informers, each as narrow as its use: in the operator
// namespace, which it shares with other CSI driver operators (their Secrets, 200 KB CA
// bundles), it caches only what it owns (by label) and the one Secret it reads.
type Informers struct {
	// Operator namespace, ours only.
	ServiceAccounts, Services, ConfigMaps, Secrets, Roles, RoleBindings, PDBs, NetworkPolicies, Deployments, DaemonSets cache.SharedIndexInformer
	Credentials                                                                                                         cache.SharedIndexInformer // the credentials Secret, by name
	ClusterConfig                                                                                                       cache.SharedIndexInformer // kube-system/cluster-config-v1, by name
	// Cluster-scoped, ours only.
	ClusterRoles, ClusterRoleBindings, CSIDrivers cache.SharedIndexInformer
	StorageClasses                                cache.SharedIndexInformer // all: names users took matter
	Infrastructures, Proxies                      cache.SharedIndexInformer
	APIServers                                    cache.SharedIndexInformer // "cluster": the TLS security profile
	ClusterCSIDriver                              cache.SharedIndexInformer // manila.csi.openstack.org, by name
	// Self is the operator's own object: ClusterCSIDriver, or the CustomResource given.
	Self cache.SharedIndexInformer
	// Nodes hold their labels and addresses only (slimNode); CRDs their metadata only.
	Nodes, CRDs cache.SharedIndexInformer

	listers Listers
	kube    *Clients
	ns      string
	all     []cache.SharedIndexInformer

	// Informers of resources whose CRD may appear at run time, created on first use.
	dynMu        sync.Mutex
	dynInformers map[schema.GroupVersionResource]cache.SharedIndexInformer
	dynHandlers  map[schema.GroupVersionResource][]cache.ResourceEventHandler
	stopCh       <-chan struct{}
}

// Listers read the caches the controllers read directly; what the operator writes is compared
// with its cache through the kind table.
type Listers struct {
	ServiceAccounts   corelisters.ServiceAccountLister
	ConfigMaps        corelisters.ConfigMapLister
	Secrets           corelisters.SecretLister
	Credentials       corelisters.SecretLister
	ClusterConfig     corelisters.ConfigMapLister
	CSIDrivers        storagelisters.CSIDriverLister
	StorageClasses    storagelisters.StorageClassLister
	Infrastructures   configlisters.InfrastructureLister
	Proxies           configlisters.ProxyLister
	APIServers        configlisters.APIServerLister
	ClusterCSIDrivers operatorlisters.ClusterCSIDriverLister
	Nodes, CRDs       cache.GenericLister
}

// ByName restricts a list or watch to the object of that name.
func ByName(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}

// NewInformers builds (and does not start) the informers of an operator in namespace. self,
// when not nil, is the operator's own object instead of the ClusterCSIDriver.
func NewInformers(k *Clients, namespace string, self *CustomResource) *Informers {
	s := &Informers{
		kube: k, ns: namespace,
		dynInformers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		dynHandlers:  map[schema.GroupVersionResource][]cache.ResourceEventHandler{},
	}
	ns, ours := namespace, managedSelectorTweak
	s.ServiceAccounts = s.typed(k.Core, "serviceaccounts", ns, &corev1.ServiceAccount{}, ours)
	s.Services = s.typed(k.Core, "services", ns, &corev1.Service{}, ours)
	s.ConfigMaps = s.typed(k.Core, "configmaps", ns, &corev1.ConfigMap{}, ours)
	s.Secrets = s.typed(k.Core, "secrets", ns, &corev1.Secret{}, ours)
	s.Roles = s.typed(k.RBAC, "roles", ns, &rbacv1.Role{}, ours)
	s.RoleBindings = s.typed(k.RBAC, "rolebindings", ns, &rbacv1.RoleBinding{}, ours)
	s.PDBs = s.typed(k.Policy, "poddisruptionbudgets", ns, &policyv1.PodDisruptionBudget{}, ours)
	s.NetworkPolicies = s.typed(k.Networking, "networkpolicies", ns, &networkingv1.NetworkPolicy{}, ours)
	s.Deployments = s.typed(k.Apps, "deployments", ns, &appsv1.Deployment{}, ours)
	s.DaemonSets = s.typed(k.Apps, "daemonsets", ns, &appsv1.DaemonSet{}, ours)
	s.Credentials = s.typed(k.Core, "secrets", ns, &corev1.Secret{}, ByName(operator.CredentialsSecretName))
	s.ClusterConfig = s.typed(k.Core, "configmaps", ClusterConfigNamespace, &corev1.ConfigMap{}, ByName(ClusterConfigName))
	s.ClusterRoles = s.typed(k.RBAC, "clusterroles", "", &rbacv1.ClusterRole{}, ours)
	s.ClusterRoleBindings = s.typed(k.RBAC, "clusterrolebindings", "", &rbacv1.ClusterRoleBinding{}, ours)
	s.CSIDrivers = s.typed(k.Storage, "csidrivers", "", &storagev1.CSIDriver{}, ours)
	s.StorageClasses = s.typed(k.Storage, "storageclasses", "", &storagev1.StorageClass{}, nil)
	// OpenShift's config API: absent on plain Kubernetes, where these stay empty and synced.
	s.Infrastructures = s.optional(k.Config, "infrastructures", &configv1.Infrastructure{}, &configv1.InfrastructureList{})
	s.Proxies = s.optional(k.Config, "proxies", &configv1.Proxy{}, &configv1.ProxyList{})
	s.APIServers = s.track(NewAPIServerInformer(k))
	s.ClusterCSIDriver = s.typed(k.Operator, "clustercsidrivers", "", &operatorv1.ClusterCSIDriver{}, ByName(operator.DriverName))
	s.Self = s.ClusterCSIDriver
	if self != nil {
		s.Self = s.track(s.newDynamic(self.GVR, "", ByName(self.Name)))
	}
	s.Nodes = s.slimNodes(k.Core)
	s.CRDs = s.metadataOnly(CRDGVR)
	s.startWithCRD(machineAPICRDs)

	l := &s.listers
	l.ServiceAccounts = corelisters.NewServiceAccountLister(s.ServiceAccounts.GetIndexer())
	l.ConfigMaps = corelisters.NewConfigMapLister(s.ConfigMaps.GetIndexer())
	l.Secrets = corelisters.NewSecretLister(s.Secrets.GetIndexer())
	l.Credentials = corelisters.NewSecretLister(s.Credentials.GetIndexer())
	l.ClusterConfig = corelisters.NewConfigMapLister(s.ClusterConfig.GetIndexer())
	l.CSIDrivers = storagelisters.NewCSIDriverLister(s.CSIDrivers.GetIndexer())
	l.StorageClasses = storagelisters.NewStorageClassLister(s.StorageClasses.GetIndexer())
	l.Infrastructures = configlisters.NewInfrastructureLister(s.Infrastructures.GetIndexer())
	l.Proxies = configlisters.NewProxyLister(s.Proxies.GetIndexer())
	l.APIServers = configlisters.NewAPIServerLister(s.APIServers.GetIndexer())
	l.ClusterCSIDrivers = operatorlisters.NewClusterCSIDriverLister(s.ClusterCSIDriver.GetIndexer())
	l.Nodes = cache.NewGenericLister(s.Nodes.GetIndexer(), NodeGVR.GroupResource())
	l.CRDs = cache.NewGenericLister(s.CRDs.GetIndexer(), CRDGVR.GroupResource())
	return s
}

// Listers reads the informers' caches.
func (s *Informers) Listers() Listers { return s.listers }

// Namespace is the operator namespace the informers cache.
func (s *Informers) Namespace() string { return s.ns }

// Restrict makes Run start only these informers (the others stay empty): an operator whose
// RBAC allows it to read no more.
func (s *Informers) Restrict(only ...cache.SharedIndexInformer) {
	s.all = only
}

// Run starts the informers, and those created on first use, until stop is closed.
func (s *Informers) Run(stop <-chan struct{}) {
	for _, inf := range s.all {
		go inf.Run(stop)
	}
	s.dynMu.Lock()
	s.stopCh = stop
	for _, inf := range s.dynInformers {
		go inf.Run(stop)
	}
	s.dynMu.Unlock()
}

var namespaceIndexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// typed watches one typed resource through its group's REST client. There is no periodic
// informer resync: the controllers have their own.
func (s *Informers) typed(c rest.Interface, resource, namespace string, obj runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	return s.track(cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(c, resource, namespace, tweak), obj, 0, namespaceIndexers))
}

// optional watches a cluster-scoped typed resource of an API the cluster may not serve
// (servedOrEmpty).
func (s *Informers) optional(c rest.Interface, resource string, obj, list runtime.Object) cache.SharedIndexInformer {
	lw := servedOrEmpty(cache.NewFilteredListWatchFromClient(c, resource, "", func(*metav1.ListOptions) {}), list)
	return s.track(cache.NewSharedIndexInformer(lw, obj, 0, namespaceIndexers))
}

// APIServerName is the one config.openshift.io APIServer, whose spec.tlsSecurityProfile is the
// cluster's TLS policy.
const APIServerName = "cluster"

// NewAPIServerInformer watches the APIServer "cluster" alone, as an optional API (absent on
// plain Kubernetes, where it stays empty and synced). Informers has one; the metrics endpoint,
// which every replica serves, leader or not, runs another.
func NewAPIServerInformer(k *Clients) cache.SharedIndexInformer {
	lw := servedOrEmpty(cache.NewFilteredListWatchFromClient(k.Config, "apiservers", "", ByName(APIServerName)), &configv1.APIServerList{})
	inf := cache.NewSharedIndexInformer(lw, &configv1.APIServer{}, 0, namespaceIndexers)
	_ = inf.SetTransform(stripManagedFields)
	return inf
}

// slimNodes caches the nodes with their name, labels, taints and addresses only (slimNode): what
// the controllers read of them (the control-plane label, whether a master runs workloads, where
// a node's addresses lie), without
// the images, conditions and capacity that make most of a Node's weight.
func (s *Informers) slimNodes(core rest.Interface) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(core, "nodes", "", func(*metav1.ListOptions) {}), &corev1.Node{}, 0, namespaceIndexers)
	_ = inf.SetTransform(slimNode)
	s.all = append(s.all, inf)
	return inf
}

// slimNode keeps of a Node what slimNodes says; anything else passes unchanged.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

// metadataOnly caches the metadata of a resource only (CRDs).
func (s *Informers) metadataOnly(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	r := s.kube.Metadata.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, opts) },
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, opts) },
	}
	return s.track(cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, namespaceIndexers))
}

// newDynamic caches a resource the scheme does not know (ServiceMonitors,
// VolumeSnapshotClasses, MachineSets) as unstructured objects.
func (s *Informers) newDynamic(gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	r := s.kube.Dynamic.Resource(gvr).Namespace(namespace)
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
	switch gvr {
	case MachineSetGVR, MachineGVR, ControlPlaneMachineSetGVR:
		_ = inf.SetTransform(SlimMachineAPI)
	case VolumeSnapshotGVR:
		_ = inf.SetTransform(SlimVolumeSnapshot)
	default:
		_ = inf.SetTransform(stripManagedFields)
	}
	return inf
}

// track drops managedFields but their managers from what the informer caches (see
// stripManagedFields) and remembers the informer for Run.
func (s *Informers) track(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	_ = inf.SetTransform(stripManagedFields)
	s.all = append(s.all, inf)
	return inf
}

// stripManagedFields drops what managedFields record of each field (often the largest part of
// an object) and keeps only who wrote it: the platform check (operator/platform) tells the
// platform's objects from ours by their field managers.
func stripManagedFields(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	fields := m.GetManagedFields()
	if len(fields) == 0 {
		return obj, nil
	}
	managers := make([]metav1.ManagedFieldsEntry, 0, len(fields))
	for _, f := range fields {
		managers = append(managers, metav1.ManagedFieldsEntry{Manager: f.Manager, Operation: f.Operation, Subresource: f.Subresource})
	}
	m.SetManagedFields(managers)
	return obj, nil
}

// machineAPICRDs are the CRDs whose resources the StorageClasses' nfs-shareClient is read from.
var machineAPICRDs = map[string]schema.GroupVersionResource{
	"machinesets.machine.openshift.io":             MachineSetGVR,
	"machines.machine.openshift.io":                MachineGVR,
	"controlplanemachinesets.machine.openshift.io": ControlPlaneMachineSetGVR,
}

// startWithCRD creates (and, once Run was called, starts) the informer of each resource as soon
// as its CRD is seen, instead of at its first use: the first StorageClass waits for the
// MachineSets and Machines to be cached, and their lists then run beside the first question to
// Manila instead of after it.
func (s *Informers) startWithCRD(gvrs map[string]schema.GroupVersionResource) {
	_, _ = s.CRDs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if m, ok := obj.(metav1.Object); ok {
			if gvr, ok := gvrs[m.GetName()]; ok {
				s.Dynamic(gvr)
			}
		}
	}})
}

// Dynamic returns the informer of a resource whose CRD may appear at run time, creating and
// starting it on first use.
func (s *Informers) Dynamic(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	s.dynMu.Lock()
	defer s.dynMu.Unlock()
	inf, ok := s.dynInformers[gvr]
	if !ok {
		ns, tweak := metav1.NamespaceAll, managedSelectorTweak
		switch gvr {
		case ServiceMonitorGVR, PrometheusRuleGVR:
			// The operator may read ServiceMonitors and PrometheusRules in its namespace only
			// (Role, not ClusterRole).
			ns = s.ns
		case MachineSetGVR, MachineGVR, ControlPlaneMachineSetGVR:
			ns, tweak = MachineAPINamespace, nil
		case VolumeSnapshotGVR:
			// The users' snapshots, in every namespace, labelled or not.
			tweak = nil
		case ClusterVersionGVR:
			tweak = ByName("version")
		case ClusterOperatorGVR:
			tweak = ByName("storage")
		}
		inf = s.newDynamic(gvr, ns, tweak)
		for _, h := range s.dynHandlers[gvr] {
			_, _ = inf.AddEventHandler(h)
		}
		s.dynInformers[gvr] = inf
		if s.stopCh != nil {
			go inf.Run(s.stopCh)
		}
	}
	return inf
}

// OnDynamic registers an event handler on the informer of gvr, now or when it is created.
func (s *Informers) OnDynamic(gvr schema.GroupVersionResource, h cache.ResourceEventHandler) {
	s.dynMu.Lock()
	defer s.dynMu.Unlock()
	s.dynHandlers[gvr] = append(s.dynHandlers[gvr], h)
	if inf, ok := s.dynInformers[gvr]; ok {
		_, _ = inf.AddEventHandler(h)
	}
}

// DynamicLister returns a lister of Dynamic(gvr); synced is false until it has listed once.
func (s *Informers) DynamicLister(gvr schema.GroupVersionResource) (lister cache.GenericLister, synced bool) {
	inf := s.Dynamic(gvr)
	return cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()), inf.HasSynced()
}

// CRDExists tells from the metadata cache whether a CRD is installed.
func (s *Informers) CRDExists(name string) bool {
	_, err := s.listers.CRDs.Get(name)
	return err == nil
}

// VolumeFailedDeletes caches the provisioner's VolumeFailedDelete Events about volumes, in
// namespace default where the Events of cluster-scoped objects are (nearly always none): the
// snapshot explainer reads them from the cache rather than asking every minute. Call it before
// Run.
func (s *Informers) VolumeFailedDeletes() cache.SharedIndexInformer {
	return s.typed(s.kube.Core, "events", metav1.NamespaceDefault, &corev1.Event{}, func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=VolumeFailedDelete,involvedObject.kind=PersistentVolume"
	})
}

// SecretNamed caches the one Secret of that name in the operator namespace, whoever wrote it
// (Secrets holds only those with the operator's label): for a Secret the operator writes only
// when no one else has. Call it before Run.
func (s *Informers) SecretNamed(name string) cache.SharedIndexInformer {
	return s.typed(s.kube.Core, "secrets", s.ns, &corev1.Secret{}, ByName(name))
}
