package controllers

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// The names the controller writes under are those the assets use: the Service asks service-ca
// for this Secret, and the controller Deployment mounts it.
func TestServingCertNamesMatchAssets(t *testing.T) {
	vars := map[string]string{"NAMESPACE": "ns", "LOG_LEVEL": "2", "CLUSTER_ID": "c", "RUNTIME_CONFIG": "{}", "OPERATOR_NAME": "manila-csi-driver-operator",
		"TLS_MIN_VERSION": "VersionTLS12", "TLS_CIPHER_SUITES": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
	for k, p := range testImagesForUnit.ImageEnv() {
		vars[k] = *p
	}
	obj, err := operator.ReadAsset("service.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	svc := obj.(*corev1.Service)
	if svc.Name != metricsServiceName || svc.Annotations["service.beta.openshift.io/serving-cert-secret-name"] != metricsServingCertSecret {
		t.Errorf("service.yaml: Service %s asks for Secret %q; the operator writes %q for Service %s",
			svc.Name, svc.Annotations["service.beta.openshift.io/serving-cert-secret-name"], metricsServingCertSecret, metricsServiceName)
	}
	obj, err = operator.ReadAsset("controller.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	mounted := false
	for _, v := range obj.(*appsv1.Deployment).Spec.Template.Spec.Volumes {
		mounted = mounted || v.Secret != nil && v.Secret.SecretName == metricsServingCertSecret
	}
	if !mounted {
		t.Errorf("controller.yaml mounts no Secret %s", metricsServingCertSecret)
	}
	if got := servingCertNames("svc", "ns"); strings.Join(got, ",") != "svc.ns.svc,svc.ns.svc.cluster.local" {
		t.Errorf("servingCertNames: %v", got)
	}
}

func mustServingCert(t *testing.T, names []string, now time.Time) map[string][]byte {
	t.Helper()
	crt, key, err := newServingCert(names, now)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
}

// A new certificate: self-signed ECDSA P-256 for a server, for the names, valid for the lifetime.
func TestNewServingCert(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	names := servingCertNames(metricsServiceName, "ns")
	data := mustServingCert(t, names, now)
	block, _ := pem.Decode(data[corev1.TLSCertKey])
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if crt.PublicKeyAlgorithm != x509.ECDSA || crt.IsCA || len(crt.ExtKeyUsage) != 1 || crt.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("certificate: %v key, CA %v, ext key usage %v", crt.PublicKeyAlgorithm, crt.IsCA, crt.ExtKeyUsage)
	}
	if !crt.NotAfter.Equal(now.Add(servingCertLifetime)) || !crt.NotBefore.Before(now) {
		t.Errorf("valid %s to %s", crt.NotBefore, crt.NotAfter)
	}
	pool := x509.NewCertPool()
	pool.AddCert(crt)
	for _, n := range names {
		if _, err := crt.Verify(x509.VerifyOptions{DNSName: n, Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("verifying for %s: %v", n, err)
		}
	}
	if again := mustServingCert(t, names, now); bytes.Equal(again[corev1.TLSPrivateKeyKey], data[corev1.TLSPrivateKeyKey]) {
		t.Error("two certificates share a key")
	}
}

// When the content must be replaced: names, expiry, a broken pair, stray keys.
func TestServingCertRenewal(t *testing.T) {
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	names := servingCertNames(metricsServiceName, "ns")
	good := mustServingCert(t, names, issued)
	other := mustServingCert(t, names, issued)
	end := issued.Add(servingCertLifetime)
	for _, c := range []struct {
		name string
		data map[string][]byte
		now  time.Time
		want string // a part of the reason; "" for none
	}{
		{"fresh", good, issued, ""},
		{"31 days left", good, end.Add(-31 * 24 * time.Hour), ""},
		{"29 days left", good, end.Add(-29 * 24 * time.Hour), "within 30 days"},
		{"expired", good, end.Add(time.Hour), "within 30 days"},
		{"not valid yet", good, issued.Add(-2 * servingCertBackdate), "valid only from"},
		{"other names", mustServingCert(t, servingCertNames("other", "ns"), issued), issued, "want [" + names[0]},
		{"one name missing", mustServingCert(t, names[:1], issued), issued, "is for"},
		{"names in another order", mustServingCert(t, []string{names[1], names[0]}, issued), issued, ""},
		{"key of another certificate", map[string][]byte{corev1.TLSCertKey: good[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: other[corev1.TLSPrivateKeyKey]}, issued, "not a usable pair"},
		{"no key", map[string][]byte{corev1.TLSCertKey: good[corev1.TLSCertKey]}, issued, "not a usable pair"},
		{"empty", nil, issued, "not a usable pair"},
		{"garbage", map[string][]byte{corev1.TLSCertKey: []byte("x"), corev1.TLSPrivateKeyKey: []byte("y")}, issued, "not a usable pair"},
		{"a stray key", map[string][]byte{corev1.TLSCertKey: good[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: good[corev1.TLSPrivateKeyKey], "ca.crt": nil}, issued, "3 keys"},
	} {
		got := servingCertRenewal(c.data, names, c.now)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: renewal %q, want %q", c.name, got, c.want)
		}
		if strings.Contains(got, "PRIVATE KEY") || strings.Contains(got, string(good[corev1.TLSPrivateKeyKey])) {
			t.Errorf("%s: the reason quotes key material", c.name)
		}
	}
}

// Ours: the operator's label and no controlling owner; anything else is never written.
func TestServingCertOurs(t *testing.T) {
	ours := map[string]string{operator.LabelManagedBy: operator.ManagedByValue}
	for _, c := range []struct {
		name   string
		secret corev1.Secret
		want   bool
		owner  string
	}{
		{"ours", corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: ours}}, true, ""},
		{"service-ca's", corev1.Secret{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "service-ca-operator"}}}}, false, "written by service-ca-operator"},
		{"a user's, no manager", corev1.Secret{}, false, "no app.kubernetes.io/managed-by"},
		{"the installer's label value", corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{operator.LabelManagedBy: "manila-setup"}}}, false, "no app.kubernetes.io/managed-by"},
		{"our label, controlled by a Certificate", corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: ours,
			OwnerReferences: []metav1.OwnerReference{{Kind: "Certificate", Name: "metrics", Controller: ptr.To(true)}}}}, false, "controlled by Certificate metrics"},
	} {
		if got := servingCertOurs(&c.secret); got != c.want {
			t.Errorf("%s: ours %v", c.name, got)
		}
		if !c.want && !strings.Contains(servingCertOwner(&c.secret), c.owner) {
			t.Errorf("%s: owner %q, want %q", c.name, servingCertOwner(&c.secret), c.owner)
		}
	}
}

// The evidence of a service-ca: OpenShift's Infrastructure, or the ServiceCA CRD.
func TestServiceCAEvidence(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	for _, c := range []struct {
		name  string
		infra *configv1.Infrastructure
		crd   bool
		want  string
	}{
		{"plain Kubernetes", nil, false, ""},
		{"OpenShift", infra, false, "Infrastructure"},
		{"ServiceCA API only", nil, true, serviceCACRD},
	} {
		got := serviceCAEvidence(func() *configv1.Infrastructure { return c.infra }, func(n string) bool { return c.crd && n == serviceCACRD })()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: evidence %q, want %q", c.name, got, c.want)
		}
	}
}

// The controller's sync on fakes: what it writes, deletes and reports in each situation, and
// that a cache behind its own write costs no second certificate.
func TestServingCertControllerSync(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	names := servingCertNames(metricsServiceName, "ns")
	ourLabel := map[string]string{operator.LabelManagedBy: operator.ManagedByValue}
	secret := func(labels map[string]string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: metricsServingCertSecret, Namespace: "ns", Labels: labels}, Type: corev1.SecretTypeTLS, Data: data}
	}
	valid := mustServingCert(t, names, now.Add(-24*time.Hour))
	expiring := mustServingCert(t, names, now.Add(-servingCertLifetime+10*24*time.Hour))
	opaque := secret(ourLabel, valid)
	opaque.Type = corev1.SecretTypeOpaque
	tests := []struct {
		name      string
		state     operatorv1.ManagementState
		disabled  bool
		serviceCA string
		existing  *corev1.Secret
		applyErr  error
		write     string // "apply", "delete" or ""
		available string // "Status Reason" of the Available condition, "" for none
	}{
		{name: "Unmanaged", state: operatorv1.Unmanaged, existing: nil},
		{name: "driver not installed", state: operatorv1.Managed, disabled: true},
		{name: "OpenShift: service-ca's job", state: operatorv1.Managed, serviceCA: "Infrastructure", available: "True ServiceCA"},
		{name: "OpenShift, Secret absent: still not written", state: operatorv1.Managed, serviceCA: "CRD", existing: nil, available: "True ServiceCA"},
		{name: "OpenShift, Removed: service-ca's Secret stays", state: operatorv1.Removed, serviceCA: "Infrastructure", existing: secret(nil, valid), available: "False Removed"},
		{name: "absent: created", state: operatorv1.Managed, write: "apply", available: "True AsExpected"},
		{name: "ours and good: nothing written", state: operatorv1.Managed, existing: secret(ourLabel, valid), available: "True AsExpected"},
		{name: "ours, expiring: renewed", state: operatorv1.Managed, existing: secret(ourLabel, expiring), write: "apply", available: "True AsExpected"},
		{name: "ours, wrong names: renewed", state: operatorv1.Managed, existing: secret(ourLabel, mustServingCert(t, []string{"old.ns.svc"}, now)), write: "apply", available: "True AsExpected"},
		{name: "ours, not kubernetes.io/tls: rewritten", state: operatorv1.Managed, existing: opaque, write: "apply", available: "True AsExpected"},
		{name: "someone else's, expired: left alone", state: operatorv1.Managed, existing: secret(nil, expiring), available: "True SecretNotOurs"},
		{name: "write refused", state: operatorv1.Managed, applyErr: errors.New("forbidden"), write: "apply", available: "False ApplyFailed"},
		{name: "Removed: ours deleted", state: operatorv1.Removed, existing: secret(ourLabel, valid), write: "delete", available: "False Removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes []string
			var applied *corev1.Secret
			var status *machinery.Status
			c := &servingCertController{
				operands: operands{
					namespace: "ns",
					spec:      func() *operatorv1.OperatorSpec { return &operatorv1.OperatorSpec{ManagementState: tt.state} },
					enabled:   func() bool { return !tt.disabled },
					apply: func(_ context.Context, obj runtime.Object) (runtime.Object, error) {
						writes = append(writes, "apply")
						applied = obj.(*corev1.Secret)
						return obj, tt.applyErr
					},
					deleteIfPresent: func(context.Context, runtime.Object) error {
						writes = append(writes, "delete")
						return nil
					},
					applyStatus: func(_ context.Context, _ string, st *machinery.Status) error {
						status = st
						return nil
					},
				},
				secret:    func() *corev1.Secret { return tt.existing },
				serviceCA: func() string { return tt.serviceCA },
				now:       func() time.Time { return now },
			}
			err := c.sync(context.Background(), nil)
			if (err != nil) != (tt.applyErr != nil) {
				t.Errorf("sync: %v", err)
			}
			if got := strings.Join(writes, ","); got != tt.write {
				t.Errorf("writes %q, want %q", got, tt.write)
			}
			got := ""
			if a := availableOf(status); a != nil {
				got = string(a.Status) + " " + a.Reason
			}
			if got != tt.available {
				t.Errorf("Available %q, want %q", got, tt.available)
			}
			if applied == nil {
				return
			}
			if applied.Name != metricsServingCertSecret || applied.Namespace != "ns" || applied.Type != corev1.SecretTypeTLS ||
				applied.Labels[operator.LabelManagedBy] != operator.ManagedByValue {
				t.Errorf("applied Secret %s/%s type %s labels %v", applied.Namespace, applied.Name, applied.Type, applied.Labels)
			}
			if why := servingCertRenewal(applied.Data, names, now); why != "" {
				t.Errorf("the written certificate would be replaced at once: %s", why)
			}
			if a := availableOf(status); a != nil && strings.Contains(a.Message, string(applied.Data[corev1.TLSPrivateKeyKey])) {
				t.Error("the condition quotes the key")
			}
		})
	}
}

// A cache that has not shown the operator's write yet: the next sync applies the same content
// (which the writer then finds up to date), never a second certificate.
func TestServingCertControllerReusesItsWrite(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	var applied []map[string][]byte
	c := &servingCertController{
		operands: operands{
			namespace: "ns",
			spec:      func() *operatorv1.OperatorSpec { return &operatorv1.OperatorSpec{ManagementState: operatorv1.Managed} },
			enabled:   func() bool { return true },
			apply: func(_ context.Context, obj runtime.Object) (runtime.Object, error) {
				applied = append(applied, obj.(*corev1.Secret).Data)
				return obj, nil
			},
			applyStatus: func(context.Context, string, *machinery.Status) error { return nil },
		},
		secret:    func() *corev1.Secret { return nil },
		serviceCA: func() string { return "" },
		now:       func() time.Time { return now },
	}
	for range 2 {
		if err := c.sync(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(applied) != 2 || !bytes.Equal(applied[0][corev1.TLSCertKey], applied[1][corev1.TLSCertKey]) {
		t.Fatalf("%d applies; the second with another certificate: %v", len(applied), len(applied) == 2)
	}
	// The cache caught up: nothing more is written, and a later renewal makes a new certificate.
	c.secret = func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{operator.LabelManagedBy: operator.ManagedByValue}}, Type: corev1.SecretTypeTLS, Data: applied[0]}
	}
	if err := c.sync(context.Background(), nil); err != nil || len(applied) != 2 || c.written != nil {
		t.Fatalf("with the cache caught up: %v, %d applies, remembered %v", err, len(applied), c.written != nil)
	}
}

func availableOf(st *machinery.Status) *operatorv1.OperatorCondition {
	if st == nil {
		return nil
	}
	return machinery.FindCondition(st.Conditions, servingCertName+"Available")
}
