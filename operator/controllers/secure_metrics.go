package controllers

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// The operator's metrics for Prometheus: /metrics over HTTPS on the pod IP, for a caller whose
// bearer token the API server accepts (TokenReview) and who may "get" the non-resource URL
// /metrics (SubjectAccessReview), as OpenShift's platform Prometheus is allowed to. That is
// what a kube-rbac-proxy sidecar would do; doing it here saves a container, an image to pull
// and mirror, and its memory, for two API requests a minute at the usual scrape interval.
//
// The certificate is the one OpenShift's service-ca writes for the Service
// manila-csi-driver-operator-metrics (mounted from its Secret, re-read when it is renewed).
// Where no service-ca writes it, the operator serves a self-signed certificate for the same
// names, made at start: the scrape then needs the ServiceMonitor's tlsConfig to skip
// verification or to trust it some other way.

// OperatorMetricsService is the Service in front of the operator's metrics, and the names of
// its serving certificate.
const OperatorMetricsService = "manila-csi-driver-operator-metrics"

// reviewCacheTTL is how long an answer about a token is kept: one TokenReview and one
// SubjectAccessReview per scraper per minute, whatever the scrape interval. A refusal is kept
// for less, so that a grant takes effect soon.
const (
	reviewCacheTTL       = time.Minute
	reviewCacheTTLDenied = 10 * time.Second
	// reviewCacheMax bounds the cache: callers with many tokens cannot grow it.
	reviewCacheMax = 64
)

var (
	tokenReviewGVR         = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}
	subjectAccessReviewGVR = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}
)

// metricsAuth decides who may read /metrics, with the API server's answers.
type metricsAuth struct {
	dyn dynamic.Interface
	now func() time.Time
	// ask asks the API server who a token is and whether they may get /metrics.
	ask func(ctx context.Context, token string) (review, error)

	mu    sync.Mutex
	cache map[[32]byte]review
}

type review struct {
	user    string
	allowed bool
	why     string
	until   time.Time
}

func newMetricsAuth(dyn dynamic.Interface) *metricsAuth {
	a := &metricsAuth{dyn: dyn, now: time.Now, cache: map[[32]byte]review{}}
	a.ask = a.askAPIServer
	return a
}

// wrap serves next only to callers allowed to get /metrics: 401 without a token or with one
// the API server does not accept, 403 when the caller may not, 503 when it could not be asked.
func (a *metricsAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="manila-csi-driver-operator"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		rv, err := a.review(r.Context(), token)
		switch {
		case err != nil:
			klog.V(2).Infof("metrics: could not review a caller's token: %v", err)
			http.Error(w, "the API server could not be asked whether the caller may read /metrics", http.StatusServiceUnavailable)
		case rv.user == "":
			http.Error(w, "Unauthorized: "+rv.why, http.StatusUnauthorized)
		case !rv.allowed:
			http.Error(w, fmt.Sprintf("Forbidden: %s may not get /metrics: %s", rv.user, rv.why), http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func bearerToken(r *http.Request) (string, bool) {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

// review returns who the token is and whether they may get /metrics, from the cache when the
// answer is recent. Only the token's hash is kept.
func (a *metricsAuth) review(ctx context.Context, token string) (review, error) {
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	prev, had := a.cache[key]
	a.mu.Unlock()
	if had && now.Before(prev.until) {
		return prev, nil
	}
	rv, err := a.ask(ctx, token)
	if err != nil {
		return review{}, err
	}
	rv.until = now.Add(reviewCacheTTLDenied)
	if rv.allowed {
		rv.until = now.Add(reviewCacheTTL)
	}
	// A refusal is logged when it is new for this token, not at every scrape.
	if !rv.allowed && (!had || prev.allowed || prev.why != rv.why) {
		who := rv.user
		if who == "" {
			who = "a caller whose token the API server does not accept"
		}
		klog.Infof("metrics: refused %s: %s", who, rv.why)
	}
	a.mu.Lock()
	if len(a.cache) >= reviewCacheMax {
		for k, old := range a.cache {
			if !now.Before(old.until) || len(a.cache) >= reviewCacheMax {
				delete(a.cache, k)
			}
		}
	}
	a.cache[key] = rv
	a.mu.Unlock()
	return rv, nil
}

// askAPIServer makes a TokenReview, then a SubjectAccessReview for the user it names.
func (a *metricsAuth) askAPIServer(ctx context.Context, token string) (review, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := a.dyn.Resource(tokenReviewGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
		"spec": map[string]any{"token": token},
	}}, metav1.CreateOptions{})
	if err != nil {
		return review{}, fmt.Errorf("TokenReview: %w", err)
	}
	if ok, _, _ := unstructured.NestedBool(tr.Object, "status", "authenticated"); !ok {
		why, _, _ := unstructured.NestedString(tr.Object, "status", "error")
		if why == "" {
			why = "the API server does not accept the token"
		}
		return review{why: why}, nil
	}
	user, _, _ := unstructured.NestedString(tr.Object, "status", "user", "username")
	uid, _, _ := unstructured.NestedString(tr.Object, "status", "user", "uid")
	groups, _, _ := unstructured.NestedStringSlice(tr.Object, "status", "user", "groups")
	extra, _, _ := unstructured.NestedMap(tr.Object, "status", "user", "extra")
	spec := map[string]any{
		"user": user, "uid": uid,
		"nonResourceAttributes": map[string]any{"path": "/metrics", "verb": "get"},
	}
	if len(groups) > 0 {
		g := make([]any, len(groups))
		for i, s := range groups {
			g[i] = s
		}
		spec["groups"] = g
	}
	if len(extra) > 0 {
		spec["extra"] = extra
	}
	sar, err := a.dyn.Resource(subjectAccessReviewGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec,
	}}, metav1.CreateOptions{})
	if err != nil {
		return review{}, fmt.Errorf("SubjectAccessReview for %s: %w", user, err)
	}
	allowed, _, _ := unstructured.NestedBool(sar.Object, "status", "allowed")
	why, _, _ := unstructured.NestedString(sar.Object, "status", "reason")
	if !allowed && why == "" {
		why = `no role grants "get" on the non-resource URL /metrics`
	}
	return review{user: user, allowed: allowed, why: why}, nil
}

// servingCert gives the TLS handshake the certificate in dir (tls.crt, tls.key: the service-ca
// Secret's keys), re-read when either file changes, or, while dir holds none, a self-signed
// one made once.
type servingCert struct {
	dir   string
	names []string

	mu       sync.Mutex
	loaded   *tls.Certificate
	stamp    string
	fallback *tls.Certificate
}

func (s *servingCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	crt, key := filepath.Join(s.dir, "tls.crt"), filepath.Join(s.dir, "tls.key")
	if stamp, ok := fileStamp(crt, key); ok && s.dir != "" {
		if stamp == s.stamp && s.loaded != nil {
			return s.loaded, nil
		}
		c, err := tls.LoadX509KeyPair(crt, key)
		if err == nil {
			if s.loaded == nil || stamp != s.stamp {
				klog.Infof("metrics: serving the certificate in %s", s.dir)
			}
			s.loaded, s.stamp = &c, stamp
			return s.loaded, nil
		}
		// Half-written during a renewal: the last good one, else the fallback.
		klog.V(2).Infof("metrics: certificate in %s not usable yet: %v", s.dir, err)
		if s.loaded != nil {
			return s.loaded, nil
		}
	}
	if s.fallback == nil {
		certPEM, keyPEM, err := newServingCert(s.names, time.Now())
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		klog.Infof("metrics: no certificate in %q (service-ca's Secret %s-serving-cert): serving a self-signed one for %v", s.dir, OperatorMetricsService, s.names)
		s.fallback = &c
	}
	return s.fallback, nil
}

// fileStamp identifies the content of the files by size and modification time.
func fileStamp(paths ...string) (string, bool) {
	var stamp string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return "", false
		}
		stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, true
}

// serveSecureMetrics serves reg's /metrics on addr over HTTPS to callers auth allows, each
// connection under the TLS profile policy holds when it is made (followTLSProfile keeps it on
// the cluster's).
func serveSecureMetrics(addr, certDir, namespace string, reg *prometheus.Registry, auth *metricsAuth, policy *tlsPolicy) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", auth.wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	cert := &servingCert{dir: certDir, names: servingCertNames(OperatorMetricsService, namespace)}
	ln, err := net.Listen("tcp", listenAddress(addr))
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	// What every connection shares; the profile adds its minimal version and cipher suites.
	base := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cert.get, NextProtos: []string{"h2", "http/1.1"}}
	srv := &http.Server{
		Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		// A scrape's answer is a few hundred KiB at most; a slow reader is cut off.
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cert.get, GetConfigForClient: policy.configForClient(base)},
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Errorf("metrics endpoint: %v", err)
		}
	}()
	klog.Infof("serving /metrics on https://%s to callers allowed to get /metrics", ln.Addr())
	return srv, nil
}
