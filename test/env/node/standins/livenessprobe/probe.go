package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standin"
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
	srv, listening, err := standin.ServeHTTP(addr, h, s.errs)
	if err != nil {
		return "", err
	}
	s.closers = append(s.closers, srv)
	klog.InfoS("ServeMux listening", "address", listening)
	return listening, nil
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
	conn, err := standin.DialCSI(ctx, p.csiAddress)
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
	conn, err := standin.DialCSI(ctx, csiAddress)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	klog.InfoS("Calling CSI driver to discover driver name")
	name, err := standin.DriverName(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("getting the CSI driver's name from %s: %w", csiAddress, err)
	}
	return name, nil
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
