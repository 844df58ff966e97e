//go:build integration

package machinesets

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// requestCounter wraps the transport of a client and counts requests as "VERB resource"
// (GET machinesets, LIST machinesets, PATCH machinesets...). before, when set, runs before a
// request goes out: how a test slips a concurrent writer in between our read and our write.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	before func(verb, resource string)
}

func (c *requestCounter) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	verb, resource := classify(req)
	c.mu.Lock()
	hook := c.before
	c.mu.Unlock()
	if hook != nil {
		hook(verb, resource)
	}
	resp, err := next.RoundTrip(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
		// "storage is (re)initializing": the apiserver asks to come back, client-go does. The
		// request did nothing; it is counted apart so that the counts say what was done.
		c.counts["429 "+verb+" "+resource]++
		return resp, err
	}
	c.counts[verb+" "+resource]++
	return resp, err
}

// classify turns /apis/machine.openshift.io/v1beta1/namespaces/x/machinesets[/name] or
// /api/v1/nodes[/name] into a verb (LIST for a GET of a collection) and a resource.
func classify(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) > 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		parts = parts[3:]
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) > 0 {
		resource = parts[0]
	}
	verb = req.Method
	if verb == http.MethodGet && len(parts) == 1 {
		verb = "LIST"
	}
	return verb, resource
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}

func (c *requestCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

// total counts the requests the apiserver served, not those it sent back with 429.
func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		if !strings.HasPrefix(k, "429 ") {
			n += v
		}
	}
	return n
}

func (c *requestCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for k, v := range c.counts {
		parts = append(parts, k+"="+itoa(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustKube(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// countingClient is a machine client whose requests are counted.
func countingClient(t testing.TB, cfg *rest.Config) (machineclient.Interface, *requestCounter) {
	t.Helper()
	mc, _, counter := countingClients(t, cfg)
	return mc, counter
}

// countingClients are a machine and a kube client whose requests are counted together.
func countingClients(t testing.TB, cfg *rest.Config) (machineclient.Interface, kubernetes.Interface, *requestCounter) {
	t.Helper()
	counter := &requestCounter{counts: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200 // as the CLI sets them
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{counter: counter, next: rt}
	}
	mc, err := machineclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mc, kc, counter
}

// countingTransport sends through next and counts in counter (clients have transports of
// their own, the counter is shared).
type countingTransport struct {
	counter *requestCounter
	next    http.RoundTripper
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.counter.roundTrip(c.next, req)
}

func createNamespace(t testing.TB, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	kc := mustKube(t, cfg)
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createCorpus creates testdata/corpus/<file>.yaml under a new name (and role, if not empty),
// stripped of what the server sets, and returns it as stored.
func createCorpus(t testing.TB, ctx context.Context, mc machineclient.Interface, file, name, role string) *machinev1beta1.MachineSet {
	t.Helper()
	ms := loadMachineSet(t, "testdata/corpus/"+file+".yaml")
	old := ms.Name
	ms.Name = name
	ms.ResourceVersion, ms.UID, ms.CreationTimestamp, ms.Generation = "", "", metav1.Time{}, 0
	ms.Status = machinev1beta1.MachineSetStatus{}
	relabel := func(l map[string]string) {
		for k, v := range l {
			if v == old {
				l[k] = name
			}
			if role != "" && (k == RoleLabel || k == TypeLabel) {
				l[k] = role
			}
		}
	}
	relabel(ms.Labels)
	relabel(ms.Spec.Selector.MatchLabels)
	relabel(ms.Spec.Template.Labels)
	created, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, ms, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s from %s: %v", name, file, err)
	}
	return created
}
