//go:build integration

package openstack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/regions"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// cloudsYAML writes a clouds.yaml with one cloud "fault" and returns its path.
func cloudsYAML(t *testing.T, cloud map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"clouds": map[string]any{"fault": cloud}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func passwordCloud(authURL, password string) map[string]any {
	return map[string]any{
		"auth": map[string]any{"auth_url": authURL, "username": "demo", "password": password, "project_name": "demo",
			"user_domain_name": "Default", "project_domain_name": "Default"},
		"region_name": "RegionOne", "interface": "public", "identity_api_version": 3,
	}
}

// fault runs Connect (and then fn, if given) against a clouds.yaml and returns the error and
// how long it took.
func fault(t *testing.T, path string, cfg Config, fn func(*Client) error) (time.Duration, error) {
	t.Helper()
	cfg.Cloud, cfg.CloudsFile = "fault", path
	start := time.Now()
	c, err := Connect(testContext(t, time.Minute), cfg)
	if err == nil && fn != nil {
		err = fn(c)
	}
	return time.Since(start), err
}

func expectFault(t *testing.T, err error, took, bound time.Duration, kind Kind, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error (after %s)", took)
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	if KindOf(err) != kind {
		t.Errorf("kind %v, want %v", KindOf(err), kind)
	}
	if took > bound {
		t.Errorf("took %s, want at most %s", took, bound)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error lacks %q", p)
		}
	}
}

func TestFaultKeystoneStopped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	path := cloudsYAML(t, passwordCloud("http://"+addr+"/v3", "whatever-secret-1"))
	took, err := fault(t, path, Config{}, nil)
	expectFault(t, err, took, 5*time.Second, KindUnreachable,
		`authenticating to cloud "fault": nothing is listening at `+addr+" (connection refused)", "Is Keystone running")
}

func TestFaultSilentListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // accept and never answer
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	path := cloudsYAML(t, passwordCloud("http://"+l.Addr().String()+"/v3", "whatever-secret-2"))

	t.Run("request timeout", func(t *testing.T) {
		took, err := fault(t, path, Config{Timeout: 2 * time.Second}, nil)
		expectFault(t, err, took, 6*time.Second, KindTimeout,
			"Keystone at http://"+l.Addr().String()+" did not answer within 2s", "raise the timeout")
		if took < 2*time.Second {
			t.Errorf("gave up after %s, before the 2s timeout", took)
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx := testContext(t, time.Second)
		start := time.Now()
		_, err := Connect(ctx, Config{Cloud: "fault", CloudsFile: path, Timeout: time.Minute})
		expectFault(t, err, time.Since(start), 4*time.Second, KindTimeout, "did not answer before the operation's deadline")
	})
}

func TestFaultWrongPassword(t *testing.T) {
	cloud := testenv.NewCloud(t)
	const wrong = "Wr0ng-Passw0rd-7d1f"
	path := cloudsYAML(t, passwordCloud(cloud.Seed.KeystoneURL, wrong))
	took, err := fault(t, path, Config{}, nil)
	expectFault(t, err, took, 30*time.Second, KindUnauthorized,
		`Keystone at http://127.0.0.1:`, `rejected the credentials of cloud "fault" (user "demo", project "demo")`, "Check the user name, password")
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("the password appears in the error")
	}

	t.Run("application credential", func(t *testing.T) {
		const secret = "not-the-secret-5c9e2a"
		id := appCredID(t, cloud)
		path := cloudsYAML(t, map[string]any{
			"auth_type": "v3applicationcredential",
			"auth":      map[string]any{"auth_url": cloud.Seed.KeystoneURL, "application_credential_id": id, "application_credential_secret": secret},
		})
		took, err := fault(t, path, Config{}, nil)
		expectFault(t, err, took, 30*time.Second, KindUnauthorized, "rejected the credentials", "application credential "+id, "application_credential_secret")
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the secret appears in the error")
		}
	})
}

// TestFaultManilaNotInCatalog uses a region of its own that has identity and network endpoints
// but no Manila: the shared region stays as it is.
func TestFaultManilaNotInCatalog(t *testing.T) {
	cloud := testenv.NewCloud(t)
	admin, _ := connect(t, cloud, testenv.CloudAdmin)
	ctx := testContext(t, 2*time.Minute)
	identity := &gophercloud.ServiceClient{ProviderClient: admin.provider, Endpoint: gophercloud.NormalizeURL(cloud.Seed.KeystoneURL)}
	region := fmt.Sprintf("ms-no-manila-%d", time.Now().UnixNano()%1_000_000)
	if _, err := regions.Create(ctx, identity, regions.CreateOpts{ID: region, Description: "manila-setup test: a region without Manila"}).Extract(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := testContext(t, time.Minute)
		if err := regions.Delete(ctx, identity, region).ExtractErr(); err != nil {
			t.Errorf("deleting region %s: %v", region, err)
		}
	})
	for _, typ := range []string{"identity", "network"} {
		pages, err := services.List(identity, services.ListOpts{ServiceType: typ}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		svcs, _ := services.ExtractServices(pages)
		if len(svcs) == 0 {
			t.Fatalf("no %s service in the catalog", typ)
		}
		url := cloud.Seed.KeystoneURL
		if typ == "network" {
			url = strings.Replace(cloud.Seed.KeystoneURL, "15000/v3", "19696", 1)
			if raw, err := os.ReadFile(filepath.Join(testenv.OpenStackDir(), "seed.json")); err == nil {
				var s struct {
					NeutronURL string `json:"neutron_url"`
				}
				if yaml.Unmarshal(raw, &s) == nil && s.NeutronURL != "" {
					url = s.NeutronURL
				}
			}
		}
		ep, err := endpoints.Create(ctx, identity, endpoints.CreateOpts{Availability: gophercloud.AvailabilityPublic, ServiceID: svcs[0].ID, URL: url, Region: region}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := endpoints.Delete(testContext(t, time.Minute), identity, ep.ID).ExtractErr(); err != nil {
				t.Errorf("deleting endpoint %s: %v", ep.ID, err)
			}
		})
	}

	c, _ := connect(t, cloud, testenv.CloudDemo, func(cfg *Config) { cfg.Region = region })
	if c.ManilaAvailable() {
		t.Fatal("Manila available in a region without it")
	}
	start := time.Now()
	_, err := c.Discover(ctx, DiscoverOptions{})
	expectFault(t, err, time.Since(start), time.Second, KindNoEndpoint,
		"Manila is not available in region "+region, `has no "sharev2" endpoint with interface public there`)
	if nets, err := c.Networks(ctx); err != nil || len(nets) < 3 {
		t.Errorf("Neutron in the region: %d networks, %v", len(nets), err)
	}
}

func TestFaultTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error": {"code": 401, "title": "Unauthorized"}}`)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes that fail are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	authURL := srv.URL + "/v3"
	dir := t.TempDir()
	serverCA := filepath.Join(dir, "server-ca.pem")
	writePEM(t, serverCA, srv.Certificate().Raw)
	otherCA := filepath.Join(dir, "other-ca.pem")
	writePEM(t, otherCA, selfSignedCA(t))

	t.Run("system trust store", func(t *testing.T) {
		took, err := fault(t, cloudsYAML(t, passwordCloud(authURL, "tls-secret-1")), Config{}, nil)
		expectFault(t, err, took, 5*time.Second, KindTLS, "TLS certificate of Keystone at "+srv.URL, "this machine's trust store does not contain", "--ca-bundle")
	})
	t.Run("wrong cacert", func(t *testing.T) {
		cloud := passwordCloud(authURL, "tls-secret-2")
		cloud["cacert"] = otherCA
		took, err := fault(t, cloudsYAML(t, cloud), Config{}, nil)
		expectFault(t, err, took, 5*time.Second, KindTLS, "the CA bundle "+otherCA+" (cacert in clouds.yaml) does not contain")
	})
	t.Run("ca-bundle overrides cacert", func(t *testing.T) {
		cloud := passwordCloud(authURL, "tls-secret-3")
		cloud["cacert"] = otherCA
		took, err := fault(t, cloudsYAML(t, cloud), Config{CABundle: serverCA}, nil)
		// The handshake succeeds; the fake Keystone then rejects the password.
		expectFault(t, err, took, 5*time.Second, KindUnauthorized, "rejected the credentials")
	})
	t.Run("CA given as bytes", func(t *testing.T) {
		pemBytes, _ := os.ReadFile(serverCA)
		took, err := fault(t, cloudsYAML(t, passwordCloud(authURL, "tls-secret-4")), Config{CABundlePEM: pemBytes}, nil)
		expectFault(t, err, took, 5*time.Second, KindUnauthorized, "rejected the credentials")
	})
	t.Run("verify false warns", func(t *testing.T) {
		cloud := passwordCloud(authURL, "tls-secret-5")
		cloud["verify"] = false
		var warnings []string
		took, err := fault(t, cloudsYAML(t, cloud), Config{Warnf: func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }}, nil)
		expectFault(t, err, took, 5*time.Second, KindUnauthorized, "rejected the credentials")
		if len(warnings) != 1 || !strings.Contains(warnings[0], "TLS certificate verification is off") {
			t.Errorf("warnings %q", warnings)
		}
	})
	t.Run("plain HTTP server behind https", func(t *testing.T) {
		plain := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(plain.Close)
		url := strings.Replace(plain.URL, "http://", "https://", 1) + "/v3"
		took, err := fault(t, cloudsYAML(t, passwordCloud(url, "tls-secret-6")), Config{}, nil)
		expectFault(t, err, took, 5*time.Second, KindTLS, "does not speak TLS")
	})
}

func writePEM(t *testing.T, path string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "some other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestFaultForbiddenShareNetworks: a cloud whose policy refuses share networks (answered here by
// a RoundTripper, since the shared cloud's policy must stay as it is) still gets an answer from
// the exports, with a note; and the error of a direct call says it is the policy.
func TestFaultForbiddenShareNetworks(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, _ := connect(t, cloud, testenv.CloudDemo, func(cfg *Config) {
		inner := cfg.WrapTransport
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return inner(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if strings.Contains(req.URL.Path, "/share-networks") {
					return &http.Response{StatusCode: 403, Status: "403 Forbidden", Header: http.Header{"Content-Type": {"application/json"}},
						Body: io.NopCloser(strings.NewReader(`{"forbidden": {"code": 403}}`)), Request: req}, nil
				}
				return rt.RoundTrip(req)
			}))
		}
	})
	ctx := testContext(t, time.Minute)
	_, err := c.ShareNetworks(ctx)
	expectFault(t, err, 0, time.Second, KindForbidden, "listing share networks: Manila refused it (403 Forbidden): the policy of this cloud does not allow user \"demo\", project \"demo\"")
	d, err := c.Discover(ctx, DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Best() == nil || d.Best().Network.Name != "storage" || len(d.Notes) == 0 || !strings.Contains(d.Notes[0], "share networks are not visible") {
		t.Errorf("discovery without share networks: best %+v, notes %q", d.Best(), d.Notes)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// appCredID is the ID of the seeded application credential, from clouds.yaml.
func appCredID(t *testing.T, cloud *testenv.Cloud) string {
	t.Helper()
	raw, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Clouds map[string]struct {
			Auth struct {
				ID string `json:"application_credential_id"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil || doc.Clouds[testenv.CloudAppCred].Auth.ID == "" {
		t.Fatalf("no application credential in %s: %v", cloud.CloudsFile, err)
	}
	return doc.Clouds[testenv.CloudAppCred].Auth.ID
}

// TestProxyFromEnvironment: requests go through HTTP_PROXY, except for hosts in NO_PROXY.
func TestProxyFromEnvironment(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error": {"code": 401}}`)
	}))
	t.Cleanup(proxy.Close)
	path := cloudsYAML(t, passwordCloud("http://keystone.example.invalid:5000/v3", "proxy-secret-1"))
	for _, env := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(env, "")
	}

	t.Setenv("HTTP_PROXY", proxy.URL)
	took, err := fault(t, path, Config{}, nil)
	expectFault(t, err, took, 5*time.Second, KindUnauthorized, "Keystone at http://keystone.example.invalid:5000 rejected the credentials")
	if len(seen) != 1 || seen[0] != "POST http://keystone.example.invalid:5000/v3/auth/tokens" {
		t.Errorf("the proxy saw %q", seen)
	}

	t.Setenv("NO_PROXY", ".example.invalid")
	took, err = fault(t, path, Config{}, nil)
	expectFault(t, err, took, 10*time.Second, KindUnreachable, `the host name "keystone.example.invalid" of Keystone cannot be resolved`)
	if len(seen) != 1 {
		t.Errorf("NO_PROXY not honoured: the proxy saw %q", seen)
	}
}
