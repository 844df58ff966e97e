// Package controllers is the in-cluster Manila CSI driver operator, in the style of
// OpenShift's CSI driver operators (library-go's): the objects it applies live as YAML in
// assets/, each controller is one file with a sync, and every controller reports its own
// conditions on the ClusterCSIDriver manila.csi.openstack.org through server-side apply (one
// field manager per controller, so controllers never conflict on the status). It is built on
// client-go's REST clients, informers and work queues directly, over a scheme of the few API
// groups it uses (see kube.go for why).
//
// It reads from informer caches only: in steady state it makes no API writes and no direct GETs.
package controllers

import (
	"context"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	"golang.org/x/net/http/httpproxy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

const (
	trustedCAConfigMap  = "manila-csi-driver-trusted-ca-bundle"
	trustedCAKey        = "ca-bundle.crt"
	clusterConfigNS     = "kube-system"
	clusterConfigName   = "cluster-config-v1"
	machineAPINamespace = "openshift-machine-api"
)

// Config configures the operator.
type Config struct {
	// Mode is driver (default: deploy and manage the driver) or companion (beside the
	// platform's own Manila operator: its own names, namespace and status object, StorageClasses
	// restricted to the machine network, no driver; see operator/companion.go).
	Mode      platform.Mode
	Namespace string
	Images    operator.Images
	// Resync is the period of every controller, and of the Manila check (default 1 minute).
	Resync time.Duration
	// CloudName selects the cloud in clouds.yaml (default: "openstack", else the only one).
	CloudName string
	// OpenStackTimeout bounds each OpenStack request (default 10 s).
	OpenStackTimeout time.Duration
	// MachineNetworks overrides the nfs-shareClient CIDRs (default: the install-config's
	// networking.machineNetwork from kube-system/cluster-config-v1).
	MachineNetworks []string
	// StorageNetworkID is the Neutron network Manila exports on: it picks the share network of
	// DHSS=true share types and is checked against the MachineSets (StorageNetworkReachable).
	StorageNetworkID string
	// ManilaGracePeriod is how long Manila may not answer before ManilaControllerDegraded
	// (default DefaultManilaGracePeriod). While installed, an outage is reported at once on
	// ManilaReachable; the driver and the StorageClasses keep working meanwhile.
	ManilaGracePeriod time.Duration
	// Version is reported in status.version.
	Version string
	// NewManilaSource builds the OpenStack client; nil means NewManilaSource.
	NewManilaSource func(*operator.Credentials, time.Duration) (ManilaSource, error)
}

func (c *Config) defaults() {
	if c.Mode == "" {
		c.Mode = platform.ModeDriver
	}
	if c.Namespace == "" {
		c.Namespace = operator.NamesFor(c.Mode).Namespace
	}
	if c.Resync <= 0 {
		c.Resync = operator.DefaultResync
	}
	if c.ManilaGracePeriod <= 0 {
		c.ManilaGracePeriod = DefaultManilaGracePeriod
	}
	if c.OpenStackTimeout <= 0 {
		c.OpenStackTimeout = 10 * time.Second
	}
	if c.NewManilaSource == nil {
		c.NewManilaSource = NewManilaSource
	}
	if c.Version == "" {
		c.Version = "0.0.0-dev"
	}
}

var (
	clusterCSIDriverGVR  = operatorv1.GroupVersion.WithResource("clustercsidrivers")
	serviceMonitorGVR    = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	snapshotClassGVR     = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	machineSetGVR        = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}
	crdGVR               = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	companionGVR         = schema.GroupVersionResource{Group: operator.CompanionGroup, Version: operator.CompanionVersion, Resource: operator.CompanionResource}
	clusterVersionGVR    = configv1.GroupVersion.WithResource("clusterversions")
	clusterOperatorGVR   = configv1.GroupVersion.WithResource("clusteroperators")
	nodeGVR              = corev1.SchemeGroupVersion.WithResource("nodes")
	everything           = labels.Everything()
	managedSelector      = labels.SelectorFromSet(labels.Set{operator.LabelManagedBy: operator.ManagedByValue})
	managedSelectorTweak = func(o *metav1.ListOptions) { o.LabelSelector = managedSelector.String() }
)

// DefaultManilaGracePeriod: ten resyncs. Long enough for a Manila or Keystone restart, a
// control-plane upgrade of the cloud or a load balancer failover; short enough that an admin
// hears of a real outage before users do.
const DefaultManilaGracePeriod = 10 * time.Minute

// Operator holds the clients, the informers and the controllers.
type Operator struct {
	cfg      Config
	kube     *kubeClients
	recorder Recorder
	inf      informerSet
	lister   listerSet

	// Informers of resources whose CRD may appear at run time, created on first use.
	dynMu        sync.Mutex
	dynInformers map[schema.GroupVersionResource]cache.SharedIndexInformer
	dynHandlers  map[schema.GroupVersionResource][]cache.ResourceEventHandler
	stopCh       <-chan struct{}

	// What each controller (field manager) last wrote to the status.
	statusMu   sync.Mutex
	lastStatus map[string]string

	// guard says whether the operator may deploy the driver in this cluster.
	guard platformGuard
	// storage is the storage network, as given or discovered (the Manila controller discovers).
	storage *storageNetworks

	controllers []*controller
}

// New builds the operator. kubeConfig should allow enough client-side rate to create every
// operand in one burst; New raises QPS and burst when they are unset. A nil recorder writes
// Events into the operator namespace.
func New(kubeConfig *rest.Config, recorder Recorder, cfg Config) (*Operator, error) {
	cfg.defaults()
	kc := rest.CopyConfig(kubeConfig)
	if kc.QPS == 0 {
		kc.QPS, kc.Burst = 50, 100
	}
	kc = rest.AddUserAgent(kc, operator.NamesFor(cfg.Mode).Operator)
	kc.Wrap(countRequests("operator"))
	kube, err := newKubeClients(kc)
	if err != nil {
		return nil, err
	}
	if recorder == nil {
		recorder = newKubeRecorder(kube, cfg.Namespace, operator.NamesFor(cfg.Mode).Operator)
	}
	o := &Operator{
		cfg: cfg, kube: kube, recorder: recorder,
		dynInformers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		dynHandlers:  map[schema.GroupVersionResource][]cache.ResourceEventHandler{},
		lastStatus:   map[string]string{},
	}
	o.buildInformers()
	o.buildControllers()
	if o.companion() {
		// Only what the companion's controllers read: its RBAC allows no more (nothing of the
		// driver's, which is the platform's).
		i := &o.inf
		o.inf.all = []cache.SharedIndexInformer{i.self, i.clusterCSIDriver, i.csiDrivers, i.credentials, i.storageClasses,
			i.clusterConfig, i.crds, i.infrastructures, i.proxies, i.nodes, i.deployments}
	}
	return o, nil
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

// Run starts the informers and the controllers and blocks until ctx ends.
func (o *Operator) Run(ctx context.Context) error {
	for _, inf := range o.inf.all {
		go inf.Run(ctx.Done())
	}
	o.dynMu.Lock()
	o.stopCh = ctx.Done()
	for _, inf := range o.dynInformers {
		go inf.Run(ctx.Done())
	}
	o.dynMu.Unlock()
	klog.Infof("starting %d controllers (namespace %s, resync %s)", len(o.controllers), o.cfg.Namespace, o.cfg.Resync)
	var wg sync.WaitGroup
	for _, c := range o.controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

func (o *Operator) buildControllers() {
	storage := &storageNetworks{given: o.cfg.StorageNetworkID}
	o.storage = storage
	manila := &manilaController{o: o, storage: storage}
	if o.companion() {
		// Beside the platform's driver: what the platform lacks, and nothing it has.
		o.controllers = append(o.controllers,
			newPlatformController(o),
			newLogLevelController(o),
			newManilaController(o, manila),
			newStorageNetworkController(o, storage),
		)
		return
	}
	o.controllers = append(o.controllers,
		newPlatformController(o),
		newLogLevelController(o),
		newManilaController(o, manila),
		newStorageClassLintController(o, manila),
		newStorageNetworkController(o, storage),
		newSecretController(o),
		newStaticController(o),
		newWorkloadController(o, workloadControllerService),
		newWorkloadController(o, workloadNodeService),
		newWorkloadController(o, workloadNFSNodeService),
	)
}

// operands is what a controller's sync needs from the operator besides its own inputs: the
// ClusterCSIDriver's spec and the operator's writes. *Operator provides them over its caches
// and clients; a unit test of a sync provides fakes.
type operands struct {
	namespace string
	// spec is the ClusterCSIDriver's spec, nil when there is none.
	spec func() *operatorv1.OperatorSpec
	// enabled tells whether the driver is installed (see Operator.enabled).
	enabled         func() bool
	apply           func(context.Context, runtime.Object) (runtime.Object, error)
	deleteIfPresent func(context.Context, runtime.Object) error
	applyStatus     func(ctx context.Context, manager string, st *operatorStatus) error
}

func (o *Operator) operands() operands {
	return operands{
		namespace: o.cfg.Namespace,
		spec: func() *operatorv1.OperatorSpec {
			spec, _, _ := o.spec()
			return spec
		},
		enabled:         o.enabled,
		apply:           o.apply,
		deleteIfPresent: o.deleteIfPresent,
		applyStatus:     o.applyStatus,
	}
}

// companion tells whether the operator runs in companion mode.
func (o *Operator) companion() bool { return o.cfg.Mode == platform.ModeCompanion }

// clusterCSIDriver returns the operator's own object from the cache, nil when it does not
// exist: the ClusterCSIDriver in driver mode, the ManilaCompanion (which has the same spec and
// status shapes) in companion mode.
func (o *Operator) clusterCSIDriver() *operatorv1.ClusterCSIDriver {
	if o.companion() {
		return o.companionObject()
	}
	return o.platformClusterCSIDriver()
}

// platformClusterCSIDriver returns the ClusterCSIDriver manila.csi.openstack.org from the
// cache: the operator's own in driver mode, the platform's in companion mode.
func (o *Operator) platformClusterCSIDriver() *operatorv1.ClusterCSIDriver {
	d, err := o.lister.clusterCSIDrivers.Get(operator.DriverName)
	if err != nil {
		return nil
	}
	return d
}

// companionObject reads the ManilaCompanion "cluster" into the ClusterCSIDriver type.
func (o *Operator) companionObject() *operatorv1.ClusterCSIDriver {
	item, exists, err := o.inf.self.GetIndexer().GetByKey(operator.CompanionName)
	if err != nil || !exists {
		return nil
	}
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	var d operatorv1.ClusterCSIDriver
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		klog.Errorf("%s %s: %v", operator.CompanionKind, operator.CompanionName, err)
		return nil
	}
	return &d
}

// spec returns the ClusterCSIDriver's spec and status from the cache, nil when it does not exist.
func (o *Operator) spec() (*operatorv1.OperatorSpec, *operatorv1.OperatorStatus, error) {
	d := o.clusterCSIDriver()
	if d == nil {
		return nil, nil, nil
	}
	return &d.Spec.OperatorSpec, &d.Status.OperatorStatus, nil
}

// enabled reports whether the driver is installed: the operator creates the CSIDriver object
// when it first finds Manila, and from then on keeps the driver even when Manila goes away, so
// that pods can still unmount. It is read from the cluster, so it survives restarts.
func (o *Operator) enabled() bool {
	d, err := o.lister.csiDrivers.Get(operator.DriverName)
	return err == nil && d.DeletionTimestamp == nil
}

// logVerbosity maps the ClusterCSIDriver's logLevel (and operatorLogLevel) to --v.
func logVerbosity(l operatorv1.LogLevel) int {
	switch l {
	case operatorv1.Debug:
		return 4
	case operatorv1.Trace:
		return 6
	case operatorv1.TraceAll:
		return 8
	}
	return 2
}

// newLogLevelController sets the operator's own verbosity from spec.operatorLogLevel.
func newLogLevelController(o *Operator) *controller {
	return o.newController("LoggingController", func(context.Context, *controller) error {
		spec, _, _ := o.spec()
		if spec == nil {
			return nil
		}
		want := logVerbosity(spec.OperatorLogLevel)
		if klog.V(klog.Level(want)).Enabled() && !klog.V(klog.Level(want+1)).Enabled() {
			return nil
		}
		var v klog.Level
		if err := v.Set(strconv.Itoa(want)); err != nil {
			return err
		}
		klog.Infof("operatorLogLevel %s: log verbosity %d", spec.OperatorLogLevel, want)
		return nil
	})
}

// infrastructure returns config.openshift.io Infrastructure "cluster", nil when absent.
func (o *Operator) infrastructure() *configv1.Infrastructure {
	infra, err := o.lister.infrastructures.Get("cluster")
	if err != nil {
		return nil
	}
	return infra
}

// proxy returns the cluster proxy's effective settings (status), nil when absent.
func (o *Operator) proxy() *configv1.ProxyStatus {
	p, err := o.lister.proxies.Get("cluster")
	if err != nil {
		return nil
	}
	return &p.Status
}

// proxyFunc routes OpenStack requests through the cluster proxy as it is now (read at each
// request, so a changed Proxy applies without a restart).
func (o *Operator) proxyFunc() func(*http.Request) (*url.URL, error) {
	return func(r *http.Request) (*url.URL, error) {
		p := o.proxy()
		if p == nil || (p.HTTPProxy == "" && p.HTTPSProxy == "") {
			return http.ProxyFromEnvironment(r)
		}
		return (&httpproxy.Config{HTTPProxy: p.HTTPProxy, HTTPSProxy: p.HTTPSProxy, NoProxy: p.NoProxy}).ProxyFunc()(r.URL)
	}
}

// crdExists tells from the metadata cache whether a CRD is installed.
func (o *Operator) crdExists(name string) bool {
	_, err := o.lister.crds.Get(name)
	return err == nil
}
