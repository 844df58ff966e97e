//go:build integration

package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopheropenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/assets"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// metricsEndpoint is the running operator's /metrics as `operator start --metrics-address`
// serves it, with the operator's own client asking the real API server who a caller is and what
// it may do, and a ServiceAccount token of OpenShift's Prometheus granted /metrics.
type metricsEndpoint struct {
	t       *testing.T
	ctx     context.Context
	names   []string
	certDir string
	addr    string
	pool    *x509.CertPool
	token   string
}

// serveForPrometheus serves the operator's metrics (h.op, its client saCfg) for the metrics
// Service of namespace, checks that a caller without a token, with an unknown one, and with
// Prometheus' before it is granted /metrics is refused, grants it, and returns once a scrape
// succeeds.
func serveForPrometheus(t *testing.T, h *harness, saCfg *rest.Config, namespace string) *metricsEndpoint {
	t.Helper()
	ctx := h.ctx
	reg := metricsRegistry()
	reg.MustRegister(conditionCollector{self: h.op.self})
	e := &metricsEndpoint{t: t, ctx: ctx, names: servingCertNames(OperatorMetricsService, namespace), certDir: t.TempDir()}
	e.pool = e.writeCert()
	srv, err := serveSecureMetrics("127.0.0.1:0", e.certDir, namespace, reg, newMetricsAuth(dynamic.NewForConfigOrDie(saCfg)), followTLSProfileAs(t, ctx, saCfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e.addr = srv.Addr

	if code, body, err := e.scrape(e.pool, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %q %v, want 401", code, body, err)
	}
	if code, body, err := e.scrape(e.pool, "not-a-token"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("with a token the API server does not know: %d %q %v, want 401", code, body, err)
	}

	// OpenShift's platform Prometheus, before and after it is granted /metrics.
	const monNS, promSA = "openshift-monitoring", "prometheus-k8s"
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.CoreV1().ServiceAccounts(monNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: promSA}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := h.kube.CoreV1().ServiceAccounts(monNS).CreateToken(ctx, promSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.token = tok.Status.Token
	if code, body, err := e.scrape(e.pool, e.token); err != nil || code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+monNS+":"+promSA) {
		t.Errorf("with Prometheus' token before any grant: %d %q %v, want 403 naming the caller", code, body, err)
	}
	// What OpenShift grants prometheus-k8s (ClusterRole prometheus-k8s: get /metrics).
	if _, err := h.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-prometheus-k8s"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-prometheus-k8s"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-prometheus-k8s"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: monNS, Name: promSA}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A refusal is remembered for reviewCacheTTLDenied.
	h.eventually("Prometheus allowed once granted", reviewCacheTTLDenied+20*time.Second, func() (bool, string) {
		code, b, err := e.scrape(e.pool, e.token)
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %.200s", code, err, b)
	})
	return e
}

// writeCert writes a serving certificate into the mounted folder, as the kubelet updates a
// Secret volume (the new files appear at once), and returns a pool that trusts it.
func (e *metricsEndpoint) writeCert() *x509.CertPool {
	e.t.Helper()
	crt, key, err := newServingCert(e.names, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		tmp := filepath.Join(e.certDir, "."+name)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			e.t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(e.certDir, name)); err != nil {
			e.t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	return pool
}

// scrape GETs /metrics over TLS verified with pool for the Service's name, with token.
func (e *metricsEndpoint) scrape(pool *x509.CertPool, token string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: e.names[0], MinVersion: tls.VersionTLS12}}}
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, "https://"+e.addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// checkConditions finds every condition of the operator's object in a scrape.
func (e *metricsEndpoint) checkConditions(t *testing.T, h *harness) {
	_, body, err := e.scrape(e.pool, e.token)
	if err != nil {
		t.Fatal(err)
	}
	conds := h.clusterCSIDriver().Status.Conditions
	if len(conds) == 0 {
		t.Fatal("the operator's object has no conditions")
	}
	for _, c := range conds {
		want := fmt.Sprintf(`manila_operator_condition{condition=%q,reason=%q,status=%q} 1`, c.Type, c.Reason, c.Status)
		if !strings.Contains(body, want) {
			// A condition may have changed between the two reads: read the scrape again.
			if _, again, _ := e.scrape(e.pool, e.token); !strings.Contains(again, want) {
				t.Errorf("no %s in the scrape:\n%s", want, grepLines(again, "manila_operator_condition"))
			}
		}
	}
}

// checkOperatorMetrics scrapes the driver-mode operator as OpenShift's Prometheus does (see
// serveForPrometheus); the scrape must hold its conditions and every operator metric the alert
// rules use.
func checkOperatorMetrics(t *testing.T, h *harness, saCfg *rest.Config) {
	defer func(parent *testing.T) { h.t = parent }(h.t)
	h.t = t
	ctx := h.ctx
	e := serveForPrometheus(t, h, saCfg, testNS)
	pool, token := e.pool, e.token
	_, body, err := e.scrape(pool, token)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the conditions are there as they are on the ClusterCSIDriver", func(t *testing.T) {
		e.checkConditions(t, h)
		if !strings.Contains(body, `manila_operator_condition{condition="ManilaControllerDisabled",reason="ManilaAvailable",status="False"} 1`) {
			t.Errorf("ManilaControllerDisabled not in the scrape:\n%s", grepLines(body, "manila_operator_condition"))
		}
	})

	t.Run("every operator metric the alert rules use is exported", func(t *testing.T) {
		rule, err := assets.Render("prometheusrule.yaml", map[string]string{"NAMESPACE": testNS})
		if err != nil {
			t.Fatal(err)
		}
		used := slices.Compact(slices.Sorted(slices.Values(regexp.MustCompile(`manila_operator_[a-z_]+`).FindAllString(string(rule), -1))))
		if len(used) < 3 {
			t.Fatalf("the rules use only %v", used)
		}
		for _, name := range used {
			if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).MatchString(body) {
				t.Errorf("the rules use %s, which the operator does not export", name)
			}
		}
		// Manila was asked: the access rule counts start at 0 rather than being absent.
		for _, state := range accessRuleStates {
			if want := fmt.Sprintf(`manila_operator_volumes_access_rules_not_active{state=%q} 0`, state); !strings.Contains(body, want) {
				t.Errorf("no %s in the scrape:\n%s", want, grepLines(body, "access_rules"))
			}
		}
	})

	t.Run("a renewed certificate is served without a restart", func(t *testing.T) {
		renewed := e.writeCert()
		if code, _, err := e.scrape(renewed, token); err != nil || code != http.StatusOK {
			t.Errorf("with the renewed certificate: %d %v", code, err)
		}
		if _, _, err := e.scrape(pool, token); err == nil {
			t.Errorf("the old certificate is still served")
		}
	})

	t.Run("the operator's ServiceMonitor and PrometheusRule are applied with their CRDs", func(t *testing.T) {
		h.eventually("PrometheusRule and ServiceMonitor", settle, func() (bool, string) {
			_, err := h.dyn.Resource(machinery.PrometheusRuleGVR).Namespace(testNS).Get(ctx, "manila-csi-driver-operator", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			_, err = h.dyn.Resource(machinery.ServiceMonitorGVR).Namespace(testNS).Get(ctx, "manila-csi-driver-operator-monitor", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			svc, err := h.kube.CoreV1().Services(testNS).Get(ctx, OperatorMetricsService, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return svc.Spec.Selector["name"] == "manila-csi-driver-operator", fmt.Sprint(svc.Spec.Selector)
		})
	})
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// checkAccessRulesMetric makes one of the driver's volumes on a real share whose access rules
// failed, and waits for the operator to count it and name it. The loopback Manila's back end
// (the DummyDriver) applies every rule, so the failure is written where a back end's would
// land: the share instance's access_rules_status in Manila's database. Manila's API then
// reports it as it would a real one.
func checkAccessRulesMetric(t *testing.T, h *harness, cloud *testenv.Cloud) {
	defer func(parent *testing.T) { h.t = parent }(h.t)
	h.t = t
	ctx := h.ctx
	run := os.Getenv("MANILA_SETUP_RUN")
	if run == "" {
		t.Fatal("MANILA_SETUP_RUN is not set: run make test, or source the environment of test/env/openstack/up.sh")
	}
	db := filepath.Join(run, "openstack", "manila", "manila.sqlite")
	manila := manilaAs(t, ctx, cloud, testenv.CloudDemo)
	manila.Microversion = "2.10" // access_rules_status is in the share's view from 2.10
	share, err := shares.Create(ctx, manila, shares.CreateOpts{ShareProto: "NFS", Size: 1, ShareType: "default", Name: "metrics-access-rules"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shares.Delete(context.Background(), manila, share.ID).ExtractErr() })
	h.eventually("share available", settle, func() (bool, string) {
		s, err := shares.Get(ctx, manila, share.ID).Extract()
		if err != nil {
			return false, err.Error()
		}
		return s.Status == "available", s.Status
	})
	setRulesStatus := func(status string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, "sqlite3", "-cmd", ".timeout 30000", db,
			fmt.Sprintf("UPDATE share_instances SET access_rules_status = '%s' WHERE share_id = '%s';", status, share.ID)).CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3 %s: %v\n%s", db, err, out)
		}
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-metrics-access-rules"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: operator.DriverName, VolumeHandle: share.ID}},
	}}
	if _, err := h.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	count := func(state string) float64 {
		var m dto.Metric
		if err := VolumesAccessRulesNotActive.WithLabelValues(state).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}

	setRulesStatus("error")
	took := h.eventually("the volume counted with its rules in error", settle, func() (bool, string) {
		return count("error") == 1, fmt.Sprintf("error %v, syncing %v", count("error"), count("syncing"))
	})
	t.Logf("counted %.1fs after the rule failed (resync %s)", took.Seconds(), h.resync)
	h.eventually("a Warning Event names the volume and its share", settle, func() (bool, string) {
		evs, err := h.kube.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=VolumeAccessRulesNotActive"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, pv.Name+" (share "+share.ID+": error)") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})

	setRulesStatus("active")
	h.eventually("no longer counted once its rules are applied", settle, func() (bool, string) {
		return count("error") == 0, fmt.Sprintf("error %v", count("error"))
	})
}

// manilaAs is a Manila client of the cloud named in the test clouds.yaml.
func manilaAs(t *testing.T, ctx context.Context, cloud *testenv.Cloud, name string) *gophercloud.ServiceClient {
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName(name), clouds.WithLocations(cloud.CloudsFile))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		t.Fatal(err)
	}
	c, err := gopheropenstack.NewSharedFileSystemV2(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
