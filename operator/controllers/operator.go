// Package controllers is the in-cluster Manila CSI driver operator, in the style of
// OpenShift's CSI driver operators (library-go's): the objects it applies live as YAML in
// assets/, each controller is one file with a sync, and every controller reports its own
// conditions on the ClusterCSIDriver manila.csi.openstack.org through server-side apply (one
// field manager per controller, so controllers never conflict on the status).
//
// The machinery every controller runs on (clients over a scheme of the few API groups it uses,
// informers, the controller loop, the kind table and the writes, status, events, metrics) is
// in operator/controllers/machinery. Each controller here is a struct of its own, built by a
// constructor from the listers, clients and functions it uses; start.go builds them all, and
// is the one place that knows the operator's mode.
//
// It reads from informer caches only: in steady state it makes no API writes and no direct GETs.
package controllers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configlisters "github.com/openshift/client-go/config/listers/config/v1"
	"golang.org/x/net/http/httpproxy"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/platform"
)

const (
	trustedCAConfigMap = "manila-csi-driver-trusted-ca-bundle"
	trustedCAKey       = "ca-bundle.crt"
	trustedCAHashAnnot = "manila.csi.openstack.org/trusted-ca-hash"
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

// DefaultManilaGracePeriod: ten resyncs. Long enough for a Manila or Keystone restart, a
// control-plane upgrade of the cloud or a load balancer failover; short enough that an admin
// hears of a real outage before users do.
const DefaultManilaGracePeriod = 10 * time.Minute

// Operator holds the informers and the controllers that start.go built for one mode.
type Operator struct {
	cfg       Config
	informers *machinery.Informers
	listers   machinery.Listers
	// self reads the operator's own object (see ownObject).
	self ownObject
	// credentials reads the credentials Secret.
	credentials func() (*operator.Credentials, error)
	// guard says whether the operator may write in this cluster (the platform controller decides).
	guard *platformGuard

	controllers []*machinery.Controller
	// resyncs asks each of them for a sync every Resync.
	resyncs *machinery.Resyncs
}

// Run starts the informers and the controllers and blocks until ctx ends.
func (o *Operator) Run(ctx context.Context) error {
	o.informers.Run(ctx.Done())
	klog.Infof("starting %d controllers (namespace %s, resync %s)", len(o.controllers), o.cfg.Namespace, o.cfg.Resync)
	var wg sync.WaitGroup
	for _, c := range o.controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(ctx)
		}()
	}
	o.resyncs.Run(ctx)
	<-ctx.Done()
	wg.Wait()
	return nil
}

// Detection is the operator's current answer to "which kind of cluster is this", nil before
// the first check.
func (o *Operator) Detection() *platform.Detection { return o.guard.detection() }

// operands is what a controller's sync needs from the operator besides its own inputs: the
// operator's own object and the writes. start.go provides them over the caches and clients;
// a unit test of a sync provides fakes.
type operands struct {
	namespace string
	// self is the operator's own object (ClusterCSIDriver, or ManilaCompanion in the same
	// type), nil when there is none; spec is its spec.
	self func() *operatorv1.ClusterCSIDriver
	spec func() *operatorv1.OperatorSpec
	// enabled tells whether the driver is installed (see installed).
	enabled         func() bool
	apply           func(context.Context, runtime.Object) (runtime.Object, error)
	deleteIfPresent func(context.Context, runtime.Object) error
	applyStatus     func(ctx context.Context, manager string, st *machinery.Status) error
}

// ownObject reads the operator's own object from the cache, nil when it does not exist: the
// ClusterCSIDriver in driver mode, the ManilaCompanion (which has the same spec and status
// shapes) in companion mode. start.go picks which.
type ownObject func() *operatorv1.ClusterCSIDriver

// spec returns the object's spec and status, nil when it does not exist.
func (f ownObject) spec() (*operatorv1.OperatorSpec, *operatorv1.OperatorStatus) {
	d := f()
	if d == nil {
		return nil, nil
	}
	return &d.Spec.OperatorSpec, &d.Status.OperatorStatus
}

// logVerbosity maps the ClusterCSIDriver's logLevel (and operatorLogLevel) to --v. TraceAll is
// 7, not OpenShift's usual 8: from 8 on, client-go logs the bodies of API requests and
// responses, which would put Secrets' data (the cloud credentials) in the operator's log and in
// the driver's sidecars' logs.
func logVerbosity(l operatorv1.LogLevel) int {
	switch l {
	case operatorv1.Debug:
		return 4
	case operatorv1.Trace:
		return 6
	case operatorv1.TraceAll:
		return 7
	}
	return 2
}

// newLogLevelController sets the operator's own verbosity from spec.operatorLogLevel.
func newLogLevelController(w wiring) *machinery.Controller {
	return w.loop.Controller("LoggingController", func(context.Context, *machinery.Controller) error {
		spec := w.ops.spec()
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

// infrastructureOf returns config.openshift.io Infrastructure "cluster", nil when absent.
func infrastructureOf(l configlisters.InfrastructureLister) func() *configv1.Infrastructure {
	return func() *configv1.Infrastructure {
		infra, err := l.Get("cluster")
		if err != nil {
			return nil
		}
		return infra
	}
}

// proxyOf returns the cluster proxy's effective settings (status), nil when absent.
func proxyOf(l configlisters.ProxyLister) func() *configv1.ProxyStatus {
	return func() *configv1.ProxyStatus {
		p, err := l.Get("cluster")
		if err != nil {
			return nil
		}
		return &p.Status
	}
}

// proxyFunc routes OpenStack requests through the cluster proxy as it is now (read at each
// request, so a changed Proxy applies without a restart).
func proxyFunc(proxy func() *configv1.ProxyStatus) func(*http.Request) (*url.URL, error) {
	return func(r *http.Request) (*url.URL, error) {
		p := proxy()
		if p == nil || (p.HTTPProxy == "" && p.HTTPSProxy == "") {
			return http.ProxyFromEnvironment(r)
		}
		return (&httpproxy.Config{HTTPProxy: p.HTTPProxy, HTTPSProxy: p.HTTPSProxy, NoProxy: p.NoProxy}).ProxyFunc()(r.URL)
	}
}

func firstErr(errs ...error) error {
	var deferred error
	for _, e := range errs {
		switch {
		case e == nil:
		case machinery.IsDeferred(e):
			// A status write held back is no failure: any other error comes first.
			if deferred == nil {
				deferred = e
			}
		default:
			return e
		}
	}
	return deferred
}
