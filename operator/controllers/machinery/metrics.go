package machinery

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// KubeRequests counts the operator's Kubernetes API requests by client ("operator" or
// "leader-election"), verb (get is a direct GET of one object, list, watch, create, update,
// patch, delete) and HTTP code: what the performance targets are about (no direct GETs, no
// writes beyond lease renewals, no 409 conflicts).
var KubeRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "manila_operator_kube_requests_total",
	Help: "Kubernetes API requests made by the operator, by client, verb and HTTP code.",
}, []string{"client", "verb", "code"})

// CountRequests wraps a transport of the given client so that its requests count in
// KubeRequests.
func CountRequests(client string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return kubeCounter{client: client, next: rt}
	}
}

type kubeCounter struct {
	client string
	next   http.RoundTripper
}

func (k kubeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := k.next.RoundTrip(r)
	code := "error"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	KubeRequests.WithLabelValues(k.client, kubeVerb(r), code).Inc()
	return resp, err
}

func kubeVerb(r *http.Request) string {
	switch r.Method {
	case http.MethodGet:
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			return "watch"
		case isCollectionPath(r.URL.Path):
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(r.Method)
}

// isCollectionPath tells /api/v1/namespaces/x/secrets (a list) from /api/v1/namespaces/x/secrets/y.
func isCollectionPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	n := len(parts)
	if n == 0 {
		return false
	}
	if parts[0] == "api" {
		return n == 3 || (n == 5 && parts[2] == "namespaces")
	}
	if parts[0] == "apis" {
		return n == 4 || (n == 6 && parts[3] == "namespaces")
	}
	return false
}
