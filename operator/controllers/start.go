package controllers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/internal/leaderelection"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// StartOptions are what `manila-setup operator start` needs beyond Config.
type StartOptions struct {
	Config     Config
	KubeConfig *rest.Config
	// LeaderElection makes only one replica active (a Lease in the operator namespace).
	LeaderElection bool
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	// Identity of this replica in the lease (default: LeaderIdentity).
	Identity string
	// HealthAddress serves /healthz, /readyz and /metrics over HTTP; "" disables. The default
	// binds to the loopback interface only.
	HealthAddress string
	// ProbeAddress serves /healthz and /readyz only (no metrics), for the kubelet's probes,
	// which cannot reach the pod's loopback interface; "" disables. The rendered Deployment
	// binds it to the pod IP.
	ProbeAddress string
	// Profiling adds Go's /debug/pprof/ handlers to HealthAddress (not to ProbeAddress).
	Profiling bool
	// MetricsAddress serves /metrics over HTTPS to callers allowed to get /metrics (for
	// Prometheus: see secure_metrics.go); "" disables. The rendered Deployment binds it to the
	// pod IP.
	MetricsAddress string
	// MetricsCertDir holds tls.crt and tls.key for MetricsAddress (service-ca's Secret); while
	// it holds none, a self-signed certificate is served.
	MetricsCertDir string
}

// DefaultMemoryLimit is the Go soft memory limit of `operator start` unless GOMEMLIMIT is set.
const DefaultMemoryLimit = 32 << 20

// DefaultGCPercent is the Go GC target of `operator start` unless GOGC is set: the heap may grow
// half its live size between collections instead of Go's default of its whole size. The live
// heap is a few MiB, so collections stay cheap; measured (docs/performance.md), it takes 3 to
// 5 MiB off the RSS for no measurable CPU, in steady state or in a 500-Machine scale-up.
const DefaultGCPercent = 50

// The lease timings are OpenShift's: they tolerate a 60 s apiserver outage and renew at a low
// write rate.
const (
	DefaultLeaseDuration = 137 * time.Second
	DefaultRenewDeadline = 107 * time.Second
	DefaultRetryPeriod   = 26 * time.Second
)

// DefaultHealthAddress binds to loopback: nothing is exposed unless asked for.
const DefaultHealthAddress = "127.0.0.1:8443"

// Start runs the operator until ctx ends: health and metrics endpoints, leader election (when
// enabled), then the controllers. Cancelling ctx (SIGTERM) stops the controllers and releases
// the lease so a successor takes over at once.
func Start(ctx context.Context, opts StartOptions) error {
	opts.Config.defaults()
	// A soft memory limit and a lower GC target keep the heap small (the caches are a few MiB);
	// GOMEMLIMIT and GOGC override them.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod
	}
	if opts.Identity == "" {
		opts.Identity = LeaderIdentity(os.Getenv)
	}
	ready := make(chan struct{})
	reg := metricsRegistry()
	shutdown := func(srv *http.Server) {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	for _, ep := range []struct {
		addr    string
		metrics *prometheus.Registry
	}{{opts.HealthAddress, reg}, {opts.ProbeAddress, nil}} {
		if ep.addr == "" {
			continue
		}
		srv, err := serveHealth(ep.addr, ready, ep.metrics, ep.metrics != nil && opts.Profiling)
		if err != nil {
			return err
		}
		defer shutdown(srv)
	}
	op, err := New(opts.KubeConfig, nil, opts.Config)
	if err != nil {
		return err
	}
	reg.MustRegister(conditionCollector{self: op.self})
	if opts.MetricsAddress != "" {
		mc := rest.AddUserAgent(rest.CopyConfig(opts.KubeConfig), operator.NamesFor(opts.Config.Mode).Operator+"-metrics")
		mc.Wrap(machinery.CountRequests("metrics-auth"))
		dyn, err := dynamic.NewForConfig(mc)
		if err != nil {
			return err
		}
		// The cluster's TLS security profile, read by every replica (see followTLSProfile).
		tc := rest.AddUserAgent(rest.CopyConfig(opts.KubeConfig), operator.NamesFor(opts.Config.Mode).Operator+"-metrics")
		tc.Wrap(machinery.CountRequests("metrics-tls-profile"))
		clients, err := machinery.NewClients(tc)
		if err != nil {
			return err
		}
		policy := newTLSPolicy()
		followTLSProfile(ctx, clients, policy)
		srv, err := serveSecureMetrics(opts.MetricsAddress, opts.MetricsCertDir, opts.Config.Namespace, reg, newMetricsAuth(dyn), policy)
		if err != nil {
			return err
		}
		defer shutdown(srv)
	}
	run := func(ctx context.Context) {
		close(ready)
		if err := op.Run(ctx); err != nil {
			klog.Errorf("operator stopped: %v", err)
		}
	}
	if !opts.LeaderElection {
		run(ctx)
		return nil
	}
	lock := operator.NamesFor(opts.Config.Mode).Operator + "-lock"
	leCfg := rest.AddUserAgent(rest.CopyConfig(opts.KubeConfig), operator.NamesFor(opts.Config.Mode).Operator+"-leader-election")
	leCfg.Wrap(machinery.CountRequests("leader-election"))
	kube, err := machinery.NewClients(leCfg)
	if err != nil {
		return err
	}
	klog.Infof("leader election on Lease %s/%s as %q", opts.Config.Namespace, lock, opts.Identity)
	err = leaderelection.Run(ctx, leaderelection.Config{
		Client:           kube.Leases(opts.Config.Namespace),
		Namespace:        opts.Config.Namespace,
		Name:             lock,
		Identity:         opts.Identity,
		LeaseDuration:    opts.LeaseDuration,
		RenewDeadline:    opts.RenewDeadline,
		RetryPeriod:      opts.RetryPeriod,
		ReleaseOnCancel:  true,
		OnStartedLeading: run,
		OnStoppedLeading: func() { klog.Infof("no longer leading") },
	})
	if err != nil {
		return err
	}
	// Run returns when ctx ends or when the lease was lost.
	if ctx.Err() == nil {
		return errors.New("lost the leader lease; exiting so that a fresh process can compete for it")
	}
	return nil
}

// New builds the operator. kubeConfig should allow enough client-side rate to create every
// operand in one burst; New raises QPS and burst when they are unset. A nil recorder writes
// Events into the operator namespace.
func New(kubeConfig *rest.Config, recorder machinery.Recorder, cfg Config) (*Operator, error) {
	cfg.defaults()
	names := operator.NamesFor(cfg.Mode)
	kc := rest.CopyConfig(kubeConfig)
	if kc.QPS == 0 {
		kc.QPS, kc.Burst = 50, 100
	}
	kc = rest.AddUserAgent(kc, names.Operator)
	kc.Wrap(machinery.CountRequests("operator"))
	kube, err := machinery.NewClients(kc)
	if err != nil {
		return nil, err
	}
	if recorder == nil {
		recorder = machinery.NewKubeRecorder(kube, cfg.Namespace, names.Operator)
	}
	return build(kube, recorder, cfg), nil
}

// modeProfile is what the operator's mode implies, decided once here: the controllers and the
// informers get the part they need as plain values, and none of them asks for the mode.
type modeProfile struct {
	names operator.Names
	// self is the operator's own object when it is not the ClusterCSIDriver.
	self *machinery.CustomResource
	// fieldManager owns what the operator writes; writes are the only kinds it may write
	// (none: every kind of machinery.Kinds).
	fieldManager string
	writes       []schema.GroupVersionKind
	// deploysDriver: the operator installs the driver and runs its controllers (the Secret,
	// the static resources, the workloads, the StorageClass lint); otherwise it accompanies
	// the platform's driver with StorageClasses and a status of its own.
	deploysDriver bool
	// listShareClients: the driver serving the classes takes a comma-separated nfs-shareClient.
	listShareClients bool
	// informers, when set, are the only informers to start: what the operator's RBAC lets it read.
	informers func(*machinery.Informers) []cache.SharedIndexInformer
	// reportMode is what the platform controller says of the cluster's mode, and where.
	reportMode func(*platformController, context.Context, *machinery.Controller, *platform.Detection, platform.Detection) error
}

func profileOf(mode platform.Mode) modeProfile {
	names := operator.NamesFor(mode)
	if mode != platform.ModeCompanion {
		return modeProfile{names: names, fieldManager: operator.OperatorName, deploysDriver: true, listShareClients: true,
			reportMode: (*platformController).syncDriverMode}
	}
	// Beside the platform's driver: what the platform lacks, and nothing it has.
	return modeProfile{
		names:        names,
		self:         &machinery.CustomResource{GVR: machinery.CompanionGVR, Kind: operator.CompanionKind, Name: operator.CompanionName},
		fieldManager: operator.CompanionOperatorName,
		writes:       []schema.GroupVersionKind{storagev1.SchemeGroupVersion.WithKind("StorageClass")},
		// The platform's driver may be older than v1.35.0: one CIDR.
		listShareClients: false,
		// Only what the companion's controllers read: its RBAC allows no more (nothing of the
		// driver's, which is the platform's).
		informers: func(i *machinery.Informers) []cache.SharedIndexInformer {
			return []cache.SharedIndexInformer{i.Self, i.ClusterCSIDriver, i.CSIDrivers, i.Credentials, i.StorageClasses,
				i.ClusterConfig, i.CRDs, i.Infrastructures, i.Proxies, i.Nodes, i.Deployments}
		},
		reportMode: (*platformController).syncCompanionMode,
	}
}

// build wires the informers, the writers and the controllers of cfg's mode.
func build(kube *machinery.Clients, recorder machinery.Recorder, cfg Config) *Operator {
	p := profileOf(cfg.Mode)
	inf := machinery.NewInformers(kube, cfg.Namespace, p.self)
	if p.informers != nil {
		inf.Restrict(p.informers(inf)...)
	}
	l := inf.Listers()
	platformDriver := clusterCSIDriverOf(l)
	self, target := ownObject(platformDriver), machinery.ClusterCSIDriverStatus(kube, operator.DriverName)
	if p.self != nil {
		self, target = customObject(inf.Self, *p.self), machinery.CustomResourceStatus(kube, *p.self)
	}
	common := []cache.SharedIndexInformer{inf.Self, inf.CSIDrivers}
	if inf.Self != inf.ClusterCSIDriver {
		// The platform's ClusterCSIDriver too.
		common = []cache.SharedIndexInformer{inf.Self, inf.ClusterCSIDriver, inf.CSIDrivers}
	}
	guard := &platformGuard{}
	loop := machinery.Loop{Resyncs: machinery.NewResyncs(cfg.Resync), Gate: guard.allows(cfg.Mode), Common: common, Events: machinery.NewEvents()}
	writer := machinery.NewWriter(kube, inf, machinery.WriterOptions{Namespace: cfg.Namespace, FieldManager: p.fieldManager, Recorder: recorder, Kinds: p.writes})
	status := machinery.NewStatusWriter(self, target)
	ops := operands{
		namespace:       cfg.Namespace,
		self:            self,
		spec:            func() *operatorv1.OperatorSpec { spec, _ := self.spec(); return spec },
		enabled:         driverInstalled(l),
		apply:           writer.Apply,
		deleteIfPresent: writer.DeleteIfPresent,
		applyStatus:     status.Apply,
	}
	o := &Operator{cfg: cfg, informers: inf, listers: l, self: self, guard: guard, resyncs: loop.Resyncs,
		credentials: credentialsReader{secrets: l.Credentials, namespace: cfg.Namespace, cloud: cfg.CloudName}.read}

	storage := &storageNetworks{given: cfg.StorageNetworkID}
	installConfig := &installConfigs{lister: l.ClusterConfig}
	infrastructure := infrastructureOf(l.Infrastructures)
	tlsProfile := tlsProfileOf(l.APIServers)
	secretNamespace := p.names.SecretNamespace
	if secretNamespace == "" {
		secretNamespace = cfg.Namespace
	}
	w := wiring{cfg: cfg, profile: p, loop: loop, inf: inf, l: l, kube: kube, ops: ops, writer: writer, recorder: recorder, installConfig: installConfig,
		guard: guard, platformDriver: platformDriver, credentials: o.credentials, storage: storage,
		mounts: &shareClientSource{given: cfg.MachineNetworks, installConfig: installConfig, storage: storage,
			crdExists: inf.CRDExists, machineAPI: inf.DynamicLister, nodes: cachedNodes(l.Nodes)},
		infrastructure: infrastructure,
		vars:           assetVars{namespace: cfg.Namespace, images: cfg.Images, infrastructure: infrastructure, storage: storage, tls: tlsProfile}.of,
		tlsProfile:     tlsProfile,
		findings:       &machinery.Published[manilaFindings]{}, secretNamespace: secretNamespace,
		kickOthers: func(except *machinery.Controller) {
			for _, c := range o.controllers {
				if c != except {
					c.Enqueue()
				}
			}
		},
	}
	// Every mode runs the first five; the rest keep the driver the operator deploys.
	controllers := []newController{newPlatformController, newLogLevelController, newManilaController, newStorageNetworkController, newSnapshotExplainer}
	if p.deploysDriver {
		controllers = append(controllers, newStorageClassLintController, newSecretController, newStaticController, newServingCertController,
			workloadControllerOf(workloadControllerService), workloadControllerOf(workloadNodeService), workloadControllerOf(workloadNFSNodeService))
	}
	for _, newCtrl := range controllers {
		o.controllers = append(o.controllers, newCtrl(w))
	}
	return o
}

// clusterCSIDriverOf returns the ClusterCSIDriver manila.csi.openstack.org from the cache: the
// operator's own in driver mode, the platform's in companion mode.
func clusterCSIDriverOf(l machinery.Listers) func() *operatorv1.ClusterCSIDriver {
	return func() *operatorv1.ClusterCSIDriver {
		d, err := l.ClusterCSIDrivers.Get(operator.DriverName)
		if err != nil {
			return nil
		}
		return d
	}
}

// customObject reads the custom resource r (the ManilaCompanion "cluster") from its informer
// into the ClusterCSIDriver type, whose spec and status shapes it has.
func customObject(inf cache.SharedIndexInformer, r machinery.CustomResource) ownObject {
	return func() *operatorv1.ClusterCSIDriver {
		item, exists, err := inf.GetIndexer().GetByKey(r.Name)
		if err != nil || !exists {
			return nil
		}
		u, ok := item.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		var d operatorv1.ClusterCSIDriver
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			klog.Errorf("%s %s: %v", r.Kind, r.Name, err)
			return nil
		}
		return &d
	}
}

// driverInstalled reports whether the driver is installed: the operator creates the CSIDriver
// object when it first finds Manila, and from then on keeps the driver even when Manila goes
// away, so that pods can still unmount. It is read from the cluster, so it survives restarts.
func driverInstalled(l machinery.Listers) func() bool {
	return func() bool {
		d, err := l.CSIDrivers.Get(operator.DriverName)
		return err == nil && d.DeletionTimestamp == nil
	}
}

// serveHealth serves /healthz (the process is alive), /readyz (this replica is leading and
// its controllers run) and, with metrics, /metrics (Prometheus, including OpenStack call
// counters).
func serveHealth(addr string, ready <-chan struct{}, metrics *prometheus.Registry, profiling bool) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			fmt.Fprintln(w, "ok")
		default:
			http.Error(w, "not leading yet", http.StatusServiceUnavailable)
		}
	})
	what := "/healthz and /readyz"
	if metrics != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
		what = "/healthz, /readyz and /metrics"
	}
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		what += " and /debug/pprof/"
	}
	ln, err := net.Listen("tcp", listenAddress(addr))
	if err != nil {
		return nil, fmt.Errorf("health endpoint: %w", err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Errorf("health endpoint: %v", err)
		}
	}()
	klog.Infof("serving %s on http://%s", what, ln.Addr())
	return srv, nil
}

// listenAddress accepts an unbracketed IPv6 address with a port, as $(POD_IP):8444 expands
// to on IPv6 clusters ("fd01::5:8444"), and brackets it.
func listenAddress(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr
	}
	if ip, err := netip.ParseAddr(addr[:i]); err == nil && ip.Is6() {
		return net.JoinHostPort(addr[:i], addr[i+1:])
	}
	return addr
}

// LeaderIdentity names this replica in the Lease: the pod's name (the rendered Deployment passes
// POD_NAME through the downward API), else the host name with a random suffix, so that two
// operators on one host (a sandbox and a developer's, or two pods with host networking) never
// share an identity and both believe they lead.
func LeaderIdentity(getenv func(string) string) string {
	if pod := getenv("POD_NAME"); pod != "" {
		return pod
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "manila-setup-operator"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s_%x", host, b)
}
