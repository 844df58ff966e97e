package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// The driver controller's kube-rbac-proxy sidecars serve its metrics with the certificate in
// Secret manila-csi-driver-controller-metrics-serving-cert, which its pods mount. On OpenShift the
// service-ca operator writes that Secret, because assets/service.yaml asks for it with the
// service.beta.openshift.io/serving-cert-secret-name annotation. On a cluster without a
// service-ca nothing does, and the controller pods never start. There the operator writes it
// itself: a self-signed certificate for the Service's DNS names, renewed before it expires.
const (
	// metricsServiceName and metricsServingCertSecret are the names in assets/service.yaml and
	// assets/controller.yaml (a unit test holds them to it).
	metricsServiceName       = "manila-csi-driver-controller-metrics"
	metricsServingCertSecret = "manila-csi-driver-controller-metrics-serving-cert"
	servingCertName          = "MetricsServingCert"

	// servingCertLifetime is how long a certificate the operator writes is valid, and
	// servingCertRenewBefore how long before its end it is replaced: a month leaves many resyncs
	// (and operator restarts) to do it in.
	servingCertLifetime    = 365 * 24 * time.Hour
	servingCertRenewBefore = 30 * 24 * time.Hour
	// servingCertBackdate covers clocks of other nodes that run a little behind.
	servingCertBackdate = time.Hour

	// serviceCACRD is the API of OpenShift's service-ca operator (operator.openshift.io ServiceCA).
	serviceCACRD = "servicecas.operator.openshift.io"
)

// serviceCAEvidence names what shows that OpenShift's service-ca runs in the cluster (and so
// writes the Secret), "" when nothing does. Both signals come from caches the operator keeps
// anyway, so asking costs no request and no permission:
//   - Infrastructure "cluster" (config.openshift.io): this is OpenShift, the same test as
//     operator/platform's Detect (reason NotOpenShift when absent). service-ca is a core
//     component of every OpenShift cluster, not an optional capability, so OpenShift implies it.
//   - the ServiceCA CRD: the service-ca operator's own API, for a cluster that has it without
//     the Infrastructure object.
//
// The namespace openshift-service-ca would be as telling, but reading namespaces needs a
// cluster-wide permission the operator does not otherwise hold. Either signal is enough to
// write nothing: writing beside a service-ca would fight it over the Secret, while not writing
// leaves the controller pods waiting for their Secret, as before this controller.
func serviceCAEvidence(infrastructure func() *configv1.Infrastructure, crdExists func(string) bool) func() string {
	return func() string {
		if infra := infrastructure(); infra != nil {
			return `Infrastructure "cluster" (config.openshift.io) shows OpenShift, which always runs service-ca`
		}
		if crdExists(serviceCACRD) {
			return "CustomResourceDefinition " + serviceCACRD + ": the service-ca operator's API is installed"
		}
		return ""
	}
}

// servingCertController writes the metrics serving certificate where no service-ca does.
type servingCertController struct {
	operands
	// secret reads Secret metricsServingCertSecret from a cache that holds it whoever wrote it
	// (nil when absent): the operator's other Secret cache holds only what carries its label.
	secret func() *corev1.Secret
	// serviceCA names the evidence of a service-ca, "" when there is none.
	serviceCA func() string
	now       func() time.Time

	// written is the content of the operator's last write: reused while it is still good, so
	// that a cache that has not caught up yet costs at most the same content again, never a
	// second certificate.
	written map[string][]byte
	// noted is the last message logged about a Secret that is not ours (logged once).
	noted string
}

// newServingCertController watches the Secret (secretInf, by name), and what the service-ca
// evidence comes from (infrastructures, crds).
func newServingCertController(w wiring) *machinery.Controller {
	ops, secretInf := w.ops, w.inf.SecretNamed(metricsServingCertSecret)
	c := &servingCertController{operands: ops, serviceCA: serviceCAEvidence(w.infrastructure, w.inf.CRDExists), now: time.Now,
		secret: func() *corev1.Secret {
			obj, ok, err := secretInf.GetIndexer().GetByKey(ops.namespace + "/" + metricsServingCertSecret)
			if err != nil || !ok {
				return nil
			}
			s, _ := obj.(*corev1.Secret)
			return s
		}}
	return w.loop.Controller(servingCertName+"Controller", c.sync, secretInf, w.inf.Infrastructures, w.inf.CRDs)
}

func (c *servingCertController) sync(ctx context.Context, _ *machinery.Controller) error {
	spec := c.spec()
	if spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	evidence := c.serviceCA()
	if spec.ManagementState == operatorv1.Removed {
		var err error
		if evidence == "" {
			// Only a Secret carrying the operator's label is in the cache deleteIfPresent reads.
			err = c.deleteIfPresent(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: metricsServingCertSecret}})
		}
		return firstErr(c.applyStatus(ctx, servingCertName, machinery.RemovedStatus(servingCertName, err)), err)
	}
	if !c.enabled() {
		return nil
	}
	where := c.namespace + "/" + metricsServingCertSecret
	if evidence != "" {
		return c.applyStatus(ctx, servingCertName, servingCertAvailable("ServiceCA", fmt.Sprintf(
			"%s: service-ca writes Secret %s for Service %s; the operator never writes it", evidence, where, metricsServiceName)))
	}
	names := servingCertNames(metricsServiceName, c.namespace)
	now := c.now()
	existing := c.secret()
	if existing != nil && !servingCertOurs(existing) {
		msg := fmt.Sprintf("Secret %s exists and is not the operator's (%s): left as it is, the controller's metrics sidecars serve the certificate it holds; "+
			"delete it to have the operator write a self-signed one", where, servingCertOwner(existing))
		if why := servingCertRenewal(existing.Data, names, now); why != "" {
			// Its owner's business, but worth knowing when the sidecars fail.
			msg += "; note that " + why
		}
		if msg != c.noted {
			klog.Infof("%s", msg)
			c.noted = msg
		}
		return c.applyStatus(ctx, servingCertName, servingCertAvailable("SecretNotOurs", msg))
	}
	c.noted = ""
	var data map[string][]byte
	why := "it does not exist"
	if existing != nil {
		data, why = existing.Data, servingCertRenewal(existing.Data, names, now)
		if why == "" && existing.Type != corev1.SecretTypeTLS {
			why = fmt.Sprintf("its type is %q, want %q", existing.Type, corev1.SecretTypeTLS)
		}
		if why == "" {
			c.written = nil // the cache has caught up with the last write
		}
	}
	if why != "" {
		var err error
		if data, err = c.content(names, now); err != nil {
			return err
		}
		if _, err := c.apply(ctx, servingCertSecret(c.namespace, data)); err != nil {
			msg := fmt.Sprintf("writing Secret %s failed: %s", where, machinery.APIReason(err))
			return firstErr(c.applyStatus(ctx, servingCertName, machinery.NewStatus().WithConditions(
				machinery.Condition(servingCertName+"Available", operatorv1.ConditionFalse, "ApplyFailed", msg),
				machinery.Condition(servingCertName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", msg),
			)), fmt.Errorf("%s", msg))
		}
		klog.Infof("Secret %s: self-signed serving certificate for %s written (%s)", where, strings.Join(names, ", "), why)
	}
	return c.applyStatus(ctx, servingCertName, servingCertAvailable("AsExpected", fmt.Sprintf(
		"no service-ca in this cluster: Secret %s holds the operator's self-signed certificate for %s, valid until %s, renewed %d days before",
		where, strings.Join(names, ", "), servingCertNotAfter(data).UTC().Format(time.RFC3339), int(servingCertRenewBefore.Hours()/24))))
}

// content is what the Secret must hold: the last write when it is still good (the cache has not
// shown it yet), else a new certificate.
func (c *servingCertController) content(names []string, now time.Time) (map[string][]byte, error) {
	if c.written != nil && servingCertRenewal(c.written, names, now) == "" {
		return c.written, nil
	}
	crt, key, err := newServingCert(names, now)
	if err != nil {
		return nil, fmt.Errorf("creating a serving certificate for %s: %w", strings.Join(names, ", "), err)
	}
	c.written = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
	return c.written, nil
}

func servingCertAvailable(reason, msg string) *machinery.Status {
	return machinery.NewStatus().WithConditions(
		machinery.Condition(servingCertName+"Available", operatorv1.ConditionTrue, reason, msg),
		machinery.Condition(servingCertName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
	)
}

// servingCertSecret is the Secret the operator writes: kubernetes.io/tls, with its label.
func servingCertSecret(namespace string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServingCertSecret, Namespace: namespace,
			Labels: map[string]string{operator.LabelManagedBy: operator.ManagedByValue}},
		Type: corev1.SecretTypeTLS,
		Data: data,
	}
}

// servingCertNames are the Service's DNS names, as service-ca puts them in its certificates.
func servingCertNames(service, namespace string) []string {
	host := service + "." + namespace + ".svc"
	return []string{host, host + ".cluster.local"}
}

// servingCertOurs: the Secret carries the operator's managed-by label and no other object
// controls it. Anything else (service-ca's, cert-manager's, a user's) is never written.
func servingCertOurs(s *corev1.Secret) bool {
	return s.Labels[operator.LabelManagedBy] == operator.ManagedByValue && metav1.GetControllerOf(s) == nil
}

// servingCertOwner says whose a Secret that is not ours looks to be, for the condition.
func servingCertOwner(s *corev1.Secret) string {
	if ref := metav1.GetControllerOf(s); ref != nil {
		return "controlled by " + ref.Kind + " " + ref.Name
	}
	var managers []string
	for _, f := range s.ManagedFields {
		if f.Manager != "" && f.Subresource == "" && !slices.Contains(managers, f.Manager) {
			managers = append(managers, f.Manager)
		}
	}
	if len(managers) == 0 {
		return "no " + operator.LabelManagedBy + "=" + operator.ManagedByValue + " label"
	}
	return "written by " + strings.Join(managers, ", ") + ", without the " + operator.LabelManagedBy + "=" + operator.ManagedByValue + " label"
}

// servingCertRenewal says why the Secret's content must be replaced, "" when it is good: a
// certificate and key that belong together, for exactly these names, valid at now and for
// longer than servingCertRenewBefore.
func servingCertRenewal(data map[string][]byte, names []string, now time.Time) string {
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		// The message of crypto/tls names what is wrong, never key material.
		return "its certificate and key are not a usable pair: " + err.Error()
	}
	if len(data) != 2 {
		return fmt.Sprintf("it has %d keys, want %s and %s only", len(data), corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	crt := pair.Leaf
	if got := slices.Sorted(slices.Values(crt.DNSNames)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		return fmt.Sprintf("its certificate is for %v, want %v", got, names)
	}
	if now.Before(crt.NotBefore) {
		return "its certificate is valid only from " + crt.NotBefore.UTC().Format(time.RFC3339)
	}
	if left := crt.NotAfter.Sub(now); left < servingCertRenewBefore {
		return fmt.Sprintf("its certificate expires at %s, within %d days", crt.NotAfter.UTC().Format(time.RFC3339), int(servingCertRenewBefore.Hours()/24))
	}
	return ""
}

// servingCertNotAfter is the end of the certificate in data (zero when there is none).
func servingCertNotAfter(data map[string][]byte) time.Time {
	block, _ := pem.Decode(data[corev1.TLSCertKey])
	if block == nil {
		return time.Time{}
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}
	}
	return crt.NotAfter
}

// newServingCert makes a self-signed ECDSA P-256 serving certificate for names, valid from
// now (backdated a little) for servingCertLifetime, as PEM.
func newServingCert(names []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		NotBefore:             now.Add(-servingCertBackdate),
		NotAfter:              now.Add(servingCertLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
