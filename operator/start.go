package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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
	// Identity of this replica in the lease (default: hostname).
	Identity string
	// HealthAddress serves /healthz, /readyz and /metrics over HTTP; "" disables. The default
	// binds to the loopback interface only.
	HealthAddress string
}

// DefaultMemoryLimit is the Go soft memory limit of `operator start` unless GOMEMLIMIT is set.
const DefaultMemoryLimit = 32 << 20

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
		// OpenShift's defaults: tolerate a 60 s apiserver outage, renew at a low write rate.
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 137*time.Second, 107*time.Second, 26*time.Second
	}
	if opts.Identity == "" {
		opts.Identity, _ = os.Hostname()
	}
	ready := make(chan struct{})
	if opts.HealthAddress != "" {
		srv, err := serveHealth(opts.HealthAddress, ready)
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
	leCfg := rest.AddUserAgent(rest.CopyConfig(opts.KubeConfig), OperatorName+"-leader-election")
	leCfg.Wrap(countRequests("leader-election"))
	kube, err := kubernetes.NewForConfig(leCfg)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(opts.Config.Namespace, OperatorName+"-lock"),
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.Identity},
	}
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            OperatorName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run,
			OnStoppedLeading: func() { close(lost) },
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	<-lost
	if ctx.Err() == nil {
		return errors.New("lost the leader lease; exiting so that a fresh process can compete for it")
	}
	return nil
}

// serveHealth serves /healthz (the process is alive), /readyz (this replica is leading and
// its controllers run) and /metrics (Prometheus, including OpenStack call counters).
func serveHealth(addr string, ready <-chan struct{}) (*http.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}), KubeRequests)
	for name, c := range map[string]func() int64{
		"tokens":              OpenStackCalls.Tokens.Load,
		"catalog_reads":       OpenStackCalls.Catalogs.Load,
		"share_type_lists":    OpenStackCalls.ShareTypeLists.Load,
		"share_network_lists": OpenStackCalls.ShareNetworkLists.Load,
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "manila_operator_openstack_" + name + "_total",
			Help: "OpenStack requests made by the operator: " + name,
		}, func() float64 { return float64(c()) }))
	}
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
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health endpoint: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Errorf("health endpoint: %v", err)
		}
	}()
	klog.Infof("serving /healthz, /readyz and /metrics on http://%s", ln.Addr())
	return srv, nil
}

func metaFor(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
