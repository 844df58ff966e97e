package controllers

import (
	"bytes"
	"context"
	"fmt"
	"github.com/manila-setup/manila-setup/operator"
	"sort"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func newSecretController(o *Operator) *controller {
	c := &secretController{operands: o.operands(), credentials: o.credentials}
	return o.newController(secretName+"Controller", c.sync, o.inf.credentials,
		o.inf.secrets)
}

// credentials reads and parses the credentials Secret from the cache.
func (o *Operator) credentials() (*operator.Credentials, error) {
	s, err := o.lister.credentials.Secrets(o.cfg.Namespace).Get(operator.CredentialsSecretName)
	if apierrors.IsNotFound(err) {
		return nil, &ManilaError{Reason: ReasonNoCredentials, Message: fmt.Sprintf(
			"Secret %s/%s (key %s) not found: create it with the cloud's clouds.yaml (manila-setup operator install does)", o.cfg.Namespace, operator.CredentialsSecretName, operator.CredentialsKey)}
	}
	if err != nil {
		return nil, err
	}
	y, ok := s.Data[operator.CredentialsKey]
	if !ok {
		return nil, &ManilaError{Reason: ReasonNoCredentials, Message: fmt.Sprintf("Secret %s/%s has no key %s", o.cfg.Namespace, operator.CredentialsSecretName, operator.CredentialsKey)}
	}
	creds, err := operator.ParseCredentials(y, o.cfg.CloudName, s.Data[operator.CredentialsCAKey])
	if err != nil {
		return nil, &ManilaError{Reason: ReasonAuthFailed, Message: fmt.Sprintf("Secret %s/%s: %v", o.cfg.Namespace, operator.CredentialsSecretName, err)}
	}
	return creds, nil
}

func (c *secretController) sync(ctx context.Context, _ *controller) error {
	spec := c.spec()
	if spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	ns := c.namespace
	if spec.ManagementState == operatorv1.Removed {
		err := c.deleteIfPresent(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName}})
		return firstErr(c.applyStatus(ctx, secretName, removedStatus(secretName, err)), err)
	}
	if !c.enabled() {
		return nil
	}
	creds, err := c.credentials()
	if err != nil {
		// Keep the last good driver secret: mounted volumes keep working.
		msg := err.Error() + "; the driver keeps its current credentials"
		return c.applyStatus(ctx, secretName, newStatus().WithConditions(
			condition(secretName+"Available", operatorv1.ConditionFalse, "InvalidCredentials", msg),
			condition(secretName+"Degraded", operatorv1.ConditionTrue, "InvalidCredentials", msg),
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
		msg := fmt.Sprintf("writing Secret %s/%s failed: %s", ns, operator.DriverSecretName, apiReason(err))
		return firstErr(c.applyStatus(ctx, secretName, newStatus().WithConditions(
			condition(secretName+"Available", operatorv1.ConditionFalse, "ApplyFailed", msg),
			condition(secretName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", msg),
		)), fmt.Errorf("%s", msg))
	}
	return c.applyStatus(ctx, secretName, availabilityStatus(secretName, nil,
		fmt.Sprintf("Secret %s holds the credentials of cloud %q", operator.DriverSecretName, creds.CloudName)))
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func keyList(d map[string][]byte) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}

// apiReason is an API error's reason and code, without the object it carried.
func apiReason(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return fmt.Sprintf("%s (HTTP %d)", st.Reason, st.Code)
	}
	return "request failed"
}
