//go:build integration

package clusterapi

import (
	"net/http"
	"strings"
	"sync"
)

// requests counts every request by verb and resource ("LIST machinesets", "POST ...").
type requests struct {
	mu     sync.Mutex
	counts map[string]int
	// beforePatch, when set, runs before the first PATCH of an object so named (to make it
	// conflict).
	beforePatch map[string]func()
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		verb, resource := req.Method, parts[len(parts)-1]
		// .../namespaces/NS/RESOURCE is a LIST or a CREATE; .../namespaces/NS/RESOURCE/NAME the rest.
		switch {
		case len(parts) >= 3 && parts[len(parts)-3] == "namespaces":
			if verb == http.MethodGet {
				verb = "LIST"
			}
		case len(parts) >= 2:
			resource = parts[len(parts)-2]
		}
		r.mu.Lock()
		r.counts[verb+" "+resource]++
		hook := r.beforePatch[parts[len(parts)-1]]
		if verb == http.MethodPatch {
			delete(r.beforePatch, parts[len(parts)-1])
		} else {
			hook = nil
		}
		r.mu.Unlock()
		if hook != nil {
			hook()
		}
		return rt.RoundTrip(req)
	})
}

func (r *requests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts
	r.counts = map[string]int{}
	return c
}

// takeWrites is take without the reads.
func (r *requests) takeWrites() map[string]int {
	c := r.take()
	for k := range c {
		if strings.HasPrefix(k, "LIST ") || strings.HasPrefix(k, "GET ") {
			delete(c, k)
		}
	}
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func total(c map[string]int) int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}
