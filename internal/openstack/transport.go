package openstack

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// newHTTPClient builds the one HTTP client of a Client: proxies from HTTP(S)_PROXY/NO_PROXY,
// the TLS settings of clouds.yaml, every phase bounded by timeout, and optional request logging.
func newHTTPClient(cfg Config, tlsConfig *tls.Config, timeout time.Duration, redact func(string) string) *http.Client {
	dialTimeout := min(timeout, 30*time.Second)
	var rt http.RoundTripper = &http.Transport{
		Proxy:                 proxyFunc(),
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	if cfg.Logf != nil {
		rt = &loggingTransport{next: rt, logf: cfg.Logf, headers: cfg.LogHeaders, redact: redact}
	}
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	// The client timeout also bounds reading the body, which ResponseHeaderTimeout does not.
	return &http.Client{Transport: rt, Timeout: timeout}
}

// proxyFunc reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY (and their lower-case forms) when the
// client is made, unlike http.ProxyFromEnvironment, which reads them once per process.
// Loopback addresses never go through a proxy.
func proxyFunc() func(*http.Request) (*url.URL, error) {
	fn := httpproxy.FromEnvironment().ProxyFunc()
	return func(req *http.Request) (*url.URL, error) { return fn(req.URL) }
}

// secretHeaders are never logged with their value.
var secretHeaders = map[string]bool{
	"X-Auth-Token": true, "X-Subject-Token": true, "X-Service-Token": true,
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true,
}

// loggingTransport writes one line per request. Bodies are never logged: the authentication
// request carries the password or application-credential secret.
type loggingTransport struct {
	next    http.RoundTripper
	logf    func(format string, args ...any)
	headers bool
	redact  func(string) string
}

func (t *loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	if t.headers {
		t.logf("> %s %s%s", req.Method, t.redact(req.URL.String()), formatHeaders(req.Header, t.redact))
	}
	resp, err := t.next.RoundTrip(req)
	elapsed := time.Since(start).Round(time.Millisecond)
	if err != nil {
		t.logf("%s %s: failed after %s", req.Method, t.redact(req.URL.String()), elapsed)
		return resp, err
	}
	reqID := coalesce(resp.Header.Get("X-Openstack-Request-Id"), resp.Header.Get("X-Compute-Request-Id"))
	if reqID != "" {
		reqID = " " + reqID
	}
	t.logf("%s %s: %s in %s%s", req.Method, t.redact(req.URL.String()), resp.Status, elapsed, reqID)
	if t.headers {
		t.logf("< %s%s", resp.Status, formatHeaders(resp.Header, t.redact))
	}
	return resp, nil
}

func formatHeaders(h http.Header, redact func(string) string) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := strings.Join(h[k], ", ")
		if secretHeaders[http.CanonicalHeaderKey(k)] {
			v = fmt.Sprintf("<redacted, %d characters>", len(v))
		}
		fmt.Fprintf(&b, "\n    %s: %s", k, redact(v))
	}
	return b.String()
}
