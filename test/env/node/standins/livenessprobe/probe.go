package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// servers are the running HTTP servers: /healthz and metrics on one address, metrics on a
// second one when the deprecated --metrics-address is set.
type servers struct {
	healthAddr  string
	metricsAddr string // "" when metrics share the health server or are off
	errs        chan error
	closers     []*http.Server
}

func (s *servers) close() {
	for _, srv := range s.closers {
		_ = srv.Close()
	}
}

// startServers listens as upstream does: metrics go with /healthz under --http-endpoint, on
// their own --metrics-address, or nowhere.
func startServers(o *options, driver, healthAddr string) (*servers, error) {
	m := newMetrics(driver)
	s := &servers{errs: make(chan error, 2)}
	mux := http.NewServeMux()
	mux.Handle("/healthz", &prober{csiAddress: o.csiAddress, timeout: o.probeTimeout, driver: driver, metrics: m})
	if o.metricsAddress == "" && o.httpEndpoint != "" {
		mux.Handle(o.metricsPath, m.handler())
	}
	if o.metricsAddress != "" {
		metricsMux := http.NewServeMux()
		metricsMux.Handle(o.metricsPath, m.handler())
		addr, err := s.serve(o.metricsAddress, metricsMux)
		if err != nil {
			return nil, err
		}
		s.metricsAddr = addr
	}
	addr, err := s.serve(healthAddr, mux)
	if err != nil {
		s.close()
		return nil, err
	}
	s.healthAddr = addr
	return s, nil
}

// serve listens on addr and serves h in the background; it returns the address it listens on.
func (s *servers) serve(addr string, h http.Handler) (string, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listening for HTTP on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.closers = append(s.closers, srv)
	klog.InfoS("ServeMux listening", "address", lis.Addr().String())
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("HTTP server on %s: %w", addr, err)
		}
	}()
	return lis.Addr().String(), nil
}

// prober answers /healthz with the driver's Identity Probe.
type prober struct {
	csiAddress string
	timeout    time.Duration
	driver     string
	metrics    *metrics
}

func (p *prober) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), p.timeout)
	defer cancel()
	if err := p.probe(ctx); err != nil {
		klog.ErrorS(err, "Health check failed", "driver", p.driver)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(err.Error()))
		return
	}
	klog.V(5).InfoS("Health check succeeded", "driver", p.driver)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}

// probe connects to the driver and calls Probe, both within ctx. A missing "ready" means ready,
// as the CSI spec says.
func (p *prober) probe(ctx context.Context) error {
	conn, err := dialCSI(ctx, p.csiAddress)
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	rsp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
	p.metrics.record("/csi.v1.Identity/Probe", err, time.Since(start))
	if err != nil {
		return err
	}
	if ready := rsp.GetReady(); ready != nil && !ready.GetValue() {
		return errors.New("driver responded but is not ready")
	}
	return nil
}

// driverName connects to the driver, waiting for as long as ctx allows, and asks its name.
func driverName(ctx context.Context, csiAddress string) (string, error) {
	conn, err := dialCSI(ctx, csiAddress)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	klog.InfoS("Calling CSI driver to discover driver name")
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("getting the CSI driver's name from %s: %w", csiAddress, err)
	}
	if info.GetName() == "" {
		return "", fmt.Errorf("CSI driver at %s answered GetPluginInfo with an empty driver name", csiAddress)
	}
	return info.GetName(), nil
}

// dialCSI connects to a gRPC server (a path is a unix socket), retrying every second at most as
// csi-lib-utils does, until the connection is ready or ctx ends.
func dialCSI(ctx context.Context, address string) (*grpc.ClientConn, error) {
	target := address
	if strings.HasPrefix(address, "/") {
		target = "unix://" + address
	}
	bc := backoff.DefaultConfig
	bc.MaxDelay = time.Second
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc}))
	if err != nil {
		return nil, fmt.Errorf("connecting to CSI driver at %s: %w", address, err)
	}
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(ctx, state) {
			_ = conn.Close()
			return nil, fmt.Errorf("CSI driver at %s did not accept a connection: %w (last state %s)", address, ctx.Err(), state)
		}
	}
	return conn, nil
}

// metrics are the sidecar metrics csi-lib-utils exports: the latency of each CSI call by driver,
// method and gRPC code, and the process start time.
type metrics struct {
	registry *prometheus.Registry
	latency  *prometheus.HistogramVec
	driver   string
}

func newMetrics(driver string) *metrics {
	m := &metrics{registry: prometheus.NewRegistry(), driver: driver}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "csi_sidecar",
		Name:      "operations_seconds",
		Help:      "[ALPHA] Container Storage Interface operation duration with gRPC error code status total",
		Buckets:   []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
	}, []string{"driver_name", "method_name", "grpc_status_code"})
	m.registry.MustRegister(m.latency, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) record(method string, err error, d time.Duration) {
	m.latency.WithLabelValues(m.driver, method, status.Code(err).String()).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
