//go:build integration

package controllers

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// oneShareTypeManila is a Manila with one share type that discovers no storage network: all
// these tests need of OpenStack is that the operator installs the driver.
type oneShareTypeManila struct{}

func (oneShareTypeManila) Detect(context.Context) error { return nil }
func (oneShareTypeManila) ShareTypes(context.Context) ([]operator.ShareType, error) {
	return []operator.ShareType{{ID: "4b9e2f1c-8d3a-4c5e-9f6a-1b2c3d4e5f60", Name: "default"}}, nil
}
func (oneShareTypeManila) ShareNetworks(context.Context) ([]ShareNetwork, error) { return nil, nil }
func (oneShareTypeManila) Discover(context.Context) (*openstack.Ranking, error) {
	return nil, errors.New("no discovery in this test")
}
func (oneShareTypeManila) SharesWithRulesNotActive(context.Context) (map[string]string, error) {
	return map[string]string{}, nil
}

// followTLSProfileAs runs followTLSProfile with cfg's identity until the test ends, and returns
// once the policy holds a profile.
func followTLSProfileAs(t *testing.T, ctx context.Context, cfg *rest.Config) *tlsPolicy {
	t.Helper()
	clients, err := machinery.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	p := newTLSPolicy()
	followTLSProfile(ctx, clients, p)
	deadline := time.Now().Add(tlsProfileWait + 10*time.Second)
	for p.cur.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the metrics endpoint's TLS profile was never set")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// tlsEndpoint is a TLS server under test: the operator's /metrics, or a real kube-rbac-proxy.
type tlsEndpoint struct {
	addr, name string
	pool       *x509.CertPool
}

// handshake dials e with client (its trust and name filled in) and makes a GET of /metrics
// without a token, which both servers answer 401 once the handshake succeeded. It returns the
// version negotiated.
func (e tlsEndpoint) handshake(client *tls.Config) (uint16, error) {
	c := client.Clone()
	c.RootCAs, c.ServerName = e.pool, e.name
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.addr, c)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", e.name); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return 0, fmt.Errorf("GET /metrics without a token: %s, want 401", resp.Status)
	}
	return conn.ConnectionState().Version, nil
}

// expect checks, within a few seconds (the endpoint follows the profile of the moment), that
// each client handshakes with e or is refused as ok says.
func (e tlsEndpoint) expect(t *testing.T, what string, clients map[string]*tls.Config, ok map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var wrong []string
		for name, c := range clients {
			v, err := e.handshake(c)
			if ok[name] != (err == nil) {
				wrong = append(wrong, fmt.Sprintf("%s: version %x, %v", name, v, err))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, strings.Join(wrong, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Clients by what they offer, and which of them each profile lets in (the servers' keys are
// ECDSA).
var (
	profileClients = map[string]*tls.Config{
		"TLS 1.2":             {MaxVersion: tls.VersionTLS12},
		"TLS 1.3":             {MinVersion: tls.VersionTLS13},
		"TLS 1.2 CBC":         {MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}},
		"TLS 1.2 AES-128-GCM": {MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
		"TLS 1.2 AES-256-GCM": {MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}},
	}
	intermediateOK  = map[string]bool{"TLS 1.2": true, "TLS 1.3": true, "TLS 1.2 AES-128-GCM": true, "TLS 1.2 AES-256-GCM": true}
	modernOK        = map[string]bool{"TLS 1.3": true}
	oldOK           = map[string]bool{"TLS 1.2": true, "TLS 1.3": true, "TLS 1.2 CBC": true, "TLS 1.2 AES-128-GCM": true, "TLS 1.2 AES-256-GCM": true}
	customAES256GCM = map[string]bool{"TLS 1.2": true, "TLS 1.3": true, "TLS 1.2 AES-256-GCM": true}
)

// serveMetricsUnderProfile serves the operator's /metrics as Start does, its TLS profile
// followed with cfg's identity, until the test ends.
func serveMetricsUnderProfile(t *testing.T, ctx context.Context, h *harness, cfg *rest.Config) tlsEndpoint {
	t.Helper()
	names := servingCertNames(OperatorMetricsService, testNS)
	dir := t.TempDir()
	crt, key, err := newServingCert(names, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := metricsRegistry()
	reg.MustRegister(conditionCollector{self: h.op.self})
	srv, err := serveSecureMetrics("127.0.0.1:0", dir, testNS, reg, newMetricsAuth(dynamic.NewForConfigOrDie(cfg)), followTLSProfileAs(t, ctx, cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	return tlsEndpoint{addr: srv.Addr, name: names[0], pool: pool}
}

// proxyTLSArgs are the TLS flags of the controller Deployment's kube-rbac-proxy sidecars, the
// same for all three or an error.
func proxyTLSArgs(d *appsv1.Deployment) ([]string, error) {
	var first []string
	n := 0
	for _, c := range d.Spec.Template.Spec.Containers {
		if !strings.HasSuffix(c.Name, "-kube-rbac-proxy") {
			continue
		}
		var got []string
		for _, a := range c.Args {
			if tlsprofile.IsKubeRBACProxyFlag(a) {
				got = append(got, a)
			}
		}
		if n > 0 && !slices.Equal(got, first) {
			return nil, fmt.Errorf("container %s has %v, another %v", c.Name, got, first)
		}
		first = got
		n++
	}
	if n != 3 {
		return nil, fmt.Errorf("%d kube-rbac-proxy containers, want 3", n)
	}
	return first, nil
}

// TestTLSSecurityProfile: the operator, running as its ServiceAccount (RBAC as rendered) on a
// real apiserver, renders the cluster's TLS security profile into the controller Deployment's
// kube-rbac-proxy flags and serves its own /metrics under it. Without the APIServer API, and
// with an APIServer that names no profile, that is Intermediate (TLS 1.2 and up, the
// Deployment unchanged by the APIServer's arrival); Modern, Old and Custom profiles reach the
// Deployment within seconds of their change and the next connection to /metrics; a profile
// that cannot be applied is Intermediate, with a Warning Event that says why. A real
// kube-rbac-proxy started with the rendered flags refuses and accepts the same clients.
func TestTLSSecurityProfile(t *testing.T) {
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, kube: api.Client, dyn: dynamic.NewForConfigOrDie(api.Config), logs: &testenv.SyncBuffer{}}
	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	creds := []byte("clouds:\n  openstack:\n    auth:\n      auth_url: http://keystone.example.test:5000/v3\n      username: demo\n      password: not-used\n" +
		"      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n")
	if _, err := deploy.Install(ctx, api.Config, rendered, testNS, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: creds}}); err != nil {
		t.Fatal(err)
	}
	saCfg, err := api.UserConfig("system:serviceaccount:"+testNS+":"+operator.OperatorName, "system:serviceaccounts", "system:serviceaccounts:"+testNS, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	klog.LogToStderr(false)
	klog.SetOutput(h.logs)
	defer func() { klog.SetOutput(os.Stderr); klog.LogToStderr(true) }()
	cfg := Config{Namespace: testNS, Images: testImages, Resync: 2 * time.Second, MachineNetworks: []string{"10.0.0.0/16"}, Version: "test",
		NewManilaSource: func(*operator.Credentials, time.Duration) (ManilaSource, error) { return oneShareTypeManila{}, nil }}
	deployment := func() (*appsv1.Deployment, error) {
		return api.Client.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
	}
	argsAre := func(want []string) func() (bool, string) {
		return func() (bool, string) {
			d, err := deployment()
			if err != nil {
				return false, err.Error()
			}
			got, err := proxyTLSArgs(d)
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(got, want), fmt.Sprintf("generation %d: %v", d.Generation, got)
		}
	}
	resolve := func(p *configv1.TLSSecurityProfile) tlsprofile.Profile {
		r, err := tlsprofile.Resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	intermediate := tlsprofile.Intermediate().KubeRBACProxyArgs()

	// No config.openshift.io APIServer at all (its CRD is not installed, as on plain Kubernetes).
	stop := h.start(saCfg, cfg)
	h.eventually("the controller Deployment, under Intermediate", settle, argsAre(intermediate))
	metrics := serveMetricsUnderProfile(t, ctx, h, saCfg)
	metrics.expect(t, "/metrics without an APIServer", profileClients, intermediateOK)
	before, err := deployment()
	if err != nil {
		t.Fatal(err)
	}
	stop()

	// The APIServer API arrives, with the object "cluster" as OpenShift keeps it without a
	// profile: still Intermediate, and the restarted operator leaves the Deployment as it was.
	paths, err := testenv.OpenShiftCRDPaths()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(filepath.Dir(paths[slices.IndexFunc(paths, func(p string) bool { return strings.Contains(p, "_infrastructures-") })]),
		"0000_10_config-operator_01_apiservers-Default.crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Install(ctx, api.Config, crd, testNS, deploy.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	cc := configclient.NewForConfigOrDie(api.Config)
	h.eventually("the APIServer API served", 30*time.Second, func() (bool, string) {
		_, err := cc.ConfigV1().APIServers().List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if _, err := cc.ConfigV1().APIServers().Create(ctx, &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer h.start(saCfg, cfg)()
	metrics = serveMetricsUnderProfile(t, ctx, h, saCfg)
	h.waitSyncs(3, workloadControllerService.prefix+"Controller")
	if ok, msg := argsAre(intermediate)(); !ok {
		t.Fatalf("APIServer without a profile: %s", msg)
	}
	if d, err := deployment(); err != nil || d.Generation != before.Generation {
		t.Errorf("the APIServer without a profile changed the Deployment: generation %d -> %v (%v)", before.Generation, d.Generation, err)
	}
	metrics.expect(t, "/metrics, APIServer without a profile", profileClients, intermediateOK)

	setProfile := func(p *configv1.TLSSecurityProfile) {
		t.Helper()
		a, err := cc.ConfigV1().APIServers().Get(ctx, "cluster", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a.Spec.TLSSecurityProfile = p
		if _, err := cc.ConfigV1().APIServers().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newRealKubeRBACProxy(t, ctx, api)

	// Modern: TLS 1.3 only, no cipher flag.
	modern := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}}
	setProfile(modern)
	took := h.eventually("Modern in the kube-rbac-proxy flags", 15*time.Second, argsAre([]string{"--tls-min-version=VersionTLS13"}))
	t.Logf("Modern reached the Deployment %s after the APIServer changed", took.Round(time.Millisecond))
	metrics.expect(t, "/metrics under Modern", profileClients, modernOK)
	proxy.expect(t, "Modern", profileClients, modernOK)

	// Old: TLS 1.0 and up, with its CBC suites.
	old := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType, Old: &configv1.OldTLSProfile{}}
	setProfile(old)
	h.eventually("Old in the kube-rbac-proxy flags", 15*time.Second, argsAre(resolve(old).KubeRBACProxyArgs()))
	metrics.expect(t, "/metrics under Old", profileClients, oldOK)
	proxy.expect(t, "Old", profileClients, oldOK)

	// Custom, with one suite of TLS 1.2 (and one Go does not implement, left out), without the
	// one HTTP/2 requires: kube-rbac-proxy would not start without --http2-disable.
	custom := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{
		MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"ECDHE-ECDSA-AES256-GCM-SHA384", "DHE-RSA-AES256-GCM-SHA384"}}}}
	setProfile(custom)
	h.eventually("Custom in the kube-rbac-proxy flags", 15*time.Second, argsAre([]string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "--http2-disable"}))
	metrics.expect(t, "/metrics under Custom", profileClients, customAES256GCM)
	proxy.expect(t, "Custom", profileClients, customAES256GCM)

	// A Custom profile the API takes but no Go server can apply (its TLS 1.2 suites are all DHE,
	// which Go does not implement): Intermediate, and a Warning that says why.
	invalid := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{
		MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384"}}}}
	setProfile(invalid)
	h.eventually("Intermediate for a Custom profile of DHE suites", 15*time.Second, argsAre(intermediate))
	metrics.expect(t, "/metrics under an invalid profile", profileClients, intermediateOK)
	h.eventually("the Warning Event "+TLSProfileInvalidReason, 15*time.Second, func() (bool, string) {
		evs, err := api.Client.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + TLSProfileInvalidReason})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == "Warning" && strings.Contains(e.Message, "spec.tlsSecurityProfile.custom.ciphers: Invalid value") {
				t.Logf("Event: %s", e.Message)
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events", len(evs.Items))
	})
	if logs := h.logs.String(); !strings.Contains(logs, "metrics: the APIServer cluster's TLS security profile cannot be applied: spec.tlsSecurityProfile.custom.ciphers") {
		t.Errorf("the metrics endpoint did not log why the profile cannot be applied:\n%s", tail(logs, 20))
	}

	// Modern again, then the APIServer deleted: Intermediate.
	setProfile(modern)
	h.eventually("Modern again", 15*time.Second, argsAre([]string{"--tls-min-version=VersionTLS13"}))
	metrics.expect(t, "/metrics under Modern again", profileClients, modernOK)
	if err := cc.ConfigV1().APIServers().Delete(ctx, "cluster", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy.close()
	h.eventually("Intermediate once the APIServer is deleted", 15*time.Second, argsAre(intermediate))
	metrics.expect(t, "/metrics after the APIServer was deleted", profileClients, intermediateOK)
}

// realKubeRBACProxy runs the kube-rbac-proxy binary the tests build (test/env/node/operands.sh)
// with the TLS flags of the controller Deployment's sidecars as they are at each expect.
type realKubeRBACProxy struct {
	bin, kubeconfig, dir, upstream string
	api                            *testenv.APIServer
	ctx                            context.Context
	cmd                            *exec.Cmd
	pool                           *x509.CertPool
	name                           string
}

func newRealKubeRBACProxy(t *testing.T, ctx context.Context, api *testenv.APIServer) *realKubeRBACProxy {
	t.Helper()
	bins, err := testenv.BuiltFolder(ctx, "MANILA_SETUP_OPERAND_BIN", "test/env/node/operands.sh", "kube-rbac-proxy")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc, err := api.KubeconfigFor(dir, "kube-rbac-proxy", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics\n") }))
	t.Cleanup(upstream.Close)
	names := servingCertNames(metricsServiceName, testNS)
	crt, key, err := newServingCert(names, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	p := &realKubeRBACProxy{bin: filepath.Join(bins, "kube-rbac-proxy"), kubeconfig: kc, dir: dir, upstream: upstream.URL + "/", api: api, ctx: ctx, pool: pool, name: names[0]}
	t.Cleanup(p.close)
	return p
}

func (p *realKubeRBACProxy) close() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// expect (re)starts the proxy with the flags of the provisioner's sidecar, its addresses and
// files replaced by the test's, and checks the clients against it.
func (p *realKubeRBACProxy) expect(t *testing.T, what string, clients map[string]*tls.Config, ok map[string]bool) {
	t.Helper()
	p.close()
	d, err := p.api.Client.AppsV1().Deployments(testNS).Get(p.ctx, workloadControllerService.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rendered []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "provisioner-kube-rbac-proxy" {
			rendered = c.Args
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"--kubeconfig=" + p.kubeconfig}
	for _, a := range rendered {
		flag, _, _ := strings.Cut(a, "=")
		switch flag {
		case "--secure-listen-address":
			a = flag + "=" + addr
		case "--upstream":
			a = flag + "=" + p.upstream
		case "--tls-cert-file":
			a = flag + "=" + filepath.Join(p.dir, "tls.crt")
		case "--tls-private-key-file":
			a = flag + "=" + filepath.Join(p.dir, "tls.key")
		}
		args = append(args, a)
	}
	log, err := os.Create(filepath.Join(p.dir, "kube-rbac-proxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	p.cmd = exec.CommandContext(p.ctx, p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-rbac-proxy under %s: %v", what, slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !tlsprofile.IsKubeRBACProxyFlag(a) }))
	up := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(up) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("kube-rbac-proxy did not listen on %s: %v\n%s", addr, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tlsEndpoint{addr: addr, name: p.name, pool: p.pool}.expect(t, "kube-rbac-proxy under "+what, clients, ok)
}
