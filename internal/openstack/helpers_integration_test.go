//go:build integration

package openstack

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// counter is a RoundTripper that counts requests by method and path pattern (IDs replaced by
// {id}), and remembers every token Keystone hands out, for the secrets tests.
type counter struct {
	next http.RoundTripper

	mu     sync.Mutex
	counts map[string]int
	times  map[string]time.Duration
	total  int
	tokens []string
}

var idSegment = regexp.MustCompile(`^([0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// pattern replaces the ID segments of a URL path by {id}.
func pattern(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if idSegment.MatchString(p) {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Method + " " + pattern(req.URL.Path)
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[key]++
	c.total++
	c.mu.Unlock()
	start := time.Now()
	resp, err := c.next.RoundTrip(req)
	c.mu.Lock()
	if c.times == nil {
		c.times = map[string]time.Duration{}
	}
	c.times[key] += time.Since(start)
	c.mu.Unlock()
	if err == nil {
		if tok := resp.Header.Get("X-Subject-Token"); tok != "" {
			c.mu.Lock()
			c.tokens = append(c.tokens, tok)
			c.mu.Unlock()
		}
	}
	return resp, err
}

func (c *counter) wrap(next http.RoundTripper) http.RoundTripper { c.next = next; return c }

// auths is the number of token requests.
func (c *counter) auths() int { return c.get("POST /v3/auth/tokens") }

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

func (c *counter) snapshot() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.counts))
	for k := range c.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("  ")
		b.WriteString(k)
		b.WriteString(" x")
		b.WriteString(strconv.Itoa(c.counts[k]))
		b.WriteString(" (" + c.times[k].Round(time.Millisecond).String() + " until the answer's headers)\n")
	}
	return c.total, b.String()
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
	c.times = map[string]time.Duration{}
	c.total = 0
}

// connect authenticates to a cloud of the loopback OpenStack with a request counter.
func connect(t testing.TB, cloud *testenv.Cloud, name string, mod ...func(*Config)) (*Client, *counter) {
	t.Helper()
	cnt := &counter{}
	cfg := Config{Cloud: name, CloudsFile: cloud.CloudsFile, Timeout: 60 * time.Second, WrapTransport: cnt.wrap}
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting as %s: %v", name, err)
	}
	return c, cnt
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
