// Package controllers is the in-cluster Manila CSI driver operator, built on library-go in the style
// of OpenShift's CSI driver operators: the objects it applies live as YAML in assets/, each
// controller is one file with a sync, and every controller reports its own conditions on the
// ClusterCSIDriver manila.csi.openstack.org through server-side apply (one field manager per
// controller, so controllers never conflict on the status).
//
// It reads from informer caches only: in steady state it makes no API writes and no direct GETs.
package controllers

import (
	"context"
	"github.com/manila-setup/manila-setup/operator"
	"net/http"
	"net/url"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	applyoperatorv1 "github.com/openshift/client-go/operator/applyconfigurations/operator/v1"
	"github.com/openshift/library-go/pkg/controller/factory"
	"github.com/openshift/library-go/pkg/operator/events"
	goc "github.com/openshift/library-go/pkg/operator/genericoperatorclient"
	"github.com/openshift/library-go/pkg/operator/loglevel"
	"github.com/openshift/library-go/pkg/operator/v1helpers"
	"golang.org/x/net/http/httpproxy"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
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
	// Version is reported in status.version.
	Version string
	// NewManilaSource builds the OpenStack client; nil means NewManilaSource.
	NewManilaSource func(*operator.Credentials, time.Duration) (ManilaSource, error)
}

func (c *Config) defaults() {
	if c.Namespace == "" {
		c.Namespace = operator.DefaultNamespace
	}
	if c.Resync <= 0 {
		c.Resync = operator.DefaultResync
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
	clusterCSIDriverGVK  = operatorv1.GroupVersion.WithKind("ClusterCSIDriver")
	serviceMonitorGVR    = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	snapshotClassGVR     = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	machineSetGVR        = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}
	crdGVR               = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nodeGVR              = corev1.SchemeGroupVersion.WithResource("nodes")
	everything           = labels.Everything()
	managedSelector      = labels.SelectorFromSet(labels.Set{operator.LabelManagedBy: operator.ManagedByValue})
	managedSelectorTweak = func(o *metav1.ListOptions) { o.LabelSelector = managedSelector.String() }
)

// Operator holds the clients, the informers and the controllers.
type Operator struct {
	cfg      Config
	kube     kubernetes.Interface
	dynamic  dynamic.Interface
	op       v1helpers.OperatorClientWithFinalizers
	recorder events.Recorder

	nsInformers      informers.SharedInformerFactory // operator namespace, ours only (label)
	credInformers    informers.SharedInformerFactory // the credentials Secret only (by name)
	clusterInformers informers.SharedInformerFactory // cluster-scoped, ours only (label)
	scInformers      informers.SharedInformerFactory // all StorageClasses (names taken by users)
	sysInformers     informers.SharedInformerFactory // kube-system/cluster-config-v1 only
	configInformers  configinformers.SharedInformerFactory
	opInformers      dynamicinformer.DynamicSharedInformerFactory
	metaInformers    metadatainformer.SharedInformerFactory // nodes, CRDs: metadata only
	// Resources whose CRD may appear at run time, each informer as narrow as its use:
	dynInformers   dynamicinformer.DynamicSharedInformerFactory // cluster-scoped, ours only (label): VolumeSnapshotClasses
	nsDynInformers dynamicinformer.DynamicSharedInformerFactory // operator namespace, ours only (label): ServiceMonitors
	msInformers    dynamicinformer.DynamicSharedInformerFactory // openshift-machine-api: MachineSets

	controllers []factory.Controller
	stopCh      <-chan struct{}
}

// New builds the operator. kubeConfig should allow enough client-side rate to create every
// operand in one burst; New raises QPS and burst when they are unset.
func New(kubeConfig *rest.Config, recorder events.Recorder, cfg Config) (*Operator, error) {
	cfg.defaults()
	kc := rest.CopyConfig(kubeConfig)
	if kc.QPS == 0 {
		kc.QPS, kc.Burst = 50, 100
	}
	kc = rest.AddUserAgent(kc, operator.OperatorName)
	kc.Wrap(countRequests("operator"))
	kube, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	cfgClient, err := configclient.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	opClient, opInformers, err := goc.NewClusterScopedOperatorClientWithConfigName(clock.RealClock{}, kc,
		clusterCSIDriverGVR, clusterCSIDriverGVK, operator.DriverName, extractOperatorSpec, extractOperatorStatus)
	if err != nil {
		return nil, err
	}
	if recorder == nil {
		recorder = events.NewKubeRecorder(kube.CoreV1().Events(cfg.Namespace), operator.OperatorName, &corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: cfg.Namespace, Name: operator.OperatorName,
		}, clock.RealClock{})
	}
	o := &Operator{
		cfg: cfg, kube: kube, dynamic: dyn, op: opClient, recorder: recorder,
		// The namespace is shared with other CSI driver operators (their Secrets, CA bundles):
		// cache only what this operator owns, and the one Secret it reads.
		nsInformers: informers.NewSharedInformerFactoryWithOptions(kube, cfg.Resync, informers.WithNamespace(cfg.Namespace),
			informers.WithTweakListOptions(managedSelectorTweak), slim),
		credInformers: informers.NewSharedInformerFactoryWithOptions(kube, cfg.Resync, informers.WithNamespace(cfg.Namespace), slim,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", operator.CredentialsSecretName).String()
			})),
		clusterInformers: informers.NewSharedInformerFactoryWithOptions(kube, cfg.Resync, informers.WithTweakListOptions(managedSelectorTweak), slim),
		scInformers:      informers.NewSharedInformerFactoryWithOptions(kube, cfg.Resync, slim),
		sysInformers: informers.NewSharedInformerFactoryWithOptions(kube, cfg.Resync, informers.WithNamespace(clusterConfigNS), slim,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", clusterConfigName).String()
			})),
		configInformers: configinformers.NewSharedInformerFactoryWithOptions(cfgClient, cfg.Resync, configinformers.WithTransform(stripManagedFields)),
		opInformers:     opInformers,
		metaInformers:   metadatainformer.NewSharedInformerFactoryWithOptions(meta, cfg.Resync, metadatainformer.WithTransform(stripManagedFields)),
		dynInformers:    dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, cfg.Resync, metav1.NamespaceAll, managedSelectorTweak),
		nsDynInformers:  dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, cfg.Resync, cfg.Namespace, managedSelectorTweak),
		msInformers:     dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, cfg.Resync, machineAPINamespace, nil),
	}
	o.buildControllers()
	return o, nil
}

// slim drops managedFields from cached Kubernetes objects: the operator never reads them there,
// and they are often the largest part of an object. (The ClusterCSIDriver's informer keeps
// them: server-side apply of the status compares against them.)
var slim = informers.WithTransform(stripManagedFields)

func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Run starts the informers and the controllers and blocks until ctx ends.
func (o *Operator) Run(ctx context.Context) error {
	o.stopCh = ctx.Done()
	for _, f := range []interface{ Start(<-chan struct{}) }{
		o.nsInformers, o.credInformers, o.clusterInformers, o.scInformers, o.sysInformers, o.configInformers, o.opInformers, o.metaInformers,
		o.dynInformers, o.nsDynInformers, o.msInformers,
	} {
		f.Start(ctx.Done())
	}
	klog.Infof("starting %d controllers (namespace %s, resync %s)", len(o.controllers), o.cfg.Namespace, o.cfg.Resync)
	for _, c := range o.controllers {
		go c.Run(ctx, 1)
	}
	<-ctx.Done()
	return nil
}

func (o *Operator) buildControllers() {
	o.controllers = append(o.controllers,
		loglevel.NewClusterOperatorLoggingController(o.op, o.recorder),
		newManilaController(o),
		newSecretController(o),
		newStaticController(o),
		newWorkloadController(o, workloadControllerService),
		newWorkloadController(o, workloadNodeService),
		newWorkloadController(o, workloadNFSNodeService),
	)
}

// common informers every controller reacts to.
func (o *Operator) baseInformers() []factory.Informer {
	return []factory.Informer{
		o.op.Informer(),
		o.clusterInformers.Storage().V1().CSIDrivers().Informer(),
	}
}

// spec returns the ClusterCSIDriver's spec from the cache, nil when it does not exist.
func (o *Operator) spec() (*operatorv1.OperatorSpec, *operatorv1.OperatorStatus, error) {
	spec, status, _, err := o.op.GetOperatorState()
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	return spec, status, err
}

// enabled reports whether the driver is installed: the operator creates the CSIDriver object
// when it first finds Manila, and from then on keeps the driver even when Manila goes away, so
// that pods can still unmount. It is read from the cluster, so it survives restarts.
func (o *Operator) enabled() bool {
	d, err := o.clusterInformers.Storage().V1().CSIDrivers().Lister().Get(operator.DriverName)
	return err == nil && d.DeletionTimestamp == nil
}

// logVerbosity maps the ClusterCSIDriver's logLevel to the driver's --v.
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

// infrastructure returns config.openshift.io Infrastructure "cluster", nil when absent.
func (o *Operator) infrastructure() *configv1.Infrastructure {
	infra, err := o.configInformers.Config().V1().Infrastructures().Lister().Get("cluster")
	if err != nil {
		return nil
	}
	return infra
}

// proxy returns the cluster proxy's effective settings (status), nil when absent.
func (o *Operator) proxy() *configv1.ProxyStatus {
	p, err := o.configInformers.Config().V1().Proxies().Lister().Get("cluster")
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
	_, err := o.metaInformers.ForResource(crdGVR).Lister().Get(name)
	return err == nil
}

// dynamicLister returns a synced lister for a resource whose CRD may appear at run time; the
// informer is created on first use. ok is false until it has synced.
func (o *Operator) dynamicLister(gvr schema.GroupVersionResource) (cache.GenericLister, bool) {
	f := o.dynInformers
	switch gvr {
	case serviceMonitorGVR:
		// The operator may read ServiceMonitors in its namespace only (Role, not ClusterRole).
		f = o.nsDynInformers
	case machineSetGVR:
		f = o.msInformers
	}
	inf := f.ForResource(gvr)
	// Fails, harmlessly, once the informer runs.
	_ = inf.Informer().SetTransform(stripManagedFields)
	if o.stopCh != nil {
		f.Start(o.stopCh)
	}
	return inf.Lister(), inf.Informer().HasSynced()
}

// status helpers --------------------------------------------------------------------------

func condition(t string, s operatorv1.ConditionStatus, reason, msg string) *applyoperatorv1.OperatorConditionApplyConfiguration {
	return applyoperatorv1.OperatorCondition().WithType(t).WithStatus(s).WithReason(reason).WithMessage(msg)
}

// applyStatus writes this controller's part of the status. The library compares it with what
// the same field manager wrote last (from the cache) and skips the call when nothing changed.
func (o *Operator) applyStatus(ctx context.Context, manager string, st *applyoperatorv1.OperatorStatusApplyConfiguration) error {
	if _, err := o.op.GetObjectMeta(); apierrors.IsNotFound(err) {
		return nil
	}
	return o.op.ApplyOperatorStatus(ctx, manager, st)
}

func extractOperatorStatus(obj *unstructured.Unstructured, fieldManager string) (*applyoperatorv1.OperatorStatusApplyConfiguration, error) {
	var d operatorv1.ClusterCSIDriver
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
		return nil, err
	}
	ac, err := applyoperatorv1.ExtractClusterCSIDriverStatus(&d, fieldManager)
	if err != nil {
		return nil, err
	}
	if ac.Status == nil {
		return nil, nil
	}
	return &ac.Status.OperatorStatusApplyConfiguration, nil
}

func extractOperatorSpec(obj *unstructured.Unstructured, fieldManager string) (*applyoperatorv1.OperatorSpecApplyConfiguration, error) {
	var d operatorv1.ClusterCSIDriver
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
		return nil, err
	}
	ac, err := applyoperatorv1.ExtractClusterCSIDriver(&d, fieldManager)
	if err != nil {
		return nil, err
	}
	if ac.Spec == nil {
		return nil, nil
	}
	return &ac.Spec.OperatorSpecApplyConfiguration, nil
}

// newController wires a sync function into a library-go controller with the common informers.
func (o *Operator) newController(name string, sync factory.SyncFunc, extra ...factory.Informer) factory.Controller {
	return factory.New().
		WithSync(sync).
		WithInformers(append(o.baseInformers(), extra...)...).
		ResyncEvery(o.cfg.Resync).
		ToController(name, o.recorder)
}
