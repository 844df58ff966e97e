package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Without service-ca's files the handshake gets a self-signed certificate for the Service's
// names; once the files are there (the kubelet fills an optional Secret volume when the Secret
// appears), theirs, and a renewal's after it.
func TestServingCertFollowsTheMountedSecret(t *testing.T) {
	dir := t.TempDir()
	names := servingCertNames(OperatorMetricsService, "ns")
	s := &servingCert{dir: dir, names: names}
	leaf := func() *x509.Certificate {
		t.Helper()
		c, err := s.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	fallback := leaf()
	if !slices.Equal(fallback.DNSNames, names) {
		t.Fatalf("self-signed for %v, want %v", fallback.DNSNames, names)
	}
	if again := leaf(); again.SerialNumber.Cmp(fallback.SerialNumber) != 0 {
		t.Fatalf("a new self-signed certificate at each handshake")
	}
	write := func(at time.Time) *x509.Certificate {
		t.Helper()
		crt, key, err := newServingCert(names, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
		got := leaf()
		if got.SerialNumber.Cmp(fallback.SerialNumber) == 0 {
			t.Fatal("still the self-signed certificate")
		}
		return got
	}
	first := write(time.Now().Add(-time.Hour))
	if renewed := write(time.Now()); renewed.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the renewed certificate is not served")
	}
	// A half-written renewal: the last good certificate stays.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := leaf(); got.SerialNumber.Cmp(fallback.SerialNumber) == 0 {
		t.Fatal("fell back to the self-signed certificate during a renewal")
	}
}

// BenchmarkMetricsScrape is one scrape of the operator's metrics, as Prometheus makes every
// 30 s: the whole registry, with the conditions of a healthy driver-mode ClusterCSIDriver, and
// the bearer token's review answered from the cache.
func BenchmarkMetricsScrape(b *testing.B) {
	d := &operatorv1.ClusterCSIDriver{}
	for _, c := range []string{"ManilaControllerDisabled", "ManilaReachable", "ManilaControllerAvailable", "ManilaControllerDegraded",
		"StorageNetworkReachable", "StorageClassesValid", "DriverMode", "DriverSecretAvailable", "DriverSecretDegraded",
		"MetricsServingCertAvailable", "MetricsServingCertDegraded", "ManilaDriverStaticResourcesAvailable", "ManilaDriverStaticResourcesDegraded",
		"ManilaDriverControllerServiceAvailable", "ManilaDriverControllerServiceProgressing", "ManilaDriverControllerServiceDegraded",
		"ManilaDriverNodeServiceAvailable", "ManilaDriverNodeServiceProgressing", "ManilaDriverNodeServiceDegraded",
		"NFSDriverNodeServiceAvailable", "NFSDriverNodeServiceProgressing", "NFSDriverNodeServiceDegraded"} {
		d.Status.Conditions = append(d.Status.Conditions, operatorv1.OperatorCondition{Type: c, Status: operatorv1.ConditionTrue, Reason: "AsExpected"})
	}
	reg := metricsRegistry()
	reg.MustRegister(conditionCollector{self: func() *operatorv1.ClusterCSIDriver { return d }})
	auth := newMetricsAuth(nil)
	auth.cache[sha256.Sum256([]byte("token"))] = review{user: "system:serviceaccount:openshift-monitoring:prometheus-k8s", allowed: true, until: time.Now().Add(time.Hour)}
	h := auth.wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer token")
	var size int
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}

// A refused caller is logged when the refusal is new for its token, not at every scrape.
func TestMetricsAuthLogsARefusalOnce(t *testing.T) {
	var logged bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&logged)
	defer func() { klog.SetOutput(os.Stderr); klog.LogToStderr(true) }()
	now := time.Now()
	a := newMetricsAuth(nil)
	a.now = func() time.Time { return now }
	a.ask = func(context.Context, string) (review, error) {
		return review{user: "system:serviceaccount:x:y", why: "no role grants it"}, nil
	}
	for range 4 {
		if rv, err := a.review(context.Background(), "token"); err != nil || rv.allowed {
			t.Fatalf("%+v %v", rv, err)
		}
		now = now.Add(reviewCacheTTLDenied) // each scrape asks again
	}
	klog.Flush()
	if n := strings.Count(logged.String(), "metrics: refused system:serviceaccount:x:y: no role grants it"); n != 1 {
		t.Fatalf("logged %d times, want 1:\n%s", n, logged.String())
	}
}
