//go:build integration

package controllers

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/assets"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// checkOperatorMetrics serves the running operator's metrics as `operator start
// --metrics-address` does, with the operator's own client (saCfg) asking the real API server
// who a caller is and what it may do, and scrapes them as OpenShift's Prometheus does: with a
// ServiceAccount token, over TLS verified against the serving certificate service-ca would
// have written. The scrape must hold every operator metric the alert rules use.
func checkOperatorMetrics(t *testing.T, h *harness, saCfg *rest.Config) {
	ctx := h.ctx
	reg := metricsRegistry()
	reg.MustRegister(conditionCollector{self: h.op.self})
	certDir := t.TempDir()
	names := servingCertNames(OperatorMetricsService, testNS)
	writeCert := func() *x509.CertPool {
		t.Helper()
		crt, key, err := newServingCert(names, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		// As the kubelet updates a Secret volume: the new files appear at once.
		for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
			tmp := filepath.Join(certDir, "."+name)
			if err := os.WriteFile(tmp, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(certDir, name)); err != nil {
				t.Fatal(err)
			}
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(crt)
		return pool
	}
	pool := writeCert()
	srv, err := serveSecureMetrics("127.0.0.1:0", certDir, testNS, reg, newMetricsAuth(dynamic.NewForConfigOrDie(saCfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	scrape := func(pool *x509.CertPool, token string) (int, string, error) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: names[0], MinVersion: tls.VersionTLS12}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+srv.Addr+"/metrics", nil)
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

	if code, body, err := scrape(pool, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %q %v, want 401", code, body, err)
	}
	if code, body, err := scrape(pool, "not-a-token"); err != nil || code != http.StatusUnauthorized {
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
	token := tok.Status.Token
	if code, body, err := scrape(pool, token); err != nil || code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:"+monNS+":"+promSA) {
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
	var body string
	// A refusal is remembered for reviewCacheTTLDenied.
	h.eventually("Prometheus allowed once granted", reviewCacheTTLDenied+20*time.Second, func() (bool, string) {
		code, b, err := scrape(pool, token)
		body = b
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %v %.200s", code, err, b)
	})

	t.Run("the conditions are there as they are on the ClusterCSIDriver", func(t *testing.T) {
		for _, c := range h.clusterCSIDriver().Status.Conditions {
			want := fmt.Sprintf(`manila_operator_condition{condition=%q,reason=%q,status=%q} 1`, c.Type, c.Reason, c.Status)
			if !strings.Contains(body, want) {
				// A condition may have changed between the two reads: read the scrape again.
				if _, again, _ := scrape(pool, token); !strings.Contains(again, want) {
					t.Errorf("no %s in the scrape", want)
				}
			}
		}
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
		if len(used) < 4 {
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
		renewed := writeCert()
		if code, _, err := scrape(renewed, token); err != nil || code != http.StatusOK {
			t.Errorf("with the renewed certificate: %d %v", code, err)
		}
		if _, _, err := scrape(pool, token); err == nil {
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
