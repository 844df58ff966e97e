//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// noCluster keeps a developer's own kubeconfig (~/.kube/config) out of the tests. HOME moves,
// so what is found through it (the kube binaries' cache, Go's module cache) is pinned first.
func noCluster(t *testing.T) {
	if home, err := os.UserHomeDir(); err == nil {
		for env, dir := range map[string]string{"XDG_CACHE_HOME": ".cache", "GOPATH": "go"} {
			if os.Getenv(env) == "" {
				t.Setenv(env, filepath.Join(home, dir))
			}
		}
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
}

// recorder is the CLI's transport hook: it counts requests and keeps the tokens Keystone issues.
type recorder struct {
	mu     sync.Mutex
	next   http.RoundTripper
	total  int
	auths  int
	tokens []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if strings.HasSuffix(req.URL.Path, "/auth/tokens") && req.Method == http.MethodPost {
		r.auths++
	}
	if err == nil && resp.Header.Get("X-Subject-Token") != "" {
		r.tokens = append(r.tokens, resp.Header.Get("X-Subject-Token"))
	}
	return resp, err
}

func record(t *testing.T) *recorder {
	r := &recorder{}
	wrapOpenStackTransport = func(next http.RoundTripper) http.RoundTripper { r.next = next; return r }
	t.Cleanup(func() { wrapOpenStackTransport = nil })
	return r
}

// exportsSeedShare matches the MANILA column of the storage network: the seed's share, and any
// that tests running at the same time (test/e2e provisions real shares) have in the project.
var (
	machinesGVR       = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}
	infrastructureGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
)

var exportsSeedShare = regexp.MustCompile(`\* exports [1-9][0-9]* shares? \(10\.0\.0\.10, 10\.0\.0\.20\)`)

func TestNetworksListMarksTheStorageNetwork(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	rec := record(t)
	code, out, errOut := runCLI(t, "networks", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("\n%s", out)
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "storage "):
			if !strings.Contains(line, cloud.Seed.Networks["storage"]) || !strings.Contains(line, "10.0.0.0/24") || !exportsSeedShare.MatchString(line) {
				t.Errorf("storage row: %q", line)
			}
		case strings.HasPrefix(line, "decoy "), strings.HasPrefix(line, "tenant "):
			if strings.Contains(line, "*") {
				t.Errorf("unmarked network marked: %q", line)
			}
		}
	}
	if rec.auths != 1 {
		t.Errorf("%d token requests, want 1", rec.auths)
	}

	code, out, errOut = runCLI(t, "networks", "list", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []NetworkRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	marked := 0
	for _, r := range rows {
		if r.Manila {
			marked++
			if r.ID != cloud.Seed.Networks["storage"] || r.Confidence != "high" || !r.Shared || len(r.CIDRs) != 1 {
				t.Errorf("marked row %+v", r)
			}
		}
	}
	if marked != 1 {
		t.Errorf("%d networks marked, want 1", marked)
	}
}

func TestNetworksDiscoverOnTheSeed(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	rec := record(t)
	start := time.Now()
	code, out, errOut := runCLI(t, "networks", "discover")
	took := time.Since(start)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("%d requests in %s:\n%s", rec.total, took, out)
	want := fmt.Sprintf("exports shares on network %q (%s)", "storage", cloud.Seed.Networks["storage"])
	if !strings.Contains(out, want) || !strings.Contains(out, "export addresses 10.0.0.10 (preferred), 10.0.0.20 in subnet storage-subnet (10.0.0.0/24)") {
		t.Errorf("output lacks %q", want)
	}
	if strings.Contains(out, "decoy") || strings.Contains(out, "11.0.0.11") {
		t.Errorf("output names the decoy or the admin-only export:\n%s", out)
	}
	// The seeded subnet is as Neutron makes one: a gateway, no DNS servers. Discovery says what
	// that does to the nodes, as the patch commands do.
	if !strings.Contains(out, "     warning: subnet storage-subnet (") || !strings.Contains(out, "its gateway 10.0.0.1 is handed out by DHCP") ||
		!strings.Contains(out, "fix: openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 storage-subnet") {
		t.Errorf("discover does not say what the storage subnet does to the nodes:\n%s", out)
	}

	code, out, _ = runCLI(t, "networks", "discover", "-o", "json", "--security-group", cloud.Seed.SecurityGroups["block-egress"])
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var d openstack.Discovery
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(d.Candidates) != 1 || d.Candidates[0].Network.ID != cloud.Seed.Networks["storage"] || d.Manila.Microversion == "" {
		t.Errorf("discovery %+v", d)
	}
	if d.SecurityGroups == nil || len(d.SecurityGroups.Verdicts) != 2 || d.SecurityGroups.Verdicts[0].Allowed || d.SecurityGroups.Verdicts[1].Allowed {
		t.Errorf("block-egress verdicts %+v", d.SecurityGroups)
	}
	// The findings the text shows, as data: the seeded subnet's gateway and DNS.
	cands := discoveredFindings(t, out)
	storageSubnet := fmt.Sprintf("storage-subnet (%s)", cloud.Seed.Subnets["storage-subnet"].ID)
	if fs := cands[cloud.Seed.Networks["storage"]]; len(fs) != 2 ||
		fs[0] != (attach.Finding{ID: attach.FindingDefaultRoute, Severity: attach.SeverityWarning, Network: "storage (" + cloud.Seed.Networks["storage"] + ")", Subnet: storageSubnet,
			Message: fs[0].Message, Fix: "openstack subnet set --gateway none storage-subnet"}) ||
		!strings.HasPrefix(fs[0].Message, "its gateway 10.0.0.1 is handed out by DHCP: ") ||
		fs[1].ID != attach.FindingDNSAnnounced || fs[1].Severity != attach.SeverityWarning || fs[1].Subnet != storageSubnet ||
		fs[1].Fix != "openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 storage-subnet" {
		t.Errorf("the storage candidate's findings: %+v", fs)
	}

	code, out, _ = runCLI(t, "networks", "discover", "--security-group", cloud.Seed.SecurityGroups["block-egress"])
	if code != exitOK || !strings.Contains(out, "NFS: BLOCKED: security groups block-egress would block NFS: no egress rule allows 2049/tcp, 111/tcp, 111/udp to 10.0.0.10") {
		t.Errorf("exit %d, text verdict:\n%s", code, out)
	}
}

// discoveredFindings reads the candidates' findings of `networks discover -o json`, by network
// ID; a candidate without the field fails the test ([] is a fit network).
func discoveredFindings(t *testing.T, out string) map[string][]attach.Finding {
	t.Helper()
	var d struct {
		Candidates []struct {
			Network  struct{ ID string }
			Findings *[]attach.Finding `json:"findings"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	byID := map[string][]attach.Finding{}
	for _, c := range d.Candidates {
		if c.Findings == nil {
			t.Errorf("candidate %s has no findings field:\n%s", c.Network.ID, out)
			continue
		}
		byID[c.Network.ID] = *c.Findings
	}
	return byID
}

// TestNetworksDiscoverFindingsAsJSON: every candidate of -o json carries its findings with
// their stable IDs, those of a network Manila places share servers on too; a fit one has [].
func TestNetworksDiscoverFindingsAsJSON(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	p := ostest.NewProject(t, cloud, "ms-cli-findings")
	fit := p.CreateNetworkWith("nd-fit", nil, map[string]any{"cidr": "10.71.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}})
	off := p.CreateNetworkWith("nd-dhcp-off", nil, map[string]any{"cidr": "10.72.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}, "enable_dhcp": false})
	p.CreateShareNetwork("nd-fit", fit.ID, fit.SubnetIDs[0])
	p.CreateShareNetwork("nd-dhcp-off", off.ID, off.SubnetIDs[0])

	code, out, errOut := runCLI(t, "--os-cloud", ostest.CloudName, "--os-client-config-file", p.CloudsFile, "networks", "discover", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	cands := discoveredFindings(t, out)
	if fs, ok := cands[fit.ID]; !ok || len(fs) != 0 {
		t.Errorf("the fit network: candidate %v, findings %+v", ok, fs)
	}
	want := attach.Finding{ID: attach.FindingDHCPOff, Severity: attach.SeverityError, Network: "nd-dhcp-off (" + off.ID + ")",
		Message: "no subnet has DHCP enabled: the machines' port on it gets no address, and the shares stay unreachable",
		Fix:     "openstack subnet set --dhcp nd-dhcp-off-subnet-0"}
	if fs := cands[off.ID]; len(fs) != 1 || fs[0] != want {
		t.Errorf("the DHCP-less network's findings %+v, want %+v", fs, want)
	}
	// The raw field names scripts use.
	if !strings.Contains(out, `"id": "dhcp-off"`) || !strings.Contains(out, `"severity": "error"`) || !strings.Contains(out, `"findings": []`) {
		t.Errorf("-o json:\n%s", out)
	}
}

func TestNetworksUsageAndEnvironmentErrors(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad timeout", []string{"networks", "list", "--timeout", "0s"}, exitUsage, `--timeout: Invalid value: "0s"`},
		{"missing CA bundle", []string{"networks", "discover", "--ca-bundle", "/nonexistent/ca.pem"}, exitUsage, `--ca-bundle: Invalid value: "/nonexistent/ca.pem": no such file or directory`},
		{"empty security group", []string{"networks", "discover", "--security-group", ""}, exitUsage, "--security-group[0]: Required value"},
		{"unknown cloud", []string{"networks", "list", "--os-cloud", "nope"}, exitUsage, `cloud "nope" is not in ` + cloud.CloudsFile},
		{"unknown security group", []string{"networks", "discover", "--security-group", cloud.Seed.Networks["storage"]}, exitUsage, "there is no security group with ID " + cloud.Seed.Networks["storage"]},
		{"explicit kubeconfig missing", []string{"networks", "discover", "--kubeconfig", "/nonexistent/kubeconfig"}, exitUsage, "kubeconfig /nonexistent/kubeconfig"},
		{"extra argument", []string{"networks", "list", "extra"}, exitUsage, `unknown command "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d (want %d), stderr %q lacks %q", code, tt.code, errOut, tt.want)
			}
		})
	}
}

// TestNetworksDiscoverWithACluster: Machines in a real apiserver, servers that exist only as
// Neutron ports (there is no Nova here), one worker attached to the storage network.
func TestNetworksDiscoverWithACluster(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	p := ostest.NewProject(t, cloud, "ms-cli-cluster")
	tenant := p.CreateNetwork("machines", "10.128.0.0/14")
	storage := cloud.Seed.Networks["storage"]
	sg := p.CreateSecurityGroup("workers", true)
	const infra = "ocp-t8k2p"
	w0, w1, m0 := "2b2b2b2b-0000-4000-8000-000000000001", "2b2b2b2b-0000-4000-8000-000000000002", "2b2b2b2b-0000-4000-8000-000000000003"
	p.CreatePort(tenant.ID, infra+"-worker-0-aaaa", w0, sg)
	p.CreatePort(storage, infra+"-worker-0-aaaa-storage", w0, sg)
	p.CreatePort(tenant.ID, infra+"-worker-0-bbbb", w1, sg)
	p.CreatePort(tenant.ID, infra+"-master-0", m0, sg)
	p.CreateShares("cli", 1)

	api := testenv.NewAPIServer(t)
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(api.Config)
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-machine-api"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]struct{ id, role string }{
		infra + "-worker-0-aaaa": {w0, "worker"}, infra + "-worker-0-bbbb": {w1, "worker"}, infra + "-master-0": {m0, "master"},
	} {
		machine := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
			"metadata": map[string]any{"name": name, "namespace": "openshift-machine-api",
				"labels": map[string]any{"machine.openshift.io/cluster-api-machine-role": m.role}},
			"spec": map[string]any{"providerID": "openstack:///" + m.id},
		}}
		if _, err := dyn.Resource(machinesGVR).Namespace("openshift-machine-api").Create(ctx, machine, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	infraObj, err := dyn.Resource(infrastructureGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": map[string]any{"name": "cluster"}, "spec": map[string]any{},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(infraObj.Object, infra, "status", "infrastructureName")
	if _, err := dyn.Resource(infrastructureGVR).UpdateStatus(ctx, infraObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Setenv("OS_CLIENT_CONFIG_FILE", p.CloudsFile)
	t.Setenv("OS_CLOUD", ostest.CloudName)
	code, out, errOut := runCLI(t, "networks", "discover", "--kubeconfig", kubeconfig)
	t.Logf("\n%s%s", out, errOut)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"workers attached: 1 of 2 (ports whose device_id is a server's ID)",
		infra + "-worker-0-aaaa", "attached: port " + infra + "-worker-0-aaaa-storage 10.0.0.",
		infra + "-worker-0-bbbb", "not attached",
		"traffic: NFS is allowed by security groups workers",
		"workers: 2 from the cluster's Machines at " + strings.TrimSuffix(api.Config.Host, "/") + " (infra ID " + infra + ")",
		"exports shares on network \"storage\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, infra+"-master-0") {
		t.Errorf("the control plane is listed as a worker")
	}

	// Without a cluster, the infra ID finds the same servers through their port names.
	code, out, _ = runCLI(t, "networks", "discover", "--infra-id", infra, "-o", "json")
	var d openstack.Discovery
	if code != exitOK || json.Unmarshal([]byte(out), &d) != nil || d.Best() == nil || d.Best().Attachment == nil {
		t.Fatalf("exit %d: %s", code, out)
	}
	if a := d.Best().Attachment; a.Attached != 1 || a.Total != 3 {
		t.Errorf("by infra ID: %d of %d attached, want 1 of 3 (two workers and a master)", a.Attached, a.Total)
	}
}

// TestSecretsNeverPrinted captures everything passing and failing runs print at -vv and the
// errors they return, and looks for the passwords, application-credential secret and tokens.
func TestSecretsNeverPrinted(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	secrets := cloudSecrets(t, cloud.CloudsFile)
	rec := record(t)
	var printed strings.Builder
	// run runs the CLI; authenticated says whether the run must get a token from Keystone (the
	// tokens are among what must never be printed).
	// A failing run that must authenticate first is tried twice: the loopback Keystone, shared
	// with the other tests, may drop a request under load, and then the run fails too early.
	run := func(wantOK, authenticated bool, args ...string) {
		t.Helper()
		for attempt := 1; ; attempt++ {
			rec.mu.Lock()
			before := len(rec.tokens)
			rec.mu.Unlock()
			code, out, errOut := runCLI(t, append(args, "-vv")...)
			printed.WriteString(out + errOut)
			if (code == exitOK) != wantOK {
				t.Errorf("%v: exit %d\n%s", args, code, errOut)
			}
			rec.mu.Lock()
			got := len(rec.tokens) - before
			rec.mu.Unlock()
			if !authenticated || got > 0 {
				return
			}
			if wantOK || attempt == 2 {
				t.Errorf("%v: no token was issued, so the run did not get as far as it should (exit %d)\n%s", args, code, errOut)
				return
			}
			t.Logf("%v: no token was issued (exit %d), trying again:\n%s", args, code, errOut)
		}
	}
	run(true, true, "networks", "list")
	run(true, true, "networks", "discover", "-o", "json")
	run(true, true, "networks", "discover", "--os-cloud", testenv.CloudAppCred)
	run(true, true, "networks", "list", "--os-cloud", testenv.CloudAdmin, "-o", "yaml")

	// Failing runs: wrong password, wrong application-credential secret, a server error midway.
	bad := filepath.Join(t.TempDir(), "clouds.yaml")
	writeBadClouds(t, cloud.CloudsFile, bad)
	run(false, false, "networks", "list", "--os-client-config-file", bad, "--os-cloud", "wrong-password")
	run(false, false, "networks", "discover", "--os-client-config-file", bad, "--os-cloud", "wrong-secret")
	secrets = append(secrets, "Wr0ng-"+secrets[0], "Wr0ng-secret-but-long-enough")
	wrapOpenStackTransport = func(next http.RoundTripper) http.RoundTripper {
		rec.next = failShares{next}
		return rec
	}
	run(false, true, "networks", "discover")

	all := printed.String()
	if len(all) < 2000 {
		t.Errorf("only %d bytes captured", len(all))
	}
	for _, s := range append(secrets, rec.tokens...) {
		if strings.Contains(all, s) {
			t.Errorf("a secret (%d characters, starting %.3s) was printed", len(s), s)
		}
	}
	t.Logf("%d bytes of output checked against %d secrets and %d tokens", len(all), len(secrets), len(rec.tokens))
}

// failShares answers Manila's share list with a 500, after authentication worked.
type failShares struct{ next http.RoundTripper }

func (f failShares) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/shares/detail") {
		return &http.Response{StatusCode: 500, Status: "500 Internal Server Error", Header: http.Header{},
			Body: http.NoBody, Request: req}, nil
	}
	return f.next.RoundTrip(req)
}

type cloudsDoc struct {
	Clouds map[string]map[string]any `json:"clouds"`
}

// cloudSecrets returns the passwords and application-credential secret of clouds.yaml. The
// admin's password equals its cloud's name in the loopback cloud, which is printed on purpose,
// so it is left out.
func cloudSecrets(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc cloudsDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range []string{testenv.CloudDemo, testenv.CloudAppCred} {
		auth, _ := doc.Clouds[name]["auth"].(map[string]any)
		for _, k := range []string{"password", "application_credential_secret"} {
			if s, ok := auth[k].(string); ok && s != "" {
				out = append(out, s)
			}
		}
	}
	if len(out) != 2 {
		t.Fatalf("expected a password and a secret in %s, found %d", path, len(out))
	}
	return out
}

func writeBadClouds(t *testing.T, from, to string) {
	t.Helper()
	raw, _ := os.ReadFile(from)
	var doc cloudsDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	wrongPw := doc.Clouds[testenv.CloudDemo]
	auth := copyMap(wrongPw["auth"].(map[string]any))
	auth["password"] = "Wr0ng-" + auth["password"].(string)
	wrongPw = copyMap(wrongPw)
	wrongPw["auth"] = auth
	wrongSecret := copyMap(doc.Clouds[testenv.CloudAppCred])
	auth = copyMap(wrongSecret["auth"].(map[string]any))
	auth["application_credential_secret"] = "Wr0ng-secret-but-long-enough"
	wrongSecret["auth"] = auth
	b, err := yaml.Marshal(map[string]any{"clouds": map[string]any{"wrong-password": wrongPw, "wrong-secret": wrongSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
