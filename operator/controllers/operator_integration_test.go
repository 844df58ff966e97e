//go:build integration

package controllers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/sharetypes"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

const testNS = operator.DefaultNamespace

// testImages are sentinels: any other image in an operand did not come from the env.
var testImages = operator.Images{
	Driver: "example.test/driver:1", NFSDriver: "example.test/nfs:1", Provisioner: "example.test/provisioner:1",
	Snapshotter: "example.test/snapshotter:1", Resizer: "example.test/resizer:1", LivenessProbe: "example.test/liveness:1",
	NodeDriverRegistrar: "example.test/registrar:1", KubeRBACProxy: "example.test/kube-rbac-proxy:1",
}

// requestLog counts the operator's API requests by verb and outcome, as an apiserver audit log
// would: the measure of conflicts, steady-state writes and direct GETs.
type requestLog struct {
	mu       sync.Mutex
	entries  []reqEntry
	conflict atomic.Int64
}

type reqEntry struct {
	at     time.Time
	method string
	path   string
	query  string
	code   int
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		if code == http.StatusConflict {
			l.conflict.Add(1)
		}
		l.mu.Lock()
		l.entries = append(l.entries, reqEntry{time.Now(), r.Method, r.URL.Path, r.URL.RawQuery, code})
		l.mu.Unlock()
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// since returns writes (non-GET) and direct GETs of single objects (not lists, not watches)
// made after t.
func (l *requestLog) since(t time.Time) (writes, gets []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		if e.at.Before(t) {
			continue
		}
		switch {
		case e.method != http.MethodGet:
			writes = append(writes, e.method+" "+e.path)
		case !strings.Contains(e.query, "watch=") && !isList(e.path):
			gets = append(gets, e.method+" "+e.path)
		}
	}
	return
}

// first reports, for each path fragment, when the first request with that method on such a
// path was made, relative to the first request of all.
func (l *requestLog) first(method string, suffixes ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	if len(l.entries) == 0 {
		return nil
	}
	t0 := l.entries[0].at
	for _, suf := range suffixes {
		for _, e := range l.entries {
			if e.method == method && strings.Contains(e.path, suf) {
				out = append(out, fmt.Sprintf("%s %s at +%.2fs", method, suf, e.at.Sub(t0).Seconds()))
				break
			}
		}
	}
	return out
}

// isList tells a collection path (…/namespaces/x/secrets, …/storageclasses) from an object path.
func isList(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/<res> | /api/v1/namespaces/<ns>/<res> | /apis/<g>/<v>/<res> | /apis/<g>/<v>/namespaces/<ns>/<res>
	n := len(parts)
	if parts[0] == "api" {
		return n == 3 || (n == 5 && parts[2] == "namespaces")
	}
	return n == 4 || (n == 6 && parts[3] == "namespaces")
}

// catalogProxy sits in front of Keystone and, when stripping, removes the sharev2 service
// from every catalog it returns: "Manila removed from the catalog" without touching the cloud.
type catalogProxy struct {
	*httptest.Server
	strip atomic.Bool
}

func newCatalogProxy(t *testing.T, keystone string) *catalogProxy {
	u, err := url.Parse(keystone)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	p := &catalogProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !p.strip.Load() || !strings.Contains(resp.Request.URL.Path, "/auth/") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var doc map[string]any
		if json.Unmarshal(body, &doc) == nil {
			stripShare := func(list []any) []any {
				var out []any
				for _, e := range list {
					if m, ok := e.(map[string]any); ok && m["type"] == "sharev2" {
						continue
					}
					out = append(out, e)
				}
				return out
			}
			if tok, ok := doc["token"].(map[string]any); ok {
				if c, ok := tok["catalog"].([]any); ok {
					tok["catalog"] = stripShare(c)
				}
			}
			if c, ok := doc["catalog"].([]any); ok {
				doc["catalog"] = stripShare(c)
			}
			body, _ = json.Marshal(doc)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
		return nil
	}
	p.Server = httptest.NewServer(rp)
	t.Cleanup(p.Close)
	return p
}

// cloudsYAMLFor rewrites one cloud of the loopback clouds.yaml as the only cloud "openstack",
// its auth_url pointing at authURL.
func cloudsYAMLFor(t *testing.T, cloud *testenv.Cloud, name, authURL string) []byte {
	raw, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]map[string]any
	if err := yaml.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	c := all["clouds"][name]
	auth := c["auth"].(map[string]any)
	auth["auth_url"] = authURL + "/v3"
	out, err := yaml.Marshal(map[string]any{"clouds": map[string]any{"openstack": c}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// secretsOf returns the secret values of the loopback clouds (passwords, application
// credential secrets): what must never appear in logs, events or status.
func secretsOf(t *testing.T, cloud *testenv.Cloud) []string {
	raw, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]map[string]any
	if err := yaml.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range all["clouds"] {
		auth, _ := c["auth"].(map[string]any)
		for _, k := range []string{"password", "application_credential_secret"} {
			if s, ok := auth[k].(string); ok && s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func adminManila(t *testing.T, ctx context.Context, cloud *testenv.Cloud) *gophercloud.ServiceClient {
	return manilaAs(t, ctx, cloud, testenv.CloudAdmin)
}

type harness struct {
	t       *testing.T
	op      *Operator
	ctx     context.Context
	sim     *testenv.SimCluster
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	resync  time.Duration
	started time.Time
	reqs    *requestLog
	logs    *testenv.SyncBuffer
}

// clusterCSIDriver reads the operator's own object: the ClusterCSIDriver, or in companion mode
// the ManilaCompanion (same shapes).
func (h *harness) clusterCSIDriver() *operatorv1.ClusterCSIDriver {
	gvr, name := machinery.ClusterCSIDriverGVR, operator.DriverName
	if h.op != nil && h.op.cfg.Mode == platform.ModeCompanion {
		gvr, name = machinery.CompanionGVR, operator.CompanionName
	}
	u, err := h.dyn.Resource(gvr).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var d operatorv1.ClusterCSIDriver
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		h.t.Fatal(err)
	}
	return &d
}

func (h *harness) condition(typ string) *operatorv1.OperatorCondition {
	for _, c := range h.clusterCSIDriver().Status.Conditions {
		if c.Type == typ {
			return &c
		}
	}
	return nil
}

// settle bounds the wait for a state the operator must reach. It only caps a failure: the
// suite runs every package at once on two cores, where a sync that calls Manila or an informer
// that relists can take many times what it takes on an idle machine. How fast the operator
// reacts is logged (PERF) or checked in its own terms (syncs, Manila checks), not by deadlines.
const settle = 2 * time.Minute

// eventually polls cond until it holds or timeout passes, and fails with what it last saw.
func (h *harness) eventually(what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	h.t.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(h.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		h.t.Fatalf("%s: not within %s: %s\noperator log tail:\n%s", what, timeout, last, tail(h.logs.String(), 40))
	}
	return time.Since(start)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (h *harness) condIs(typ string, status operatorv1.ConditionStatus, reason string) func() (bool, string) {
	return func() (bool, string) {
		c := h.condition(typ)
		if c == nil {
			return false, typ + " not set"
		}
		return c.Status == status && (reason == "" || c.Reason == reason), fmt.Sprintf("%s=%s (%s: %s)", typ, c.Status, c.Reason, c.Message)
	}
}

func (h *harness) noDegraded() {
	h.t.Helper()
	for _, c := range h.clusterCSIDriver().Status.Conditions {
		if strings.HasSuffix(c.Type, "Degraded") && c.Status == operatorv1.ConditionTrue {
			h.t.Errorf("%s=True (%s: %s)", c.Type, c.Reason, c.Message)
		}
	}
}

// waitSyncs waits until every controller named (every controller when none is) has finished
// n more syncs than it had: a check that nothing changed then follows a fact about the
// controllers rather than a sleep. With n >= 2, at least one whole sync began after the call.
func (h *harness) waitSyncs(n int64, names ...string) {
	h.t.Helper()
	start := map[*machinery.Controller]int64{}
	for _, c := range h.op.controllers {
		if len(names) == 0 || slices.Contains(names, c.Name()) {
			start[c] = c.Syncs()
		}
	}
	if len(start) == 0 || len(names) > 0 && len(start) != len(names) {
		h.t.Fatalf("controllers %v: %d found", names, len(start))
	}
	h.eventually(fmt.Sprintf("%d more syncs of %v", n, names), settle, func() (bool, string) {
		for c, s := range start {
			if got := c.Syncs() - s; got < n {
				return false, fmt.Sprintf("%s: %d syncs", c.Name(), got)
			}
		}
		return true, ""
	})
}

// byManilaCheck checks that cond holds once the Manila controller has finished the sync of the
// first check of Manila (a share type list) begun after the call, or of the second if the first
// failed on a loaded machine; the caller calls it right after changing Manila. The controller
// checks once per resync, so this is "within one resync" counted in the operator's own work
// rather than in wall time, which the load of the machine stretches; the time is logged.
func (h *harness) byManilaCheck(what string, cond func() (bool, string)) {
	h.t.Helper()
	start := time.Now()
	var msg string
	for check := 1; check <= 2; check++ {
		lists := OpenStackCalls.ShareTypeLists.Load()
		h.eventually("a check of Manila's share types", settle, func() (bool, string) {
			return OpenStackCalls.ShareTypeLists.Load() > lists, "none yet"
		})
		// The sync of that check has finished once one more has: a controller syncs one at a time.
		h.waitSyncs(1, manilaName)
		var ok bool
		if ok, msg = cond(); ok {
			h.t.Logf("PERF %s after %d check(s) of Manila, %.2fs (resync %s)", what, check, time.Since(start).Seconds(), h.resync)
			return
		}
	}
	h.t.Fatalf("%s: not after the two checks of Manila that followed the change: %s", what, msg)
}

// afterCredentials waits until the operator's cache holds credentials for which has is true,
// then until the driver Secret's controller has finished a sync begun after that (two syncs): what
// that controller writes from the credentials is then written.
func (h *harness) afterCredentials(has func(*operator.Credentials) bool) {
	h.t.Helper()
	h.eventually("the new credentials in the operator's cache", settle, func() (bool, string) {
		c, err := h.op.credentials()
		if err != nil {
			return false, err.Error()
		}
		return has(c), "not yet"
	})
	h.waitSyncs(2, secretName+"Controller")
}

func (h *harness) setManagementState(s operatorv1.ManagementState) {
	patch := fmt.Sprintf(`{"spec":{"managementState":%q}}`, s)
	if _, err := h.dyn.Resource(machinery.ClusterCSIDriverGVR).Patch(h.ctx, operator.DriverName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) setCredentials(y []byte) {
	s, err := h.kube.CoreV1().Secrets(testNS).Get(h.ctx, operator.CredentialsSecretName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	s.Data[operator.CredentialsKey] = y
	if _, err := h.kube.CoreV1().Secrets(testNS).Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) operandsExist() (bool, string) {
	if _, err := h.kube.StorageV1().CSIDrivers().Get(h.ctx, operator.DriverName, metav1.GetOptions{}); err != nil {
		return false, "CSIDriver: " + err.Error()
	}
	if _, err := h.kube.AppsV1().Deployments(testNS).Get(h.ctx, workloadControllerService.name, metav1.GetOptions{}); err != nil {
		return false, "Deployment: " + err.Error()
	}
	for _, k := range []workloadKind{workloadNodeService, workloadNFSNodeService} {
		if _, err := h.kube.AppsV1().DaemonSets(testNS).Get(h.ctx, k.name, metav1.GetOptions{}); err != nil {
			return false, "DaemonSet " + k.name + ": " + err.Error()
		}
	}
	if _, err := h.kube.NetworkingV1().NetworkPolicies(testNS).Get(h.ctx, workloadControllerService.name, metav1.GetOptions{}); err != nil {
		return false, "NetworkPolicy: " + err.Error()
	}
	return true, ""
}

// TestOperatorOnSimCluster runs the operator, with exactly the RBAC that `operator render`
// grants, against a sim cluster (real apiserver, scheduler, controller-manager, kwok nodes) and
// the loopback OpenStack, and walks through its life: install, share types coming and going,
// credential rotation, Manila leaving the catalog, Unmanaged, a deleted DaemonSet, Removed.
func TestOperatorOnSimCluster(t *testing.T) {
	cloud := testenv.NewCloud(t)
	for _, c := range []*atomic.Int64{&OpenStackCalls.Tokens, &OpenStackCalls.Catalogs, &OpenStackCalls.ShareTypeLists, &OpenStackCalls.ShareNetworkLists} {
		c.Store(0)
	}
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3, WorkerNodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	resync := 3 * time.Second
	// Shorter than the default so that the outage below outlasts it without a long wait.
	const manilaGrace = 12 * time.Second
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, resync: resync, reqs: &requestLog{}, logs: &testenv.SyncBuffer{}}
	var err error
	if h.dyn, err = dynamic.NewForConfig(sim.Config); err != nil {
		t.Fatal(err)
	}

	// The cluster objects an OpenShift cluster has: Infrastructure, Proxy, the install-config.
	cfgc := configclient.NewForConfigOrDie(sim.Config)
	infra, err := cfgc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "sim-abcde", ControlPlaneTopology: configv1.HighlyAvailableTopologyMode,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode, PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType}}
	if _, err := cfgc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: machinery.ClusterConfigName},
		Data:       map[string]string{"install-config": "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Deploy as documented: `operator render | kubectl apply --server-side -f -`, done here
	// through the API (what kubectl sends: server-side apply of every document, the CRD
	// first), then the credentials Secret, through a Keystone proxy that can hide Manila.
	proxy := newCatalogProxy(t, cloud.Seed.KeystoneURL)
	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/manila-setup:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	if applied, err := deploy.Install(ctx, sim.Config, rendered, testNS, deploy.InstallOptions{}); err != nil {
		t.Fatalf("server-side apply of the rendered manifests: %v (applied: %v)", err, applied)
	}
	demo := cloudsYAMLFor(t, cloud, testenv.CloudDemo, proxy.URL)
	if _, err := sim.Client.CoreV1().Secrets(testNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.CredentialsSecretName, Namespace: testNS},
		Data:       map[string][]byte{operator.CredentialsKey: demo},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The most verbose operator log, so that the secret search below has teeth.
	if _, err := h.dyn.Resource(machinery.ClusterCSIDriverGVR).Patch(ctx, operator.DriverName, types.MergePatchType,
		[]byte(`{"spec":{"operatorLogLevel":"TraceAll"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// The operator runs as its ServiceAccount: the rendered RBAC must be enough.
	opCfg, err := sim.UserConfig("system:serviceaccount:"+testNS+":"+operator.OperatorName, "system:serviceaccounts", "system:serviceaccounts:"+testNS, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	opCfg = rest.CopyConfig(opCfg)
	opCfg.Wrap(h.reqs.wrap)

	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("v", "6")
	klog.SetOutput(h.logs)
	defer klog.SetOutput(os.Stderr)
	if path := os.Getenv("OPERATOR_TEST_LOG"); path != "" {
		defer func() { _ = os.WriteFile(path, []byte(h.logs.String()), 0o600) }()
	}

	op, err := New(opCfg, nil, Config{
		Namespace: testNS, Images: testImages, Resync: resync, OpenStackTimeout: 5 * time.Second, ManilaGracePeriod: manilaGrace,
		StorageNetworkID: cloud.Seed.Networks["storage"], Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	h.op = op
	opCtx, stopOperator := context.WithCancel(ctx)
	done := make(chan struct{})
	h.started = time.Now()
	go func() { defer close(done); _ = op.Run(opCtx) }()
	defer func() { stopOperator(); <-done }()

	t.Run("operands created and available on kwok nodes", func(t *testing.T) {
		h.t = t
		created := h.eventually("all operands created", settle, h.operandsExist)
		t.Logf("PERF operands created %.2fs after the operator started", created.Seconds())
		for _, e := range h.reqs.first("PATCH", "/csidrivers/", "/serviceaccounts/", "/secrets/", "/deployments/", "/daemonsets/") {
			t.Logf("PERF   first %s", e)
		}
		for _, p := range []string{"ManilaDriverControllerService", "ManilaDriverNodeService", "NFSDriverNodeService"} {
			h.eventually(p+" available", settle, h.condIs(p+"Available", operatorv1.ConditionTrue, ""))
			h.eventually(p+" done progressing", settle, h.condIs(p+"Progressing", operatorv1.ConditionFalse, ""))
		}
		h.eventually("ManilaControllerDisabled=False", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable"))
		// The rendered operator Deployment itself is scheduled and Ready (on kwok nodes the
		// process does not run: the operator under test runs in this process, as its
		// ServiceAccount).
		h.eventually("the rendered operator Deployment Ready", settle, func() (bool, string) {
			d, err := h.kube.AppsV1().Deployments(testNS).Get(ctx, operator.OperatorName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return d.Status.ReadyReplicas == 1, fmt.Sprintf("%d ready", d.Status.ReadyReplicas)
		})
		t.Logf("PERF all operands Available %.2fs after the operator started", time.Since(h.started).Seconds())

		d, err := h.kube.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 2 || d.Status.ReadyReplicas != 2 || d.Spec.Template.Spec.NodeSelector["node-role.kubernetes.io/master"] != "" {
			t.Errorf("controller: %d replicas, %d ready, node selector %v", *d.Spec.Replicas, d.Status.ReadyReplicas, d.Spec.Template.Spec.NodeSelector)
		}
		if d.Generation != 1 {
			t.Errorf("controller Deployment generation %d: rolled out more than once", d.Generation)
		}
		pods, err := h.kube.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{LabelSelector: "app=manila-csi-driver"})
		if err != nil {
			t.Fatal(err)
		}
		ready, onMasters := 0, 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
			if p.Labels["component"] == "controller" && strings.HasPrefix(p.Spec.NodeName, "master-") {
				onMasters++
			}
		}
		if ready != 2+5+5 || onMasters != 2 {
			t.Errorf("%d pods Ready (want 12: 2 controllers, 5+5 node plugins), %d controllers on control-plane nodes", ready, onMasters)
		}
		for _, k := range []workloadKind{workloadNodeService, workloadNFSNodeService} {
			ds, err := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, k.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ds.Status.NumberReady != 5 || ds.Generation != 1 {
				t.Errorf("%s: %d ready (want 5, every node), generation %d", k.name, ds.Status.NumberReady, ds.Generation)
			}
		}
		sec, err := h.kube.CoreV1().Secrets(testNS).Get(ctx, operator.DriverSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(sec.Data["os-userName"]) != "demo" || len(sec.Data["os-password"]) == 0 || string(sec.Data["os-authURL"]) != proxy.URL+"/v3" {
			t.Errorf("driver secret keys %v, user %q, authURL %q", slices.Sorted(maps.Keys(sec.Data)), sec.Data["os-userName"], sec.Data["os-authURL"])
		}
		for name := range cloud.Seed.ShareTypes {
			scName := operator.StorageClassNames([]string{name}, nil, nil)[name]
			sc, err := h.kube.StorageV1().StorageClasses().Get(ctx, scName, metav1.GetOptions{})
			if err != nil {
				c := h.condition(manilaName + "Available")
				t.Errorf("StorageClass for share type %s: %v (%v)", name, err, c)
				continue
			}
			if sc.Parameters["type"] != name || sc.Parameters["nfs-shareClient"] != "10.196.0.0/16" || sc.Provisioner != operator.DriverName {
				t.Errorf("StorageClass %s: %v", scName, sc.Parameters)
			}
		}
		st, err := deploy.GetStatus(ctx, sim.Config, testNS)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Healthy || len(st.Operands) != 3 || len(st.StorageClasses) < len(cloud.Seed.ShareTypes) || st.ObservedGen != st.Generation || st.Version != "test" {
			t.Errorf("operator status: %+v", st)
		}
		if c := h.condition(operator.ConditionStorageNetworkReachable); c == nil {
			t.Errorf("no %s condition", operator.ConditionStorageNetworkReachable)
		}
		h.noDegraded()
		if n := h.reqs.conflict.Load(); n != 0 {
			t.Errorf("PERF %d HTTP 409 conflicts, want 0", n)
		}
	})

	t.Run("steady state: no writes, no direct GETs", func(t *testing.T) {
		h.t = t
		// Let every controller settle (two syncs each) and write the messages it held back
		// (machinery.MessageRefresh), then watch until each has synced three more times (at
		// least two whole resyncs).
		h.waitSyncs(2)
		time.Sleep(machinery.MessageRefresh)
		h.waitSyncs(1)
		from := time.Now()
		h.waitSyncs(3)
		over := time.Since(from).Round(100 * time.Millisecond)
		writes, gets := h.reqs.since(from)
		if len(writes) != 0 || len(gets) != 0 {
			t.Errorf("steady state over %s: %d writes %v, %d direct GETs %v", over, len(writes), writes, len(gets), gets)
		}
		t.Logf("PERF steady state over %s (3 syncs of every controller): %d writes, %d direct GETs; OpenStack so far: %d tokens, %d catalog reads, %d share type lists",
			over, len(writes), len(gets), OpenStackCalls.Tokens.Load(), OpenStackCalls.Catalogs.Load(), OpenStackCalls.ShareTypeLists.Load())
		if OpenStackCalls.Tokens.Load() != 1 {
			t.Errorf("PERF %d Keystone tokens issued, want 1 (one per token lifetime)", OpenStackCalls.Tokens.Load())
		}
	})

	t.Run("a new share type gets its StorageClass within one resync", func(t *testing.T) {
		h.t = t
		admin := adminManila(t, ctx, cloud)
		name := fmt.Sprintf("Op_Test.%d", time.Now().UnixNano()%100000)
		st, err := sharetypes.Create(ctx, admin, shareTypeCreate{"name": name, "os-share-type-access:is_public": true,
			"extra_specs": map[string]any{"driver_handles_share_servers": false}}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		deleted := false
		t.Cleanup(func() {
			if !deleted {
				_ = sharetypes.Delete(context.Background(), admin, st.ID).ExtractErr()
			}
		})
		scName := operator.StorageClassNames([]string{name}, nil, nil)[name]
		h.byManilaCheck("new share type -> StorageClass "+scName, func() (bool, string) {
			_, err := h.kube.StorageV1().StorageClasses().Get(ctx, scName, metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})

		// A user makes it the default class: that survives the operator.
		if _, err := h.kube.StorageV1().StorageClasses().Patch(ctx, scName, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The share type goes away: the class stays, annotated.
		if err := sharetypes.Delete(ctx, admin, st.ID).ExtractErr(); err != nil {
			t.Fatal(err)
		}
		deleted = true
		h.byManilaCheck("StorageClass annotated as gone", func() (bool, string) {
			sc, err := h.kube.StorageV1().StorageClasses().Get(ctx, scName, metav1.GetOptions{})
			if err != nil {
				return false, "deleted! " + err.Error()
			}
			return sc.Annotations[operator.AnnotationShareTypeGone] != "" && sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true", fmt.Sprint(sc.Annotations)
		})
	})

	t.Run("StorageClasses of others are checked, never written", func(t *testing.T) {
		h.t = t
		// Copies of the operator's own class for share type "default", as a user would write
		// them, each with one mistake, and one without.
		ours, err := h.kube.StorageV1().StorageClasses().Get(ctx, "csi-manila-default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		user := func(name string, edit func(map[string]string)) {
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: ours.Provisioner, Parameters: map[string]string{}}
			for k, v := range ours.Parameters {
				sc.Parameters[k] = v
			}
			edit(sc.Parameters)
			if _, err := h.kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = h.kube.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		since := time.Now()
		user("user-miscased", func(p map[string]string) { p["nfs-ShareClient"] = p["nfs-shareClient"]; delete(p, "nfs-shareClient") })
		user("user-no-secret", func(p map[string]string) { p["csi.storage.k8s.io/provisioner-secret-name"] = "does-not-exist" })
		user("user-no-type", func(p map[string]string) { p["type"] = "gold" })
		user("user-fine", func(map[string]string) {})
		h.eventually("StorageClassesValid=False naming each bad class", settle, func() (bool, string) {
			c := h.condition(ConditionStorageClassesValid)
			if c == nil || c.Status != operatorv1.ConditionFalse {
				return false, fmt.Sprintf("%+v", c)
			}
			for _, want := range []string{"user-miscased nfs-ShareClient: the driver ignores this key: parameter keys are case-sensitive; spell it nfs-shareClient",
				"user-no-secret csi.storage.k8s.io/provisioner-secret-name: Secret " + testNS + "/does-not-exist does not exist", `user-no-type type: Manila offers no share type "gold"`} {
				if !strings.Contains(c.Message, want) {
					return false, "missing " + want + " in: " + c.Message
				}
			}
			if strings.Contains(c.Message, "user-fine") {
				return false, "a correct class is reported: " + c.Message
			}
			return true, ""
		})
		t.Logf("StorageClassesValid=False:\n%s", h.condition(ConditionStorageClassesValid).Message)
		h.eventually("a Warning Event about each bad class", settle, func() (bool, string) {
			evs, err := h.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=StorageClassInvalid"})
			if err != nil {
				return false, err.Error()
			}
			about := map[string]bool{}
			for _, e := range evs.Items {
				about[e.InvolvedObject.Name] = e.InvolvedObject.Kind == "StorageClass"
			}
			return about["user-miscased"] && about["user-no-secret"] && about["user-no-type"] && !about["user-fine"], fmt.Sprint(about)
		})
		h.waitSyncs(2, scLintName+"Controller")
		writes, _ := h.reqs.since(since)
		for _, w := range writes {
			if strings.Contains(w, "/storageclasses/user-") {
				t.Errorf("the operator wrote to a user's StorageClass: %s", w)
			}
		}
		// Fixed by the user: the condition clears.
		for _, name := range []string{"user-miscased", "user-no-secret", "user-no-type"} {
			_ = h.kube.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{})
		}
		h.eventually("StorageClassesValid=True", settle, h.condIs(ConditionStorageClassesValid, operatorv1.ConditionTrue, ""))
	})

	t.Run("rotated credentials reach the driver secret within one resync", func(t *testing.T) {
		h.t = t
		rotated := time.Now()
		h.setCredentials(cloudsYAMLFor(t, cloud, testenv.CloudAppCred, proxy.URL))
		// Within one resync, counted in the operator's work: the first sync of the driver
		// Secret's controller that begins once the rotated credentials are in its cache writes
		// them (a deadline in seconds would measure the load of the machine).
		h.afterCredentials(func(c *operator.Credentials) bool {
			return c.Cloud.AuthInfo != nil && c.Cloud.AuthInfo.ApplicationCredentialID != ""
		})
		s, err := h.kube.CoreV1().Secrets(testNS).Get(ctx, operator.DriverSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, hasPassword := s.Data["os-password"]; len(s.Data["os-applicationCredentialID"]) == 0 || len(s.Data["os-applicationCredentialSecret"]) == 0 || hasPassword {
			t.Errorf("the driver Secret's controller synced with the rotated credentials in its cache, yet the driver secret has %v", slices.Sorted(maps.Keys(s.Data)))
		}
		t.Logf("PERF rotated credentials in the driver secret %.2fs after the update (resync %s)", time.Since(rotated).Seconds(), resync)
		h.eventually("Manila still available with the new credentials", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionFalse, ""))
		d, _ := h.kube.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
		if d.Generation != 1 {
			t.Errorf("rotating credentials rolled the controller out (generation %d)", d.Generation)
		}
		// Let the syncs of the rotation finish (one that read the cache before it held the new
		// Secret writes it again), so that the next subtest counts only its own writes.
		h.waitSyncs(2)
	})

	t.Run("Manila gone from the catalog: driver stays, ManilaReachable says so, Degraded after the grace period", func(t *testing.T) {
		h.t = t
		outage := time.Now()
		proxy.strip.Store(true)
		took := h.eventually("ManilaReachable=False NoManila", settle, h.condIs(operator.ConditionManilaReachable, operatorv1.ConditionFalse, ReasonNoManila))
		t.Logf("PERF Manila outage reflected in the conditions %.2fs after it started (resync %s)", took.Seconds(), resync)
		// What still works is said to work: an alert on Available=False or Disabled=True
		// would call the driver off while volumes still mount.
		for _, want := range []struct {
			typ    string
			status operatorv1.ConditionStatus
			reason string
		}{
			{operator.ConditionDisabled, operatorv1.ConditionFalse, "Installed"},
			{manilaName + "Available", operatorv1.ConditionTrue, "ManilaUnreachable"},
		} {
			if ok, msg := h.condIs(want.typ, want.status, want.reason)(); !ok {
				t.Errorf("during the outage: %s", msg)
			}
		}
		h.noDegraded()
		h.waitSyncs(2)
		if ok, msg := h.operandsExist(); !ok {
			t.Errorf("an operand was deleted: %s", msg)
		}
		scs, _ := h.kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: machinery.ManagedSelector.String()})
		if len(scs.Items) < len(cloud.Seed.ShareTypes) {
			t.Errorf("StorageClasses deleted: %d left", len(scs.Items))
		}
		h.eventually("Degraded once the outage outlasts the grace period", manilaGrace+settle,
			h.condIs(manilaName+"Degraded", operatorv1.ConditionTrue, ReasonNoManila))
		// Condition times have a resolution of one second, and the grace counts from one.
		if since := time.Since(outage); since < manilaGrace-time.Second {
			t.Errorf("Degraded after %s, before the grace period of %s", since, manilaGrace)
		}
		// Over the whole outage the operator wrote its conditions and Events, nothing else: no
		// StorageClass, no workload touched.
		writes, _ := h.reqs.since(outage)
		for _, w := range writes {
			if !strings.Contains(w, "/clustercsidrivers/") && !strings.Contains(w, "/events") {
				t.Errorf("written during the outage: %s", w)
			}
		}
		proxy.strip.Store(false)
		took = h.eventually("Manila back", settle, h.condIs(operator.ConditionManilaReachable, operatorv1.ConditionTrue, ""))
		t.Logf("PERF Manila recovery reflected %.2fs after it ended", took.Seconds())
		h.eventually("not Degraded after recovery", settle, h.condIs(manilaName+"Degraded", operatorv1.ConditionFalse, ""))
		h.eventually("Disabled=False ManilaAvailable", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable"))
	})

	t.Run("Unmanaged: no more stomping; Managed again: restored", func(t *testing.T) {
		h.t = t
		h.setManagementState(operatorv1.Unmanaged)
		h.eventually("Unmanaged in the operator's cache", settle, func() (bool, string) {
			spec, _ := h.op.self.spec()
			return spec != nil && spec.ManagementState == operatorv1.Unmanaged, "not yet"
		})
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"example.test/edited-by":"admin"}}}}}`)
		if _, err := h.kube.AppsV1().DaemonSets(testNS).Patch(ctx, workloadNodeService.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The DaemonSet's event makes its controller sync; two syncs: it has looked at the change.
		h.waitSyncs(2, workloadNodeService.prefix+"Controller")
		ds, _ := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, workloadNodeService.name, metav1.GetOptions{})
		if ds.Spec.Template.Annotations["example.test/edited-by"] != "admin" {
			t.Errorf("Unmanaged, yet the operator reverted the admin's change")
		}
		h.setManagementState(operatorv1.Managed)
		h.eventually("change reverted once Managed", settle, func() (bool, string) {
			ds, _ := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, workloadNodeService.name, metav1.GetOptions{})
			return ds.Spec.Template.Annotations["example.test/edited-by"] == "", fmt.Sprint(ds.Spec.Template.Annotations)
		})
	})

	t.Run("a deleted DaemonSet is recreated", func(t *testing.T) {
		h.t = t
		if err := h.kube.AppsV1().DaemonSets(testNS).Delete(ctx, workloadNFSNodeService.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		took := h.eventually("DaemonSet recreated", settle, func() (bool, string) {
			ds, err := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, workloadNFSNodeService.name, metav1.GetOptions{})
			return err == nil && ds.DeletionTimestamp == nil, fmt.Sprint(err)
		})
		t.Logf("recreated in %.2fs", took.Seconds())
		h.eventually("NFS node plugin available again", settle, h.condIs("NFSDriverNodeServiceAvailable", operatorv1.ConditionTrue, ""))
	})

	t.Run("no secret value in logs, events or status", func(t *testing.T) {
		h.t = t
		secrets := secretsOf(t, cloud)
		if len(secrets) < 2 {
			t.Fatalf("expected the loopback clouds' secrets, got %d", len(secrets))
		}
		evs, err := h.kube.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		evJSON, _ := json.Marshal(evs)
		stJSON, _ := json.Marshal(h.clusterCSIDriver())
		logs := h.logs.String()
		if len(evs.Items) == 0 || len(logs) == 0 {
			t.Fatalf("nothing to search: %d events, %d bytes of log", len(evs.Items), len(logs))
		}
		for _, s := range secrets {
			for where, text := range map[string]string{"operator log": logs, "events": string(evJSON), "ClusterCSIDriver": string(stJSON)} {
				// As it is, and as a Secret's data holds it (an API body logged whole would).
				if strings.Contains(text, s) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(s))) {
					t.Errorf("a secret value (%d characters) appears in the %s", len(s), where)
				}
			}
		}
		t.Logf("searched %d bytes of operator log (operatorLogLevel TraceAll), %d events and the ClusterCSIDriver for %d secret values", len(logs), len(evs.Items), len(secrets))
	})

	t.Run("Removed deletes the operands", func(t *testing.T) {
		h.t = t
		h.setManagementState(operatorv1.Removed)
		h.eventually("operands deleted", settle, func() (bool, string) {
			for _, k := range []workloadKind{workloadControllerService, workloadNodeService, workloadNFSNodeService} {
				if _, err := h.kube.AppsV1().Deployments(testNS).Get(ctx, k.name, metav1.GetOptions{}); err == nil {
					return false, k.name + " still there"
				}
				if _, err := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, k.name, metav1.GetOptions{}); err == nil {
					return false, k.name + " still there"
				}
			}
			if _, err := h.kube.StorageV1().CSIDrivers().Get(ctx, operator.DriverName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "CSIDriver still there"
			}
			if _, err := h.kube.CoreV1().Secrets(testNS).Get(ctx, operator.DriverSecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "driver Secret still there"
			}
			return true, ""
		})
		scs, _ := h.kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: machinery.ManagedSelector.String()})
		if len(scs.Items) != 0 {
			var names []string
			for _, sc := range scs.Items {
				names = append(names, sc.Name)
			}
			t.Errorf("StorageClasses left after Removed: %v; %v", names, h.condition(manilaName+"Degraded"))
		}
		h.noDegraded()
	})
}

// A cloud without Manila at all: nothing is installed, the condition says why, not Degraded.
func TestOperatorWithoutManila(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	proxy := newCatalogProxy(t, cloud.Seed.KeystoneURL)
	proxy.strip.Store(true)
	h := installAndRun(t, ctx, api, cloudsYAMLFor(t, cloud, testenv.CloudDemo, proxy.URL))

	h.eventually("ManilaControllerDisabled=True NoManila", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionTrue, ReasonNoManila))
	h.eventually("ManilaControllerAvailable=True", settle, h.condIs(manilaName+"Available", operatorv1.ConditionTrue, ""))
	h.waitSyncs(2)
	h.noDegraded()
	if _, err := api.Client.StorageV1().CSIDrivers().Get(ctx, operator.DriverName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CSIDriver installed on a cloud without Manila: %v", err)
	}
	if _, err := api.Client.AppsV1().DaemonSets(testNS).Get(ctx, workloadNodeService.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node DaemonSet installed on a cloud without Manila: %v", err)
	}

	// Bad credentials: AuthFailed, still not Degraded.
	s, _ := api.Client.CoreV1().Secrets(testNS).Get(ctx, operator.CredentialsSecretName, metav1.GetOptions{})
	s.Data[operator.CredentialsKey] = bytes.Replace(s.Data[operator.CredentialsKey], []byte("password: "), []byte("password: wrong-"), 1)
	if _, err := api.Client.CoreV1().Secrets(testNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("ManilaControllerDisabled=True AuthFailed", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionTrue, ReasonAuthFailed))
	h.noDegraded()

	// Keystone unreachable.
	s, _ = api.Client.CoreV1().Secrets(testNS).Get(ctx, operator.CredentialsSecretName, metav1.GetOptions{})
	s.Data[operator.CredentialsKey] = cloudsYAMLFor(t, cloud, testenv.CloudDemo, "http://127.0.0.1:1")
	if _, err := api.Client.CoreV1().Secrets(testNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("ManilaControllerDisabled=True Unreachable", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionTrue, ReasonUnreachable))
	h.noDegraded()
}

// installAndRun installs the operator as `operator install` does on a bare API server, with
// cloudsYAML as its credentials, and runs it in-process (2 s resync) until the test ends.
func installAndRun(t *testing.T, ctx context.Context, api *testenv.APIServer, cloudsYAML []byte) *harness {
	t.Helper()
	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Install(ctx, api.Config, rendered, testNS, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: cloudsYAML}}); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, kube: api.Client, dyn: dynamic.NewForConfigOrDie(api.Config), logs: &testenv.SyncBuffer{}}
	op, err := New(api.Config, nil, Config{Namespace: testNS, Images: testImages, Resync: 2 * time.Second, MachineNetworks: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	h.op = op
	opCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = op.Run(opCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return h
}

// shareTypeCreate is the body of a share type creation: gophercloud's CreateOpts rejects
// driver_handles_share_servers=false as a missing value.
type shareTypeCreate map[string]any

func (s shareTypeCreate) ToShareTypeCreateMap() (map[string]any, error) {
	return map[string]any{"share_type": map[string]any(s)}, nil
}
