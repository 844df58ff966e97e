package controllers

import (
	"context"
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// secretController translates the clouds.yaml of Secret manila-cloud-credentials into the
// driver's Secret csi-manila-secrets, and keeps it current when the credentials rotate.
// Neither values nor diffs ever reach logs, events or conditions: only key names.
type secretController struct {
	operands
	// credentials reads the credentials Secret; errors are *ManilaError.
	credentials func() (*operator.Credentials, error)
}

const secretName = "DriverSecret"

// newSecretController watches the credentials Secret and the operator's own Secrets (secrets).
func newSecretController(w wiring) *machinery.Controller {
	c := &secretController{operands: w.ops, credentials: w.credentials}
	return w.loop.Controller(secretName+"Controller", c.sync, w.inf.Credentials, w.inf.Secrets)
}

// credentialsReader reads and parses the credentials Secret from the cache.
type credentialsReader struct {
	secrets   corelisters.SecretLister
	namespace string
	// cloud selects the cloud in clouds.yaml.
	cloud string
}

func (r credentialsReader) read() (*operator.Credentials, error) {
	s, err := r.secrets.Secrets(r.namespace).Get(operator.CredentialsSecretName)
	if apierrors.IsNotFound(err) {
		return nil, &ManilaError{Reason: ReasonNoCredentials, Message: fmt.Sprintf(
			"Secret %s/%s (key %s) not found: create it with the cloud's clouds.yaml (manila-setup operator install does)", r.namespace, operator.CredentialsSecretName, operator.CredentialsKey)}
	}
	if err != nil {
		return nil, err
	}
	y, ok := s.Data[operator.CredentialsKey]
	if !ok {
		return nil, &ManilaError{Reason: ReasonNoCredentials, Message: fmt.Sprintf("Secret %s/%s has no key %s", r.namespace, operator.CredentialsSecretName, operator.CredentialsKey)}
	}
	creds, err := operator.ParseCredentials(y, r.cloud, s.Data[operator.CredentialsCAKey])
	if err == nil {
		err = creds.SetClientCertificate(s.Data[operator.CredentialsClientCertKey], s.Data[operator.CredentialsClientKeyKey])
	}
	if err != nil {
		return nil, &ManilaError{Reason: ReasonAuthFailed, Message: fmt.Sprintf("Secret %s/%s: %v", r.namespace, operator.CredentialsSecretName, err)}
	}
	return creds, nil
}

func (c *secretController) sync(ctx context.Context, _ *machinery.Controller) error {
	spec := c.spec()
	if spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	ns := c.namespace
	if spec.ManagementState == operatorv1.Removed {
		err := c.deleteIfPresent(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName}})
		return firstErr(c.applyStatus(ctx, secretName, machinery.RemovedStatus(secretName, err)), err)
	}
	if !c.enabled() {
		return nil
	}
	creds, err := c.credentials()
	if err != nil {
		// Keep the last good driver secret: mounted volumes keep working.
		msg := err.Error() + "; the driver keeps its current credentials"
		return c.applyStatus(ctx, secretName, machinery.NewStatus().WithConditions(
			machinery.Condition(secretName+"Available", operatorv1.ConditionFalse, "InvalidCredentials", msg),
			machinery.Condition(secretName+"Degraded", operatorv1.ConditionTrue, "InvalidCredentials", msg),
		))
	}
	// The Secret may already be there without the operator's label (made by someone else, so
	// not in its cache): the apply takes it over.
	_, err = c.apply(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: ns, Labels: map[string]string{operator.LabelManagedBy: operator.ManagedByValue}},
		Type:       corev1.SecretTypeOpaque,
		Data:       creds.DriverSecretData(),
	})
	if err != nil {
		msg := fmt.Sprintf("writing Secret %s/%s failed: %s", ns, operator.DriverSecretName, machinery.APIReason(err))
		return firstErr(c.applyStatus(ctx, secretName, machinery.NewStatus().WithConditions(
			machinery.Condition(secretName+"Available", operatorv1.ConditionFalse, "ApplyFailed", msg),
			machinery.Condition(secretName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", msg),
		)), fmt.Errorf("%s", msg))
	}
	return c.applyStatus(ctx, secretName, machinery.AvailabilityStatus(secretName, nil,
		fmt.Sprintf("Secret %s holds the credentials of cloud %q", operator.DriverSecretName, creds.CloudName)))
}
