package controllers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/manila-setup/manila-setup/operator"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/manila-setup/manila-setup/internal/leaderelection"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
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
}

// DefaultMemoryLimit is the Go soft memory limit of `operator start` unless GOMEMLIMIT is set.
const DefaultMemoryLimit = 32 << 20

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
	// A soft memory limit keeps the heap small (the caches are a few MiB); GOMEMLIMIT overrides.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod
	}
	if opts.Identity == "" {
		opts.Identity = LeaderIdentity(os.Getenv)
	}
	ready := make(chan struct{})
	for _, ep := range []struct {
		addr    string
		metrics bool
	}{{opts.HealthAddress, true}, {opts.ProbeAddress, false}} {
		if ep.addr == "" {
			continue
		}
		srv, err := serveHealth(ep.addr, ready, ep.metrics, ep.metrics && opts.Profiling)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	op, err := New(opts.KubeConfig, nil, opts.Config)
	if err != nil {
		return err
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
	leCfg.Wrap(countRequests("leader-election"))
	kube, err := newKubeClients(leCfg)
	if err != nil {
		return err
	}
	klog.Infof("leader election on Lease %s/%s as %q", opts.Config.Namespace, lock, opts.Identity)
	err = leaderelection.Run(ctx, leaderelection.Config{
		Client:           kube.leases(opts.Config.Namespace),
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

// serveHealth serves /healthz (the process is alive), /readyz (this replica is leading and
// its controllers run) and, with metrics, /metrics (Prometheus, including OpenStack call
// counters).
func serveHealth(addr string, ready <-chan struct{}, metrics, profiling bool) (*http.Server, error) {
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
	if metrics {
		mux.Handle("/metrics", promhttp.HandlerFor(metricsRegistry(), promhttp.HandlerOpts{}))
		what = "/healthz, /readyz and /metrics"
	}
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
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

func metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}), KubeRequests)
	for name, c := range map[string]func() int64{
		"tokens":              OpenStackCalls.Tokens.Load,
		"catalog_reads":       OpenStackCalls.Catalogs.Load,
		"share_type_lists":    OpenStackCalls.ShareTypeLists.Load,
		"share_network_lists": OpenStackCalls.ShareNetworkLists.Load,
		"discoveries":         OpenStackCalls.Discoveries.Load,
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "manila_operator_openstack_" + name + "_total",
			Help: "OpenStack requests made by the operator: " + name,
		}, func() float64 { return float64(c()) }))
	}
	return reg
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
