//go:build integration

package controllers

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// servingCertWrites are the operator's writes of the metrics serving certificate Secret after
// since, from the apiserver's audit log.
func servingCertWrites(t *testing.T, api *testenv.APIServer, since time.Time) []testenv.AuditWrite {
	t.Helper()
	writes, err := api.Writes(func(w testenv.AuditWrite) bool {
		return testenv.ByUserAgent(operator.OperatorName)(w) && w.Resource == "secrets" && w.Name == metricsServingCertSecret && !w.Time.Before(since)
	})
	if err != nil {
		t.Fatal(err)
	}
	return writes
}

func (h *harness) servingCertSecret() (*corev1.Secret, error) {
	return h.kube.CoreV1().Secrets(testNS).Get(h.ctx, metricsServingCertSecret, metav1.GetOptions{})
}

// TestServingCertOnPlainKubernetes: no Infrastructure, no ServiceCA API (Kubernetes without
// OpenShift's APIs), driver mode. The operator writes the metrics serving certificate Secret the
// controller pods mount: kubernetes.io/tls, its label, a certificate for the Service's DNS
// names whose key belongs to it; then, in steady state, writes it no more.
func TestServingCertOnPlainKubernetes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h := installAndRun(t, ctx, api, cloudsYAMLFor(t, cloud, testenv.CloudDemo, strings.TrimSuffix(cloud.Seed.KeystoneURL, "/v3")))

	h.eventually("operands deployed", settle, h.operandsExist)
	h.eventually("the serving certificate Secret written", settle, func() (bool, string) {
		_, err := h.servingCertSecret()
		return err == nil, fmt.Sprint(err)
	})
	h.eventually(servingCertName+"Available=True AsExpected", settle, h.condIs(servingCertName+"Available", operatorv1.ConditionTrue, "AsExpected"))
	t.Logf("%s: %s", servingCertName+"Available", h.condition(servingCertName+"Available").Message)

	s, err := h.servingCertSecret()
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeTLS || s.Labels[operator.LabelManagedBy] != operator.ManagedByValue {
		t.Errorf("Secret type %s, labels %v", s.Type, s.Labels)
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatalf("the Secret's certificate and key: %v", err)
	}
	want := []string{metricsServiceName + "." + testNS + ".svc", metricsServiceName + "." + testNS + ".svc.cluster.local"}
	if got := slices.Sorted(slices.Values(pair.Leaf.DNSNames)); !slices.Equal(got, want) {
		t.Errorf("certificate for %v, want %v", got, want)
	}
	if left := time.Until(pair.Leaf.NotAfter); left < servingCertRenewBefore {
		t.Errorf("certificate ends at %s: would be renewed at once", pair.Leaf.NotAfter)
	}
	if w := servingCertWrites(t, api, time.Time{}); len(w) == 0 {
		t.Error("the audit log shows no write of the Secret by the operator")
	}

	// Steady state: two more syncs of every controller (at least one whole resync) after it
	// has settled and written the messages it held back (machinery.MessageRefresh), and the
	// Secret is not written again.
	h.waitSyncs(2)
	time.Sleep(machinery.MessageRefresh)
	h.waitSyncs(1)
	from := time.Now()
	h.waitSyncs(3)
	if w := servingCertWrites(t, api, from); len(w) != 0 {
		t.Errorf("steady state: the operator wrote the Secret again: %v", w)
	}
	all, err := api.Writes(func(w testenv.AuditWrite) bool {
		return testenv.ByUserAgent(operator.OperatorName)(w) && !w.Time.Before(from) && w.Resource != "events" && w.Resource != "leases"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Errorf("steady state: %d writes by the operator: %v", len(all), all)
	}
	again, err := h.servingCertSecret()
	if err != nil || again.ResourceVersion != s.ResourceVersion {
		t.Errorf("the Secret changed in steady state (resourceVersion %s -> %v, %v)", s.ResourceVersion, again.ResourceVersion, err)
	}

	// Deleted: written again, with a new certificate.
	if err := h.kube.CoreV1().Secrets(testNS).Delete(ctx, metricsServingCertSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the deleted Secret written again", settle, func() (bool, string) {
		s, err := h.servingCertSecret()
		return err == nil && s.UID != again.UID, fmt.Sprint(err)
	})
}

// TestServingCertOnOpenShift: OpenShift on OpenStack, driver mode. The service-ca writes the
// Secret (played here by testenv.FulfilServingCertSecrets), the operator never does, not before
// service-ca, not after, and says so.
func TestServingCertOnOpenShift(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cc := configclient.NewForConfigOrDie(api.Config)
	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "ostest-cert1", PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := installAndRun(t, ctx, api, cloudsYAMLFor(t, cloud, testenv.CloudDemo, strings.TrimSuffix(cloud.Seed.KeystoneURL, "/v3")))

	h.eventually("operands deployed", settle, h.operandsExist)
	h.eventually(servingCertName+"Available=True ServiceCA", settle, h.condIs(servingCertName+"Available", operatorv1.ConditionTrue, "ServiceCA"))
	t.Logf("%s: %s", servingCertName+"Available", h.condition(servingCertName+"Available").Message)
	h.waitSyncs(2)
	if _, err := h.servingCertSecret(); !apierrors.IsNotFound(err) {
		t.Errorf("before service-ca ran, the Secret is there (%v)", err)
	}

	// Two Services ask for one: the driver controller's metrics, and the operator's own.
	wrote, err := testenv.FulfilServingCertSecrets(ctx, api.Client, testNS)
	if want := []string{testNS + "/" + metricsServingCertSecret, testNS + "/" + OperatorMetricsService + "-serving-cert"}; err != nil || !slices.Equal(wrote, want) {
		t.Fatalf("service-ca stand-in wrote %v (%v), want %v", wrote, err, want)
	}
	written, err := h.servingCertSecret()
	if err != nil {
		t.Fatal(err)
	}
	h.waitSyncs(3)
	if w := servingCertWrites(t, api, time.Time{}); len(w) != 0 {
		t.Errorf("the operator wrote the Secret on OpenShift: %v", w)
	}
	if s, err := h.servingCertSecret(); err != nil || s.ResourceVersion != written.ResourceVersion || s.Labels[operator.LabelManagedBy] != "" {
		t.Errorf("service-ca's Secret changed: %v, labels %v", err, s.Labels)
	}
	if ok, msg := h.condIs(servingCertName+"Degraded", operatorv1.ConditionFalse, "")(); !ok {
		t.Error(msg)
	}
}

// TestServingCertLeavesOthersSecret: on plain Kubernetes a Secret of that name already exists,
// written by someone else (cert-manager, say) and not even valid: the operator leaves it as it
// is, and its condition and log say why.
func TestServingCertLeavesOthersSecret(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logs := &testenv.SyncBuffer{}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(logs)
	defer klog.SetOutput(os.Stderr)

	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreign, err := api.Client.CoreV1().Secrets(testNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServingCertSecret, Namespace: testNS},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte("not a certificate"), corev1.TLSPrivateKeyKey: []byte("not a key")},
	}, metav1.CreateOptions{FieldManager: "cert-manager-certificates-issuing"})
	if err != nil {
		t.Fatal(err)
	}
	h := installAndRun(t, ctx, api, cloudsYAMLFor(t, cloud, testenv.CloudDemo, strings.TrimSuffix(cloud.Seed.KeystoneURL, "/v3")))
	h.logs = logs

	h.eventually("operands deployed", settle, h.operandsExist)
	h.eventually(servingCertName+"Available=True SecretNotOurs", settle, h.condIs(servingCertName+"Available", operatorv1.ConditionTrue, "SecretNotOurs"))
	msg := h.condition(servingCertName + "Available").Message
	t.Logf("%s: %s", servingCertName+"Available", msg)
	if !strings.Contains(msg, "cert-manager-certificates-issuing") || !strings.Contains(msg, "left as it is") || !strings.Contains(msg, "not a usable pair") {
		t.Errorf("the condition does not say whose the Secret is and what the operator did: %s", msg)
	}
	h.waitSyncs(3)
	if !strings.Contains(logs.String(), "is not the operator's") {
		t.Errorf("the log does not say why the Secret was left alone:\n%s", tail(logs.String(), 20))
	}
	if n := strings.Count(logs.String(), "is not the operator's"); n != 1 {
		t.Errorf("the log says it %d times, want once", n)
	}
	if w := servingCertWrites(t, api, time.Time{}); len(w) != 0 {
		t.Errorf("the operator wrote someone else's Secret: %v", w)
	}
	s, err := h.servingCertSecret()
	if err != nil || s.ResourceVersion != foreign.ResourceVersion || len(s.Labels) != 0 {
		t.Errorf("the Secret changed: %v (labels %v)", err, s.Labels)
	}
	if ok, msg := h.condIs(servingCertName+"Degraded", operatorv1.ConditionFalse, "")(); !ok {
		t.Error(msg)
	}
}
