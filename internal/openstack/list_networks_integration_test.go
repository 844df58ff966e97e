//go:build integration

package openstack

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// ListNetworks on the seed: every network, the storage network marked by its export locations
// (high), the tenant and decoy networks not marked.
func TestListNetworksOfTheSeed(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, _ := connect(t, cloud, testenv.CloudDemo)
	list, err := c.ListNetworks(testContext(t, 2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if list.Unmarked != nil {
		t.Errorf("Unmarked = %v with Manila in the catalog", list.Unmarked)
	}
	byName := map[string]ListedNetwork{}
	for _, n := range list.Networks {
		byName[n.Name] = n
	}
	for _, name := range []string{"tenant", "storage", "decoy"} {
		if byName[name].ID != cloud.Seed.Networks[name] {
			t.Errorf("network %s = %+v, want ID %s", name, byName[name].Network, cloud.Seed.Networks[name])
		}
	}
	if m := byName["storage"].Manila; m == nil || m.Confidence != ConfidenceHigh || m.Network.ID != cloud.Seed.Networks["storage"] || m.Shares == 0 || len(m.Reasons) == 0 {
		t.Errorf("storage network's mark: %+v", m)
	}
	for _, name := range []string{"tenant", "decoy"} {
		if m := byName[name].Manila; m != nil {
			t.Errorf("network %s marked: %+v", name, m)
		}
	}
}

// Without Manila in the catalog, ListNetworks lists Neutron's networks unmarked and says why.
func TestListNetworksWithoutManila(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, _ := connect(t, cloud, testenv.CloudDemo, func(cfg *Config) {
		next := cfg.WrapTransport
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			if next != nil {
				rt = next(rt)
			}
			return withoutCatalogEntry(t, rt, "sharev2")
		}
	})
	list, err := c.ListNetworks(testContext(t, 2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if KindOf(list.Unmarked) != KindNoEndpoint {
		t.Errorf("Unmarked = %v (kind %v), want the missing endpoint", list.Unmarked, KindOf(list.Unmarked))
	}
	if len(list.Networks) < 3 {
		t.Errorf("%d networks, want the seed's", len(list.Networks))
	}
	for _, n := range list.Networks {
		if n.Manila != nil {
			t.Errorf("network %s marked without Manila: %+v", n.Name, n.Manila)
		}
	}
}

// withoutCatalogEntry drops the services of type typ from the catalog of Keystone's tokens.
func withoutCatalogEntry(t *testing.T, next http.RoundTripper, typ string) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil || req.Method != http.MethodPost || !bytes.HasSuffix([]byte(req.URL.Path), []byte("/auth/tokens")) {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Errorf("token response: %v", err)
			return nil, err
		}
		if token, ok := doc["token"].(map[string]any); ok {
			if catalog, ok := token["catalog"].([]any); ok {
				kept := []any{}
				for _, s := range catalog {
					if m, ok := s.(map[string]any); !ok || m["type"] != typ {
						kept = append(kept, s)
					}
				}
				token["catalog"] = kept
			}
		}
		if body, err = json.Marshal(doc); err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return resp, nil
	})
}
